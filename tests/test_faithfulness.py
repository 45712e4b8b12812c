"""What the audit of issue 10 found: each number is the one the paper means, and the runner leaks no
label through the order of a step's data."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.protocol.step import step_order
from bench.protocol.runner import execute
from bench.runs.rundir import METRICS, run_dir
from tests.helpers import TINY, tiny_specs

TINY_CLI = [f"{k}={v}" for k, v in TINY.items()] + ["method.epochs=3"]


def selection(tmp_path, *methods, options=()):
    return ["--grid", "smoke", "--methods", *methods, "--results", str(tmp_path), "--backbone", "pixels",
            "--cfg-options", *TINY_CLI, *options]


def test_kmeans_reports_one_match_sample_weighted_A_and_task_agnostic_F(capsys, tmp_path):
    """The paper's K-means F (62-99) is the task-agnostic one; its A one Hungarian match, sample-weighted."""
    argv = selection(tmp_path, "K-means", "Baseline")
    assert main(["run", "--cluster", "debug", *argv]) == 0
    out = capsys.readouterr().out
    kmeans_line = next(line for line in out.splitlines() if "K-means" in line and "|" in line)
    assert "K-means (reference)" in kmeans_line and "W, sample-weighted · W/O" in kmeans_line
    baseline_line = next(line for line in out.splitlines() if "| Baseline " in line)
    assert "(reference)" not in baseline_line and "W/O · W/O" in baseline_line

    assert main(["report", "--format", "csv", *argv]) == 0
    table = pd.read_csv(tmp_path / "reports" / "smoke" / "table.csv").set_index(["method", "metric"])
    (spec,) = tiny_specs(methods=["K-means"])
    frame = pd.read_parquet(run_dir(tmp_path, spec) / METRICS)
    summary = frame[frame["group"] == "summary"].set_index(["flavour", "metric"])["value"]
    assert summary[("wo", "F")] != pytest.approx(summary[("w", "F")])  # the flavours differ on this run
    assert table.loc[("K-means", "F"), "mean"] == pytest.approx(summary[("wo", "F")], abs=1e-3)
    assert table.loc[("K-means", "A"), "mean"] == pytest.approx(summary[("w", "A_sample")], abs=1e-3)
    assert table.loc[("K-means", "A"), "source"] == "w/A_sample"
    # and in Tab. 2's layout, where the paper's K-means F lives
    from bench.reporting.aggregate import final_scores
    from bench.reporting.table import render_table

    tab2 = pd.read_csv(__import__("io").StringIO(render_table(final_scores(frame), "csv", layout="references")))
    assert tab2.set_index("metric").loc["F", "mean"] == pytest.approx(summary[("wo", "F")], abs=1e-3)


def test_a_methods_reported_flavour_is_read_per_metric():
    from bench.reporting.aggregate import final_scores, step_curves

    rows = [dict(step=1, group="summary", flavour=f, metric=m, value=v) for (f, m), v in
            {("wo", "A"): 3.0, ("wo", "A_sample"): 4.0, ("w", "A"): 70.0, ("w", "A_sample"): 72.0,
             ("wo", "F"): 90.0, ("w", "F"): 5.0}.items()]
    rows += [dict(step=k, group="all", flavour=f, metric=m, value=v) for k in (0, 1)
             for (f, m), v in {("w", "acc"): 1.0, ("w", "acc_sample"): 2.0, ("wo", "acc"): 3.0}.items()]
    frame = pd.DataFrame(rows).assign(run_id="r", method="K-means", preset="code", label="K-means", dataset="d",
                                      split="2-step", n_steps=2, backbone="b", seed=0, reported_A="w/A_sample",
                                      reported_F="wo/F", features="plain features")
    scores = final_scores(frame).set_index("metric")
    assert scores.loc["A", "mean"] == 72.0 and scores.loc["F", "mean"] == 90.0
    assert set(step_curves(frame)["mean"]) == {2.0}  # the curve in A's flavour and weighting


def test_reports_say_how_features_were_computed(capsys, tmp_path):
    assert main(["run", "--cluster", "debug", *selection(tmp_path, "Baseline", "K-means")]) == 0
    exact = selection(tmp_path, "Baseline", options=["features.mode=exact"])
    assert main(["run", "--cluster", "debug", *exact]) == 0
    assert main(["report", "--format", "latex", *selection(tmp_path, "Baseline", "K-means")]) == 0
    caption = next(line for line in (tmp_path / "reports" / "smoke" / "table.tex").read_text().splitlines()
                   if line.startswith(r"\caption"))
    assert "Features: bank V=2 (Baseline); plain features (K-means)" in caption
    assert "not the paper's fresh views" in caption
    assert "except K-means: A W, sample-weighted; F W/O" in caption
    capsys.readouterr()
    assert main(["report", "--format", "csv", "--compare", "paper", *exact]) == 0
    compared = pd.read_csv(tmp_path / "reports" / "smoke" / "compare_paper.csv")
    assert set(compared["features"]) == {"exact"} and set(compared["source"]) == {"wo/A", "wo/F"}


def test_each_step_arrives_in_a_seeded_random_order_never_grouped_by_class(monkeypatch, tmp_path):
    from bench.features.views import FeatureViews

    labels = np.repeat(np.arange(3), 12)  # grouped by class, as TinyImageNet, CUB and Herbarium deliver them
    order = step_order(np.arange(36), seed=0, step=0)
    assert sorted(order.tolist()) == list(range(36))
    assert (np.diff(labels[order]) != 0).sum() > 10  # classes interleaved, not three runs
    assert np.array_equal(order, step_order(np.arange(36), seed=0, step=0))
    assert not np.array_equal(order, step_order(np.arange(36), seed=1, step=0))
    assert not np.array_equal(order, step_order(np.arange(36), seed=0, step=1))

    # the runner hands the method its step's training rows in that order
    given = []
    real = FeatureViews.subset
    monkeypatch.setattr(FeatureViews, "subset",
                        lambda self, index: given.append((self.views.shape[1], np.asarray(index))) or real(self, index))
    (spec,) = tiny_specs(**{"method.epochs": 1})
    execute(spec, tmp_path)
    train_labels = np.repeat(np.arange(6), 12)  # synthetic's training images, grouped by class
    step0 = next(index for views, index in given if views > 0)  # the first subset with views: step 0's training data
    assert np.array_equal(step0, step_order(np.flatnonzero(train_labels < 3), spec.seed, 0))


def test_a_run_records_which_images_froze_the_mapping_and_warns_of_classes_without_one(monkeypatch, tmp_path):
    import bench.protocol.planning as planning
    from bench.data import build_dataset

    def without_val_for_class_1(*args, **kwargs):
        data = build_dataset(*args, **kwargs)
        data.val = data.train.subset(data.train.labels != 1)  # a held-out partition that misses class 1
        return data

    monkeypatch.setattr(planning, "build_dataset", without_val_for_class_1)
    (spec,) = tiny_specs(**{"method.epochs": 1})
    out = execute(spec, tmp_path)
    log = (out / "log.txt").read_text()
    assert "task mappings frozen on the held-out validation images" in log
    assert "WARNING: 1 class(es) have no val image to freeze the task mapping from (e.g. class 1 'class_1')" in log
    assert set(pd.read_parquet(out / METRICS)["mapping_images"]) == {"val"}

    monkeypatch.undo()
    (plain,) = tiny_specs(**{"method.epochs": 2})
    out = execute(plain, tmp_path)
    assert "frozen on the training images" in (out / "log.txt").read_text()
    assert "WARNING" not in (out / "log.txt").read_text()
    assert set(pd.read_parquet(out / METRICS)["mapping_images"]) == {"train"}

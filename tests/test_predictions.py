"""Stored predictions (bench/runs/predictions.py) and `bench metrics recompute` (bench/protocol/recompute.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.runs.predictions import PREDICTIONS, Keys
from bench.protocol.runner import execute
from bench.runs.rundir import METRICS
from tests.helpers import killed_then_resumed, tiny_specs

ARGV = ["--grid", "smoke", "--methods", "K-means", "Baseline", "--backbone", "pixels", "--splits", "5-step"]


@pytest.fixture
def finished(tmp_path):
    assert main(["run", *ARGV, "--cluster", "debug", "--results", str(tmp_path), "--cfg-options",
                 "dataset.num_classes=10"]) == 0
    return sorted((tmp_path / "runs").glob("*"))


def values(run):
    frame = pd.read_parquet(run / METRICS)
    return frame.set_index(["step", "group", "flavour", "metric"])["value"].sort_index()


def test_a_run_keeps_what_the_evaluator_was_given_and_recomputes_to_the_same_metrics(finished, tmp_path, capsys):
    for run in finished:
        with np.load(run / PREDICTIONS) as stored:
            assert [int(s) for s in stored[Keys.sizes]] == [2] * 5
            unified, labels = stored[Keys.unified(4)], stored[Keys.test_labels(4)]
            assert unified.dtype == np.int8 and len(unified) == len(labels)
            # step 1 is evaluated on task 1's classes only
            assert set(np.unique(stored[Keys.test_labels(0)])) == {0, 1}
    before = {run: (run / METRICS).read_bytes() for run in finished}
    capsys.readouterr()
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 0
    assert "0 changed, 2 unchanged" in capsys.readouterr().out
    assert all((run / METRICS).read_bytes() == before[run] for run in finished)  # idempotent: not even rewritten


def test_a_changed_metric_definition_changes_only_that_metric(finished, tmp_path, capsys, monkeypatch):
    import sklearn.metrics

    before = {run: values(run) for run in finished}
    columns = {run: list(pd.read_parquet(run / METRICS).columns) for run in finished}
    monkeypatch.setattr(sklearn.metrics, "normalized_mutual_info_score", lambda a, b: 0.5)
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 changed" in out and "w/nmi" in out
    for run in finished:
        after = values(run)
        moved = after.index[after != before[run]]
        assert len(moved) and set(moved.get_level_values("metric")) == {"nmi"}
        assert (after.xs("nmi", level="metric") == 0.5).all()
        assert list(pd.read_parquet(run / METRICS).columns) == columns[run]  # identity and provenance kept


def test_a_run_recorded_before_predictions_were_kept_is_listed_and_left_alone(finished, tmp_path, capsys):
    legacy = finished[0]
    (legacy / PREDICTIONS).unlink()
    before = (legacy / METRICS).read_bytes()
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{legacy.name}: skipped, no stored predictions" in out and "1 without stored predictions" in out
    assert (legacy / METRICS).read_bytes() == before
    assert main(["report", "--results", str(tmp_path), "--format", "csv"]) == 0  # and it still reports


def test_nothing_finished_is_one_line(tmp_path, capsys):
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"bench: error: no finished runs under {tmp_path}"


def test_a_resumed_run_stores_the_same_predictions(tmp_path, monkeypatch):
    (spec,) = tiny_specs(methods=["Baseline"], splits=["5-step"], **{"dataset.num_classes": 10})
    whole = execute(spec, tmp_path / "whole")
    from bench.methods.baseline import Baseline

    resumed = killed_then_resumed(spec, tmp_path / "resumed", Baseline, 2, monkeypatch)  # resumes after step 1
    with np.load(whole / PREDICTIONS) as a, np.load(resumed / PREDICTIONS) as b:
        assert sorted(a.files) == sorted(b.files)
        assert all(np.array_equal(a[k], b[k]) for k in a.files)


# --- class orders as a protocol axis -------------------------------------------------------------------

def test_two_class_orders_give_two_runs_with_other_tasks(tmp_path):
    from bench.data import build_dataset

    canonical, first, second = (tiny_specs(methods=["Baseline"], **{"dataset.num_classes": 10, **extra})[0]
                                for extra in ({}, {"split.class_order_seed": 1}, {"split.class_order_seed": 2}))
    assert len({canonical.run_id, first.run_id, second.run_id}) == 3
    assert "split" not in canonical.identity()["config"]  # the canonical order keeps the ids runs had before
    assert first.split_label == "2-step · order 1" and "order 1" in first.describe()
    data = build_dataset("synthetic", canonical.config["dataset"])
    tasks = []
    for seed in (None, 1, 2):
        ordered = data.with_class_order(seed)
        names = [ordered.class_names[c] for c in range(5)]  # task 1's classes under this order
        assert sorted(ordered.class_names) == sorted(data.class_names)
        assert [ordered.class_names[y] for y in ordered.train.labels] == [data.class_names[y] for y in data.train.labels]
        tasks.append(names)
    assert tasks[0] == data.class_names[:5] and tasks[1] != tasks[0] and tasks[2] != tasks[1]
    out = execute(first, tmp_path)
    frame = pd.read_parquet(out / METRICS)
    assert set(frame["split"]) == {"2-step · order 1"}
    assert "class order 1: the canonical classes in the order" in (out / "log.txt").read_text()


def test_runs_of_several_class_orders_report_apart_or_pooled(tmp_path, capsys):
    argv = ["--grid", "smoke", "--methods", "K-means", "--backbone", "pixels", "--results", str(tmp_path)]
    for order in ("1", "2"):
        assert main(["run", *argv, "--cluster", "debug", "--cfg-options", f"split.class_order_seed={order}"]) == 0
    capsys.readouterr()
    assert main(["report", "--results", str(tmp_path), "--format", "csv"]) == 0
    table = pd.read_csv(tmp_path / "reports" / "all" / "table.csv")
    assert sorted(set(table["split"])) == ["2-step · order 1", "2-step · order 2"] and set(table["n"]) == {1}
    assert main(["report", "--results", str(tmp_path), "--format", "csv", "--pool-orders"]) == 0
    table = pd.read_csv(tmp_path / "reports" / "all" / "table.csv")
    assert set(table["split"]) == {"2-step · class orders"} and set(table["n"]) == {2}


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
@pytest.mark.parametrize("command", ["run", "metrics recompute"])
def test_unreadable_metrics_are_rebuilt_from_the_predictions_without_training(finished, tmp_path, capsys, monkeypatch,
                                                                              command, damage):
    """A re-run costs GPU-hours: a finished run whose metrics.parquet is missing or damaged, but whose
    predictions.npz is intact, gets the same metrics back from its predictions, and nothing trains."""
    from bench.methods.baseline import Baseline

    run = next(r for r in finished if '"Baseline"' in (r / "spec.json").read_text())
    original = pd.read_parquet(run / METRICS)
    if damage == "deleted":
        (run / METRICS).unlink()
    else:
        (run / METRICS).write_bytes((run / METRICS).read_bytes()[:200])

    def trained_again(self, step):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(Baseline, "learn", trained_again)
    capsys.readouterr()
    argv = (["run", *ARGV, "--cluster", "debug", "--cfg-options", "dataset.num_classes=10"] if command == "run"
            else ["metrics", "recompute"])
    assert main([*argv, "--results", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if command == "run":
        assert f"run {run.name}: {run / METRICS} could not be read" in err and "rebuilt from its predictions.npz" in err
        assert "all 2 runs already done" in out
    else:
        assert f"{run.name}: {METRICS} unreadable" in out and "1 rebuilt" in out
    assert "rebuilt from predictions.npz without running again" in (run / "log.txt").read_text()
    rebuilt = pd.read_parquet(run / METRICS)
    identity = list(original.columns[: original.columns.get_loc("value") + 1])  # identity, keys, value
    keys = ["step", "group", "flavour", "metric"]
    pd.testing.assert_frame_equal(rebuilt[identity].sort_values(keys).reset_index(drop=True),
                                  original[identity].sort_values(keys).reset_index(drop=True))
    assert (rebuilt["rebuilt_from"] == PREDICTIONS).all()
    # the training's provenance, which the predictions keep: no `unknown` to make a report warn of mixed versions
    for column in ("device", "torch_version", "weights_sha256", "host", "started_at", "duration_s", "threads",
                   "method_sha256"):
        assert (rebuilt[column] == original[column].iloc[0]).all(), column
    assert (run / "DONE").exists() and len(list(run.glob(f"damaged-*/{METRICS}"))) == (damage == "truncated")
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 0  # and from now on it is a finished run
    assert "0 changed, 2 unchanged, 0 rebuilt" in capsys.readouterr().out


def test_runs_finished_before_they_kept_provenance_rebuild_with_unknown_versions(finished, tmp_path):
    from bench.protocol.recompute import rebuilt_frame

    run = next(r for r in finished if '"Baseline"' in (r / "spec.json").read_text())
    (run / "provenance.json").unlink()
    rebuilt = rebuilt_frame(run)
    assert (rebuilt["device"] == "unknown").all() and (rebuilt["torch_version"] == "unknown").all()
    # another run's provenance (copied in) is not this run's
    other = next(r for r in finished if r != run)
    (run / "provenance.json").write_text((other / "provenance.json").read_text())
    assert (rebuilt_frame(run)["torch_version"] == "unknown").all()


def test_a_worker_given_the_damaged_run_rebuilds_it_too(finished, tmp_path, monkeypatch):
    """`execute` (what the workers and SLURM jobs call) rebuilds rather than trains as well."""
    from bench.config.spec import RunSpec
    from bench.methods.baseline import Baseline

    run = next(r for r in finished if '"Baseline"' in (r / "spec.json").read_text())
    original = pd.read_parquet(run / METRICS)
    (run / METRICS).write_bytes(b"garbage")
    monkeypatch.setattr(Baseline, "learn", lambda self, step: pytest.fail("a finished run was trained again"))
    execute(RunSpec.from_json((run / "spec.json").read_text()), tmp_path)
    pd.testing.assert_series_equal(values(run), original.set_index(["step", "group", "flavour", "metric"])["value"]
                                   .sort_index())


def test_a_report_stopped_by_ctrl_c_says_its_folder_is_incomplete(finished, tmp_path, capsys, monkeypatch):
    import bench.reporting.site as site

    real = site.write_site

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the site is written, after the tables

    monkeypatch.setattr(site, "write_site", stopped)
    assert main(["report", "--results", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip()
    assert err == ("bench: interrupted; the report folder is incomplete (its INCOMPLETE says so): run `bench report` "
                   "again")  # not the run command's message
    folder = tmp_path / "reports" / "all"
    assert (folder / "INCOMPLETE").exists() and (folder / "table.tex").exists()
    monkeypatch.setattr(site, "write_site", real)
    assert main(["report", "--results", str(tmp_path)]) == 0
    assert not (folder / "INCOMPLETE").exists() and (folder / "index.html").exists()

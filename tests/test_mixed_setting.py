"""The mixed setting end to end (bench/config/settings.py, bench/protocol/mixed.py): labels reach a method only in the
labelled stage, each stage holds exactly its manifest's images, the split is written with the run and read
back, every metric is recomputable from the stored predictions, a method that cannot run the setting is
refused before anything runs, and the setting is part of the run id."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
import torch

import bench
from bench.features.backbones import build_backbone
from bench.cli import main
from bench.data import build_dataset
from bench.errors import BenchError
from bench.features.views import Encoder, extract
from bench.config.manifests import Manifest
from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.config.settings import protocol_for
from tests.helpers import tiny_specs
# K-means that records every Step it is handed, seeing only its own stage (registered as "_Spy")
from tests.test_protocol import SEEN, registered  # noqa: F401  (registered: an autouse fixture)

MIXED = {"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4}
def features_and_labels(spec):
    """The plain features of every training image (as the bank stores them) and its class."""
    data = build_dataset(spec.dataset, spec.config["dataset"])
    backbone = build_backbone(spec.backbone, spec.config["backbone"], data.train.images[0].shape)
    plain = extract(Encoder(backbone, data, "cpu"), data.train, views=0, seed=spec.seed).plain.half().float()
    return plain, np.asarray(data.train.labels), data


def class_of_rows(x: torch.Tensor, plain: torch.Tensor, labels: np.ndarray) -> np.ndarray:
    """The class of each row of x, found by its nearest training image (synthetic images are distinct)."""
    return labels[torch.cdist(x, plain).argmin(1).numpy()]


def test_labels_reach_a_method_only_in_the_labelled_stage_and_each_stage_is_its_manifest(tmp_path):
    (spec,) = tiny_specs(methods=["_Spy"], splits=["happy-5-stage"], **MIXED)
    out = execute(spec, tmp_path)
    plain, labels, data = features_and_labels(spec)
    manifest = Manifest.from_json((out / "split.json").read_text())
    protocol = protocol_for(spec.config["setting"], data.num_classes, labels)
    assert [s.index for s in SEEN] == list(range(6)) and manifest.labelled == (True,) + (False,) * 5

    labelled = SEEN[0]
    assert labelled.labels is not None and len(labelled.labels) == len(labelled.train.plain)
    # the labels given are the images' true classes, all of them labelled classes
    assert np.array_equal(labelled.labels.numpy(), class_of_rows(labelled.train.plain, plain, labels))
    assert set(labelled.labels.tolist()) == set(protocol.labelled_classes)
    for step in SEEN[1:]:
        assert step.labels is None  # no label in an unlabelled stage
        assert not any("label" in name for name in vars(step) if name != "labels")
        assert not any("label" in name for name in vars(step.train))
    for step, rows in zip(SEEN, manifest.stages):  # exactly the manifest's images, stage by stage
        assert sorted(map(tuple, step.train.plain.numpy().round(4).tolist())) == \
            sorted(map(tuple, plain[torch.as_tensor(rows)].numpy().round(4).tolist()))
    # 12 classes: 6 labelled, then 5 stages of one new class; the method is told of the new ones only
    assert [s.n_classes for s in SEEN] == [6, 1, 1, 1, 1, 1] and [s.offset for s in SEEN] == [0, 6, 7, 8, 9, 10]
    # an unlabelled stage mixes old and new classes with the protocol's counts
    assert manifest.counts(labels)[1:] == [dict(stage) for stage in protocol.stages]
    assert len(set(class_of_rows(SEEN[2].train.plain, plain, labels))) == 6 + 2


def test_every_metric_is_recomputed_from_the_stored_predictions(tmp_path):
    (spec,) = tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **MIXED, **{"method.epochs": 5})
    out = execute(spec, tmp_path)
    stored = pd.read_parquet(out / "metrics.parquet")
    again = pd.DataFrame([dataclasses.asdict(r) for r in replay(out / "predictions.npz")])
    keys = ["step", "group", "flavour", "metric"]
    merged = stored[keys + ["value"]].merge(again, on=keys, suffixes=("", "_again"), how="outer")
    assert len(merged) == len(stored) and np.allclose(merged["value"], merged["value_again"], equal_nan=True)
    summary = stored[stored.group == "summary"].set_index("metric")["value"]
    assert {"All", "Old_hard", "New_hard", "Old_soft", "New_soft", "A", "F", "D", "K_error"} <= set(summary.index)
    assert summary["K_error"] == 0  # K known
    assert set(stored.reported_A) == {"cgcd/A"} and set(stored.split) == {"happy-5-stage · draw 0"}


@pytest.mark.parametrize("estimator", ["silhouette", "brent"])
def test_k_estimated_is_recorded_beside_the_true_k(estimator, tmp_path):
    (spec,) = tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **MIXED, **{"setting.k": estimator})
    out = execute(spec, tmp_path)
    frame = pd.read_parquet(out / "metrics.parquet")
    k = frame[frame.group == "k"].pivot(index="step", columns="metric", values="value")
    assert list(k.index) == [1, 2, 3, 4, 5] and (k["true"] == 1).all() and (k["given"] >= 1).all()
    error = frame[(frame.group == "summary") & (frame.metric == "K_error")].value.item()
    assert error == pytest.approx((k["given"] - k["true"]).abs().mean())
    assert set(frame.split) == {f"happy-5-stage · draw 0 · K {estimator}"}


def test_the_setting_its_counts_and_its_seed_are_part_of_the_run_id():
    base = tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **MIXED)[0]
    incd = tiny_specs(methods=["Baseline"], splits=["2-step"], **MIXED)[0]
    assert "setting" not in incd.identity()["config"]  # class-iNCD ids are those of before the setting existed
    ids = {base.run_id, incd.run_id}
    for option in ({"setting.manifest_seed": 1}, {"setting.novel_unseen": 0.5}, {"setting.k": "silhouette"}):
        ids.add(tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **MIXED, **option)[0].run_id)
    assert len(ids) == 5


@pytest.mark.parametrize("argv, said", [
    (["--methods", "EwC"], "method 'EwC' cannot run the 'mixed' setting"),
    (["--cfg-options", "setting.k=guess"], "bad setting.k='guess': choose from known, silhouette"),
    (["--cfg-options", "setting.selection=oracle-test"], "bad setting.selection='oracle-test'"),
    (["--cfg-options", "dataset.num_classes=5"], "needs at least one new class per stage"),
])
def test_a_mixed_run_that_cannot_run_is_refused_before_anything_runs(capsys, tmp_path, argv, said):
    code = main(["run", "--grid", "smoke", "--datasets", "synthetic", "--splits", "happy-5-stage", "--backbone",
                 "pixels", "--results", str(tmp_path), *(["--methods", "Baseline"] if "--methods" not in argv else []),
                 *argv])
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_a_class_incd_split_takes_no_mixed_setting_key():
    with pytest.raises(BenchError, match="'setting.k'.*valid keys: setting.name"):
        tiny_specs(methods=["Baseline"], splits=["2-step"], **{"setting.k": "silhouette"})


def test_a_grid_block_carries_its_own_cfg_and_the_report_has_the_settings_table(tmp_path):
    from bench.reporting import write_report
    from bench.reporting.load import load_metrics
    from bench.config.grids import expand, load_grid

    specs = expand(load_grid("cgcd-demo"), methods=["K-means"], seeds=[0], splits=["happy-5-stage"],
                   options={"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4},
                   datasets=["synthetic"])
    assert sorted(s.config["setting"]["k"] for s in specs) == ["known", "silhouette"]
    for spec in specs:
        execute(spec, tmp_path)
    paths = write_report(load_metrics(sorted((tmp_path / "runs").iterdir())), tmp_path / "report", "csv", "t")
    table = pd.read_csv(next(p for p in paths if p.name == "cgcd.csv"), dtype=str)
    assert list(table["split"]) == ["happy-5-stage · draw 0", "happy-5-stage · draw 0 · K silhouette"]
    frame = pd.read_parquet(execute(specs[1], tmp_path) / "metrics.parquet")
    summary = frame[frame.group == "summary"].set_index("metric")["value"]
    row = table.iloc[1]
    assert row["Old (hard)"] == f"{summary['Old_hard']:.1f}" and row["K error"] == f"{summary['K_error']:.2f}"
    # the html site has the same table, each value a link to its run's page
    site = bench.report(results=tmp_path, format="html", out=tmp_path / "site")
    index = (site.out / "index.html").read_text()
    assert '<a href="#cgcd">' in index
    section = index[index.index('<section id="cgcd">'):]
    rows = re.findall(r"<tr data-dataset.*?</tr>", section[:section.index("</section>")])
    assert [re.search(r"<td>(happy[^<]*)</td>", r).group(1) for r in rows] == list(table["split"])
    cells = re.findall(r'<td class="num" data-v="([^"]*)"><a href="runs/(\w+)\.html">([^<]*)</a>', rows[1])
    assert [text for _, _, text in cells] == [row[c] for c in ("All", "Old (hard)", "New (hard)", "Old (soft)",
                                                               "New (soft)", "F (lower is better)", "K error")]
    assert float(cells[1][0]) == pytest.approx(summary["Old_hard"], rel=1e-5)
    assert (site.out / "runs" / f"{cells[1][1]}.html").is_file()


def test_the_registered_protocols_are_happys_and_promptccds_cifar100_splits():
    from bench.config.settings import mixed_setting

    labels = np.repeat(np.arange(100), 500)  # CIFAR-100's shape: 100 classes of 500 training images
    happy = protocol_for(mixed_setting("happy-5-stage"), 100, labels)
    # Happy's logs/cifar100_continual_dataset_dict.txt: 50 old classes, 10 new a stage, 25 / 25 / 400 images
    assert happy.labelled_classes == tuple(range(50)) and happy.labelled_fraction == 0.8
    assert [sum(stage.values()) for stage in happy.stages] == [5250, 5500, 5750, 6000, 6250]
    assert happy.stages[1] == {**{c: 25 for c in range(60)}, **{c: 400 for c in range(60, 70)}}  # 2nd unlabelled
    # PromptCCD's config/cifar100 (70 labelled classes, 3 stages, its ccd_split_ratio)
    promptccd = protocol_for(mixed_setting("promptccd-3-stage"), 100, labels)
    assert sum(promptccd.labelled_counts.values()) == 70 * 435
    assert [sum(stage.values()) for stage in promptccd.stages] == [5950, 6550, 7050]
    assert promptccd.stages[2] == {**{c: 15 for c in range(70)}, **{c: 50 for c in range(70, 90)},
                                   **{c: 500 for c in range(90, 100)}}


def test_forgetting_is_not_measured_where_the_last_stage_has_no_old_row():
    from bench.protocol.mixed import summary
    from bench.runs.rows import MetricRow

    rows = [MetricRow(0, "all", "cgcd", "acc", 90.0),
            MetricRow(1, "all", "cgcd", "acc", 70.0), MetricRow(1, "new", "cgcd_hard", "acc", 40.0),
            MetricRow(1, "k", "cgcd", "true", 2.0), MetricRow(1, "k", "cgcd", "given", 3.0)]
    out = {r.metric: r.value for r in summary(rows, 2)}
    assert np.isnan(out["F"]) and out["A"] == 70.0 and out["K_error"] == 1.0  # was 0: "no forgetting", silently
    rows.append(MetricRow(1, "old", "cgcd_hard", "acc", 60.0))
    assert {r.metric: r.value for r in summary(rows, 2)}["F"] == 30.0  # 90 after the labelled stage, 60 at the end


# Happy-CGCD's logs/cifar_continual_dataset_dict.txt: the new classes of each of its 5 online sessions on
# CIFAR-100 (50 labelled classes, `--shuffle_classes --seed 0`)
HAPPY_CIFAR100_SESSIONS = [
    [78, 61, 60, 91, 52, 77, 88, 81, 72, 54], [83, 85, 76, 84, 68, 57, 64, 95, 98, 79],
    [65, 80, 82, 66, 92, 70, 93, 58, 63, 75], [55, 67, 90, 99, 51, 62, 87, 74, 56, 73],
    [86, 71, 69, 59, 89, 96, 53, 50, 97, 94],
]


def test_happys_arrival_order_on_cifar100_is_its_logs():
    from bench.config.settings import arrival_order, mixed_setting

    setting = {**mixed_setting("happy-5-stage"), "arrival": "happy"}
    order = arrival_order(setting, 100)
    assert order[:50].tolist() == list(range(50))  # the labelled classes, as they are
    assert [order[50 + 10 * s: 60 + 10 * s].tolist() for s in range(5)] == HAPPY_CIFAR100_SESSIONS
    assert arrival_order(mixed_setting("happy-5-stage"), 100) is None  # bench's default: the class order


def test_a_run_with_happys_arrival_brings_the_new_classes_in_that_order(tmp_path):
    from bench.config.peer_splits import happy_arrival_order

    (canonical,) = tiny_specs(methods=["_Spy"], splits=["happy-5-stage"], **MIXED)
    (spec,) = tiny_specs(methods=["_Spy"], splits=["happy-5-stage"], **MIXED, **{"setting.arrival": "happy"})
    assert spec.run_id != canonical.run_id and "arrival" not in canonical.identity()["config"]["setting"]
    out = execute(spec, tmp_path)
    plain, labels, _ = features_and_labels(spec)
    seen = [set(class_of_rows(step.train.plain, plain, labels).tolist()) for step in SEEN]  # canonical classes
    arrived = [sorted(seen[t] - set().union(*seen[:t])) for t in range(1, 6)]
    expected = happy_arrival_order(range(6, 12))  # 6 labelled classes, then one new class per stage, one left out
    assert expected != tuple(range(6, 12)) and arrived == [[c] for c in expected[:5]]
    log = (out / "log.txt").read_text()
    assert f"classes arrive in happy's order: {[*range(6), *expected]}" in log
    assert set(pd.read_parquet(out / "metrics.parquet").split) == {"happy-5-stage · draw 0 · arrival happy"}

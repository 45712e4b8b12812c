"""The mixed setting end to end (bench/splits/settings.py, bench/protocol/mixed.py): labels reach a method only in the
labelled step, each step holds exactly its manifest's images, the split is written with the run and read
back, every metric is recomputable from the stored predictions, a method that cannot run the setting is
refused before anything runs, and the setting is part of the run id."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

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
from bench.splits.manifests import Manifest, draw
from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.splits.settings import protocol_for
from tests.helpers import tiny_specs
# K-means that records every Step it is handed, seeing only its own step (registered as "_Spy")
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


def test_labels_reach_a_method_only_in_the_labelled_step_and_each_step_is_its_manifest(tmp_path):
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
        assert step.labels is None  # no label in an unlabelled step
        assert not any("label" in name for name in vars(step) if name != "labels")
        assert not any("label" in name for name in vars(step.train))
    for step, rows in zip(SEEN, manifest.steps):  # exactly the manifest's images, step by step
        assert sorted(map(tuple, step.train.plain.numpy().round(4).tolist())) ==\
            sorted(map(tuple, plain[torch.as_tensor(rows)].numpy().round(4).tolist()))
    # 12 classes: 6 labelled, then 5 steps of one new class; the method is told of the new ones only
    assert [s.n_classes for s in SEEN] == [6, 1, 1, 1, 1, 1] and [s.offset for s in SEEN] == [0, 6, 7, 8, 9, 10]
    # an unlabelled step mixes old and new classes with the protocol's counts
    assert manifest.counts(labels)[1:] == [dict(counts) for counts in protocol.steps]
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
    (["--methods", "EwC"], 'it runs: incd. A method opts in by declaring settings=("incd", "mixed") in its RunsOn and '
                           "learning its labelled step from step.labels (see docs/adding-a-method.md#the-mixed-setting)"),
    (["--methods", "FRoST"], "it learns each step's new head from images of new classes only"),
    (["--cfg-options", "setting.k=guess"], "bad setting.k='guess': choose from known, silhouette"),
    (["--cfg-options", "setting.selection=oracle-test"], "bad setting.selection='oracle-test'"),
    (["--cfg-options", "setting.evaluation=both"], "bad setting.evaluation='both': choose from inductive"),
    (["--cfg-options", "dataset.num_classes=5"], "needs at least one new class per step"),
])
def test_a_mixed_run_that_cannot_run_is_refused_before_anything_runs(capsys, tmp_path, argv, said):
    code = main(["run", "--grid", "smoke", "--datasets", "synthetic", "--splits", "happy-5-stage", "--backbone",
                 "pixels", "--results", str(tmp_path), *(["--methods", "Baseline"] if "--methods" not in argv else []),
                 *argv])
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_the_refusal_of_a_setting_points_at_a_heading_of_the_plugin_guide():
    from bench.config.grids import OPT_IN_DOC
    from tests.doc_links import anchors

    page, _, anchor = OPT_IN_DOC.partition("#")
    assert anchor in anchors((Path(__file__).resolve().parents[1] / page).read_text(encoding="utf-8"))


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
    # the grid's blocks on the same axes, told apart by their cfg, each report their own runs, under plain names
    by_grid = bench.report("cgcd-demo", methods=["K-means"], seeds=[0], splits=["happy-5-stage"], datasets=["synthetic"],
                           cfg_options={"dataset.num_classes": 12, "dataset.train_per_class": 20,
                                        "dataset.test_per_class": 4}, results=tmp_path, format="markdown",
                           out=tmp_path / "grid")
    names = {p.name for p in by_grid.paths}
    assert {"table_K-known.md", "table_K-estimated.md"} <= names and not any(" " in n or "·" in n for n in names)
    known, estimated = ((by_grid.out / f"table_K-{b}.md").read_text() for b in ("known", "estimated"))
    assert "K silhouette" not in known and "K silhouette" in estimated


def test_the_registered_protocols_are_happys_and_promptccds_cifar100_splits():
    from bench.splits.settings import mixed_setting

    labels = np.repeat(np.arange(100), 500)  # CIFAR-100's shape: 100 classes of 500 training images
    happy = protocol_for(mixed_setting("happy-5-stage"), 100, labels)
    # Happy's logs/cifar100_continual_dataset_dict.txt: 50 old classes, 10 new a step, 25 / 25 / 400 images
    assert happy.labelled_classes == tuple(range(50)) and happy.labelled_fraction == 0.8
    assert [sum(counts.values()) for counts in happy.steps] == [5250, 5500, 5750, 6000, 6250]
    assert happy.steps[1] == {**{c: 25 for c in range(60)}, **{c: 400 for c in range(60, 70)}}  # 2nd unlabelled
    # PromptCCD's config/cifar100 (70 labelled classes, 3 steps, its ccd_split_ratio)
    promptccd = protocol_for(mixed_setting("promptccd-3-stage"), 100, labels)
    assert sum(promptccd.labelled_counts.values()) == 70 * 435
    assert [sum(counts.values()) for counts in promptccd.steps] == [5950, 6550, 7050]
    assert promptccd.steps[2] == {**{c: 15 for c in range(70)}, **{c: 50 for c in range(70, 90)},
                                   **{c: 500 for c in range(90, 100)}}


def test_forgetting_is_not_measured_where_the_last_step_has_no_old_row():
    from bench.protocol.mixed import summary
    from bench.runs.rows import MetricRow

    rows = [MetricRow(0, "all", "cgcd", "acc", 90.0),
            MetricRow(1, "all", "cgcd", "acc", 70.0), MetricRow(1, "new", "cgcd_hard", "acc", 40.0),
            MetricRow(1, "k", "cgcd", "true", 2.0), MetricRow(1, "k", "cgcd", "given", 3.0)]
    out = {r.metric: r.value for r in summary(rows, 2)}
    assert np.isnan(out["F"]) and out["A"] == 70.0 and out["K_error"] == 1.0  # was 0: "no forgetting", silently
    rows.append(MetricRow(1, "old", "cgcd_hard", "acc", 60.0))
    assert {r.metric: r.value for r in summary(rows, 2)}["F"] == 30.0  # 90 after the labelled step, 60 at the end


# Happy-CGCD's logs/cifar_continual_dataset_dict.txt: the new classes of each of its 5 online sessions on
# CIFAR-100 (50 labelled classes, `--shuffle_classes --seed 0`)
HAPPY_CIFAR100_SESSIONS = [
    [78, 61, 60, 91, 52, 77, 88, 81, 72, 54], [83, 85, 76, 84, 68, 57, 64, 95, 98, 79],
    [65, 80, 82, 66, 92, 70, 93, 58, 63, 75], [55, 67, 90, 99, 51, 62, 87, 74, 56, 73],
    [86, 71, 69, 59, 89, 96, 53, 50, 97, 94],
]


def test_happys_arrival_order_on_cifar100_is_its_logs():
    from bench.splits.settings import arrival_order, mixed_setting

    setting = {**mixed_setting("happy-5-stage"), "arrival": "happy"}
    order = arrival_order(setting, 100)
    assert order[:50].tolist() == list(range(50))  # the labelled classes, as they are
    assert [order[50 + 10 * s: 60 + 10 * s].tolist() for s in range(5)] == HAPPY_CIFAR100_SESSIONS
    assert arrival_order(mixed_setting("happy-5-stage"), 100) is None  # bench's default: the class order


def test_a_run_with_happys_arrival_brings_the_new_classes_in_that_order(tmp_path):
    from bench.splits.peer_splits import happy_arrival_order

    (canonical,) = tiny_specs(methods=["_Spy"], splits=["happy-5-stage"], **MIXED)
    (spec,) = tiny_specs(methods=["_Spy"], splits=["happy-5-stage"], **MIXED, **{"setting.arrival": "happy"})
    assert spec.run_id != canonical.run_id and "arrival" not in canonical.identity()["config"]["setting"]
    out = execute(spec, tmp_path)
    plain, labels, _ = features_and_labels(spec)
    seen = [set(class_of_rows(step.train.plain, plain, labels).tolist()) for step in SEEN]  # canonical classes
    arrived = [sorted(seen[t] - set().union(*seen[:t])) for t in range(1, 6)]
    expected = happy_arrival_order(range(6, 12))  # 6 labelled classes, then one new class per step, one left out
    assert expected != tuple(range(6, 12)) and arrived == [[c] for c in expected[:5]]
    log = (out / "log.txt").read_text()
    assert f"classes arrive in happy's order: {[*range(6), *expected]}" in log
    assert set(pd.read_parquet(out / "metrics.parquet").split) == {"happy-5-stage · draw 0 · arrival happy"}



# Happy-CGCD's logs/cub_continual_dataset_dict.txt: the new classes of each online session on CUB-200
HAPPY_CUB_SESSIONS = [
    [52, 170, 3, 109, 148, 185, 32, 142, 108, 188, 107, 183, 153, 24, 13, 59, 45, 47, 63, 14],
    [86, 118, 4, 139, 92, 101, 10, 195, 160, 151, 115, 156, 181, 130, 104, 54, 35, 110, 120, 145],
    [2, 117, 85, 83, 6, 29, 33, 78, 73, 8, 182, 114, 1, 65, 57, 103, 21, 66, 46, 105],
    [20, 60, 127, 112, 155, 169, 62, 165, 25, 180, 36, 58, 102, 192, 194, 132, 37, 187, 140, 152],
    [49, 71, 159, 96, 75, 125, 113, 22, 175, 138, 173, 68, 41, 164, 16, 191, 128, 122, 100, 90],
]


def test_happys_cub_split_labels_the_ssb_known_classes_and_has_its_step_sizes():
    from bench.splits.peer_splits import SSB_KNOWN
    from bench.splits.settings import arrival_order, mixed_setting

    setting = mixed_setting("happy-cub-5-stage")
    order = arrival_order(setting, 200, "cub200")
    assert order[:100].tolist() == list(SSB_KNOWN["cub200"])
    assert [order[100 + 20 * s: 120 + 20 * s].tolist() for s in range(5)] == HAPPY_CUB_SESSIONS
    # CUB's official training set: 29 or 30 images per class (5994 in all), in the order the steps bring them
    counts = np.full(200, 30)
    counts[np.random.default_rng(0).choice(200, 6, replace=False)] = 29
    labels = np.repeat(np.arange(200), counts)
    protocol = protocol_for(setting, 200, labels)
    manifest = draw(protocol, labels, seed=0)
    assert [len(s) for s in manifest.steps[1:]] == [1000, 1100, 1200, 1300, 1400]  # 100×5 + earlier new×5 + 20×25
    labelled_share = [np.isin(labels[s], np.arange(100)).mean() for s in manifest.steps[1:]]
    assert labelled_share[0] == 0.5 and round(labelled_share[-1], 2) == 0.36
    assert len(manifest.steps[0]) == sum(round(0.8 * n) for n in counts[:100])


def test_happys_cub_split_is_refused_where_bench_has_no_ssb_classes():
    with pytest.raises(BenchError, match="bench has them for aircraft, cars, cub200, not synthetic"):
        tiny_specs(methods=["K-means"], splits=["happy-cub-5-stage"], **MIXED)
    with pytest.raises(BenchError, match="leave split.class_order_seed unset"):
        tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **MIXED,
                   **{"setting.arrival": "happy", "split.class_order_seed": 1})


def test_a_protocol_on_the_whole_training_set_gets_the_val_partition_back():
    from bench.data.base import ImageSet, LoadedDataset

    data = LoadedDataset(name="x", class_names=["a", "b"], train=ImageSet(["t0", "t1"], [0, 1]),
                         val=ImageSet(["v0"], [1]), test=ImageSet(["s0"], [0]))
    whole = data.with_whole_train()
    assert list(whole.train.images) == ["t0", "t1", "v0"] and whole.train.labels.tolist() == [0, 1, 1]
    assert whole.val is None and data.val is not None  # a new dataset: the reader's is left as it is


def test_happys_arrival_order_on_tinyimagenet_is_its_logs():
    """logs/tiny_continual_dataset_dict.txt: 100 labelled classes, then 5 sessions of 20 (its class indices, the
    sorted wnids, as bench's reader numbers them)."""
    from bench.splits.settings import arrival_order, mixed_setting

    sessions = [
        [126, 186, 102, 155, 175, 193, 116, 173, 154, 195, 153, 192, 178, 113, 107, 130, 122, 124, 133, 108],
        [143, 162, 103, 171, 145, 148, 106, 199, 182, 176, 160, 180, 190, 168, 151, 127, 118, 156, 163, 174],
        [101, 161, 142, 141, 104, 115, 117, 140, 138, 105, 191, 159, 100, 134, 128, 150, 111, 135, 123, 152],
        [110, 131, 166, 157, 179, 185, 132, 184, 114, 189, 119, 129, 149, 197, 198, 169, 120, 194, 172, 177],
        [125, 137, 181, 146, 139, 165, 158, 112, 188, 170, 187, 136, 121, 183, 109, 196, 167, 164, 147, 144],
    ]
    order = arrival_order({**mixed_setting("happy-5-stage"), "arrival": "happy"}, 200)
    assert [order[100 + 20 * s: 120 + 20 * s].tolist() for s in range(5)] == sessions


def test_happys_imagenet100_split_is_its_logs_counts_and_order():
    """logs/in100_continual_dataset_dict.txt: 50 labelled classes, 5 sessions of 10 in its shuffled order; per
    session 60 images of each earlier class and 1000 of each arriving one, all of a class with fewer (its
    data/imagenet.py), on ImageNet-100's shape (1300 training images per class, a few with fewer)."""
    from bench.splits.manifests import draw
    from bench.splits.settings import arrival_order, mixed_setting, step_sizes

    setting = mixed_setting("happy-in100-5-stage")
    order = arrival_order(setting, 100)
    log = [78, 61, 60, 91, 52, 77, 88, 81, 72, 54, 83, 85, 76, 84, 68, 57, 64, 95, 98, 79, 65, 80, 82, 66,
           92, 70, 93, 58, 63, 75, 55, 67, 90, 99, 51, 62, 87, 74, 56, 73, 86, 71, 69, 59, 89, 96, 53, 50, 97, 94]
    assert order[:50].tolist() == list(range(50)) and order[50:].tolist() == log
    per_class = np.full(100, 1300)
    per_class[[3, 55]] = [732, 900]  # ImageNet has classes of 732 images; 55 arrives as class 50 + 8 below
    labels = np.repeat(np.arange(100), per_class)
    # the steps see the classes in arrival order: relabel as bench's planning does (class i = order[i])
    relabelled = np.argsort(order)[labels]
    protocol = protocol_for(setting, 100, relabelled)
    assert step_sizes(protocol) == (50, 10, 10, 10, 10, 10)
    new_55 = int(np.argsort(order)[55])
    assert protocol.steps[0][0] == 60 and protocol.steps[1][50] == 60
    assert protocol.steps[(new_55 - 50) // 10][new_55] == 900  # fewer than 1000: every image
    sizes = [len(s) for s in draw(protocol, relabelled, 0).steps]
    assert sizes[0] == round(0.8 * 732) + 49 * round(0.8 * 1300)
    assert sizes[1:] == [50 * 60 + 60 * 10 * s + 1000 * 10 - (100 if (new_55 - 50) // 10 == s else 0)
                         for s in range(5)]


def test_promptccds_split_on_cub_and_imagenet100_shapes_is_its_configs():
    """PromptCCD's config/cub200 and config/imagenet100 set the same ratios with 140 of 200 and 70 of 100 classes
    labelled; on CUB it reads the whole official training set (30 images a class, most of them) in official id
    order, as bench's mixed setting does. Its cuts by hand, per class of 30: labelled int(30·0.87) = 26, then 2, 1,
    1; arriving at step 1: 21, 6, 3; at step 2: 27, 3; at step 3: 30."""
    from bench.splits.settings import mixed_setting, step_sizes

    cub = protocol_for(mixed_setting("promptccd-3-stage"), 200, np.repeat(np.arange(200), 30))
    assert set(cub.labelled_counts) == set(range(140)) and set(cub.labelled_counts.values()) == {26}
    assert [sum(counts.values()) for counts in cub.steps] == [140 * 2 + 20 * 21, 140 + 20 * 6 + 20 * 27,
                                                             140 + 20 * 3 + 20 * 3 + 20 * 30]
    in100 = protocol_for(mixed_setting("promptccd-3-stage"), 100, np.repeat(np.arange(100), 1300))
    assert len(in100.labelled_counts) == 70 and step_sizes(in100) == (70, 10, 10, 10)


@pytest.mark.parametrize("dataset, classes, known", [("aircraft", 100, 50), ("cars", 196, 98)])
def test_the_ssb_known_classes_of_aircraft_and_cars_are_labelled_with_happy_ssb(dataset, classes, known):
    from bench.splits.peer_splits import SSB_KNOWN
    from bench.splits.settings import arrival_order, mixed_setting

    setting = {**mixed_setting("happy-5-stage"), "arrival": "happy-ssb", "labelled_classes": known}
    order = arrival_order(setting, classes, dataset)
    assert len(SSB_KNOWN[dataset]) == known and order[:known].tolist() == list(SSB_KNOWN[dataset])
    assert sorted(order.tolist()) == list(range(classes))  # every class once
    with pytest.raises(BenchError, match=f"the SSB splits of {dataset} label its {known} known classes"):
        arrival_order({**setting, "labelled_classes": known + 1}, classes, dataset)


@pytest.mark.parametrize("evaluation", ["inductive", "transductive"])
def test_the_forgetting_curve_of_a_mixed_run_ends_at_its_f(tmp_path, evaluation):
    from bench.reporting.aggregate import step_forgetting
    from bench.reporting.load import load_metrics

    (spec,) = tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **MIXED, **{"setting.evaluation": evaluation})
    out = execute(spec, tmp_path)
    frame = load_metrics([out])
    curve = step_forgetting(frame)
    f = frame[(frame.group == "summary") & (frame.metric == "F")].value.item()
    assert curve["step"].tolist() == list(range(6)) and curve["mean"].iloc[0] == 0.0
    assert curve["mean"].iloc[-1] == pytest.approx(f)  # the panel was empty for mixed runs

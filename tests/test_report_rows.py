"""What a row of a report is: the runs of one (method label, dataset, split, backbone) that share their
configuration, so that only their seeds differ. Runs of other configurations are rows of their own,
labelled by what differs; a finished run that fits no row is named, never dropped silently."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bench.cli import main
from bench.reporting.outcomes import print_leaderboard
from bench.reporting.aggregate import final_scores
from bench.reporting.load import load_metrics

TINY = ["features.views=2", "dataset.num_classes=6", "dataset.image_size=8", "dataset.train_per_class=12",
        "dataset.test_per_class=6"]
RUN = ["--grid", "smoke", "--backbone", "pixels", "--methods", "Baseline", "--datasets", "synthetic",
       "--splits", "2-step"]
ONE, TWO = "Baseline · method.epochs=1", "Baseline · method.epochs=2"


def _run(results: Path, epochs: int, seeds: list[str]) -> list[Path]:
    """Tiny Baseline runs with `method.epochs=epochs`: their directories."""
    from bench.cli import build_parser
    from bench.cli.common import expand

    argv = [*RUN, "--seeds", *seeds, "--results", str(results), "--cfg-options", *TINY, f"method.epochs={epochs}"]
    assert main(["run", "--cluster", "debug", *argv]) == 0
    _, specs = expand(build_parser().parse_args(["run", *argv]))
    return [results / "runs" / s.run_id for s in specs]


@pytest.fixture(scope="module")
def two_configs(tmp_path_factory) -> tuple[Path, list[Path], list[Path]]:
    """One results root holding Baseline with 1 epoch (seeds 0 and 1) and with 2 epochs (seed 0)."""
    root = tmp_path_factory.mktemp("two_configs")
    return root, _run(root, 1, ["0", "1"]), _run(root, 2, ["0"])


@pytest.fixture
def results(two_configs, tmp_path) -> tuple[Path, list[Path], list[Path]]:
    """A copy of `two_configs` a test may damage."""
    root, one, two = two_configs
    shutil.copytree(root / "runs", tmp_path / "runs")
    return tmp_path, [tmp_path / "runs" / d.name for d in one], [tmp_path / "runs" / d.name for d in two]


def _own_scores(dirs: list[Path]) -> dict[str, float]:
    """A and F of these runs alone: what their row must say."""
    scores = final_scores(load_metrics(dirs))
    return dict(zip(scores["metric"], scores["mean"]))


def test_two_configurations_are_two_rows_labelled_by_what_differs(results, capsys):
    root, one, two = results
    assert main(["report", "--results", str(root), "--format", "csv"]) == 0
    table = pd.read_csv(root / "reports" / "all" / "table.csv")
    assert sorted(set(table["method"])) == [ONE, TWO]
    for label, dirs, seeds in ((ONE, one, 2), (TWO, two, 1)):
        rows = table[table["method"] == label].set_index("metric")
        assert set(rows["n"]) == {seeds}
        assert rows["mean"].to_dict() == pytest.approx(_own_scores(dirs), abs=1e-3)
    assert "runs finished; wrote" in capsys.readouterr().out  # every run placed: none named


def test_the_leaderboard_keeps_configurations_apart(results, capsys):
    from bench.config.spec import RunSpec

    root, one, two = results
    specs = [RunSpec.from_json((d / "spec.json").read_text()) for d in one + two]
    print_leaderboard(root, specs, "pixels")
    lines = capsys.readouterr().out.splitlines()
    shown = {l.split("|")[3].strip(): l.split("|")[7].strip() for l in lines if "Baseline" in l}
    assert shown == {ONE: "2", TWO: "1"}  # label → seeds


def test_runs_that_differ_only_in_their_seed_keep_the_plain_label(results):
    _, one, _ = results
    assert set(load_metrics(one)["label"]) == {"Baseline"}


def test_the_fewest_keys_that_tell_configurations_apart():
    from bench.reporting.aggregate import distinguishing_keys

    a = {"method.epochs": 3, "method.lr": 0.1, "features.views": 2}
    b = {"method.epochs": 60, "method.lr": 0.01, "features.views": 2}  # lr changes along with epochs
    c = {"method.epochs": 3, "method.lr": 0.01, "features.views": 2}
    assert distinguishing_keys([a, b]) == ["method.epochs"]
    assert distinguishing_keys([a, b, c]) == ["method.epochs", "method.lr"]
    assert distinguishing_keys([a, {**a, "method.new": True}]) == ["method.new"]  # a key one lacks


def test_labels_are_computed_per_cell():
    """Only the cell that holds two configurations gets labels that say so; equal texts of unequal
    values (1 and "1") are told apart by the configuration's hash."""
    from bench.reporting.aggregate import config_labels

    frame = pd.DataFrame({"label": ["Baseline"] * 4 + ["K-means"] * 2, "dataset": ["digits"] * 6,
                          "split": ["2-step", "2-step", "5-step", "5-step", "2-step", "2-step"],
                          "backbone": ["pixels"] * 6, "config_hash": ["a", "b", "a", "a", "c", "d"]})
    configs = {"a": {"method.epochs": 3}, "b": {"method.epochs": 60}, "c": {"k": 1}, "d": {"k": "1"}}
    assert list(config_labels(frame, configs)) == [
        "Baseline · method.epochs=3", "Baseline · method.epochs=60", "Baseline", "Baseline",
        "K-means · k=1, config c", "K-means · k=1, config d"]


def _edit(run: Path) -> None:
    spec = json.loads((run / "spec.json").read_text())
    spec["config"]["method"]["epochs"] = 7
    (run / "spec.json").write_text(json.dumps(spec))


def test_a_run_whose_spec_was_edited_is_named_and_counted(results, capsys):
    root, one, two = results
    _edit(one[0])
    (two[0] / "spec.json").write_text("[]")  # JSON, but not a spec
    assert main(["report", "--results", str(root), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert f"skipping run {one[0].name}: its {one[0] / 'spec.json'} describes another run" in err
    assert f"skipping run {two[0].name}: cannot read {two[0] / 'spec.json'}" in err
    assert f"3/3 runs finished, 2 of them in no row ({', '.join(sorted([one[0].name, two[0].name]))}" in out
    assert "Traceback" not in err
    table = pd.read_csv(root / "reports" / "all" / "table.csv")
    assert set(table["method"]) == {"Baseline"} and set(table["n"]) == {1}


def test_a_grid_run_whose_spec_was_edited_is_named(results, capsys):
    root, one, _ = results
    _edit(one[1])
    argv = ["report", *RUN, "--seeds", "0", "1", "--results", str(root), "--format", "csv",
            "--cfg-options", *TINY, "method.epochs=1"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert f"skipping run {one[1].name}: its {one[1] / 'spec.json'} describes another run" in err
    assert f"report of grid smoke: 2/2 runs finished, 1 of them in no row ({one[1].name}" in out


def test_a_run_holding_another_runs_metrics_is_named(results, capsys):
    root, one, two = results
    shutil.copy(two[0] / "metrics.parquet", one[0] / "metrics.parquet")
    frame = load_metrics(one + two)
    assert set(frame["run_id"]) == {one[1].name, two[0].name}
    assert f"skipping run {one[0].name}: its {one[0] / 'metrics.parquet'} holds the rows of run {two[0].name}"\
        in capsys.readouterr().err


def test_a_method_no_longer_registered_still_reports(results, capsys, monkeypatch):
    import bench.registries.catalogue

    real = bench.registries.catalogue.method_info
    monkeypatch.setattr(bench.registries.catalogue, "method_info", lambda name: None if name == "Baseline" else real(name))
    root, _, _ = results
    assert main(["report", "--results", str(root), "--format", "csv"]) == 0
    assert sorted(set(pd.read_csv(root / "reports" / "all" / "table.csv")["method"])) == [ONE, TWO]


def test_the_leaderboard_keeps_backbones_apart_and_marks_references(tmp_path, capsys):
    """A `bench run --backbone A B` leaderboard: one row per backbone, as `bench report` has, each
    reference row marked whatever its label says after the method."""
    from bench.config.grids import expand, load_grid
    from tests.test_cli import fake_run

    specs = expand(load_grid("smoke"), methods=["K-means"], backbones=["pixels", "dino-resnet50"], seeds=[0])
    for spec in specs:
        fake_run(tmp_path, spec, 30.0 if spec.backbone == "pixels" else 70.0)
    print_leaderboard(tmp_path, specs, "pixels")
    shown = {l.split("|")[3].strip(): l.split("|")[4].strip() for l in capsys.readouterr().out.splitlines()
             if "K-means" in l}
    assert shown == {"K-means (reference)": "30.0", "K-means · dino-resnet50 (reference)": "70.0"}


def test_paper_layouts_show_every_configuration_row(capsys):
    """Tab. 3 and Tab. 4 name rows by method and backbone: two configurations of one are two rows,
    each saying which it is (the ablation's letters stay the paper's)."""
    from bench.reporting.table import render_table
    from tests.test_report import frame_of, md_rows, s

    entries = [(label, "C10", "5-step", 0, "wo", s(a, 100.0 - a), [90, a])
               for label, a in ((ONE, 40.0), (TWO, 60.0), ("Baseline++", 70.0))]
    frame = frame_of(entries).assign(method=lambda f: f["label"].str.split(" · ").str[0], preset="code")
    scores = final_scores(frame)
    _, rows = md_rows(render_table(scores, "markdown", layout="ablation"))
    assert [r[1:6] for r in rows if r[1].startswith("(b)")] == [["(b) method.epochs=1", "✓", "✗", "60.0", "40.0"],
                                                                 ["(b) method.epochs=2", "✓", "✗", "40.0", "60.0"]]
    backbones = pd.read_csv(io.StringIO(render_table(scores, "csv", layout="backbones")))
    assert set(backbones["method"]) == {"Baseline · method.epochs=1", "Baseline · method.epochs=2", "Baseline++"}


def test_pooled_class_orders_still_keep_configurations_apart(tmp_path):
    """`--pool-orders` makes each class order a sample of the cell: two configurations that were each
    run on another order are still two rows (labelled by what differs), never one row of both."""
    from bench.cli import build_parser
    from bench.cli.common import expand
    from bench.reporting.load import load_runs

    dirs = []
    for order, epochs in ((3, 1), (5, 2)):
        argv = [*RUN, "--seeds", "0", "--results", str(tmp_path), "--cfg-options", *TINY, f"method.epochs={epochs}",
                f"split.class_order_seed={order}"]
        assert main(["run", "--cluster", "debug", *argv]) == 0
        dirs += [tmp_path / "runs" / s.run_id for s in expand(build_parser().parse_args(["run", *argv]))[1]]
    frame, _ = load_runs(dirs, pool_orders=True)
    assert set(frame["split"]) == {"2-step · class orders"}
    assert set(frame["label"]) == {ONE, TWO}
    apart, _ = load_runs(dirs)  # not pooled: each order its own cell, one configuration each
    assert set(apart["label"]) == {"Baseline"} and len(set(apart["split"])) == 2

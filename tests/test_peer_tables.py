"""`bench report --compare happy|promptccd|vb-cgcd` (bench/reporting/peers.py): the peers' published tables
(results/paper/peer_*.csv) parse, cite their source in every row, hold percentages, name only cells bench has
(datasets, splits, backbones and metric rows of its registries), agree with what the papers print elsewhere
(their averages and their text), and are rendered beside the measured cells of a report."""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

import bench
from bench.cli import main
from bench.errors import BenchError
from bench.reporting.peers import (CITATION, COLUMNS, FLAVOURS, PAPER_DIR, PEERS, compare_peer, mapped, peer_name,
                                   peer_reference, split_parts)

FILES = sorted(PAPER_DIR.glob("peer_*.csv"))
SUMMARY = {"All", "Old_hard", "New_hard", "Old_soft", "New_soft", "A", "F", "D", "K_error"}


def test_there_are_tables_of_happy_promptccd_and_vb_cgcd():
    assert {f.name.split("_")[1] for f in FILES} == {"happy", "promptccd", "vb-cgcd"}
    assert len(peer_reference("happy")) == 512 + 16 + 66 and len(peer_reference("promptccd")) == 13 * 8 * 3
    # VB-CGCD's Table 2: 4 datasets x 5 methods x (S0 All + All/Old/New of 5 sessions)
    assert len(peer_reference("vb-cgcd")) == 4 * 5 * 16


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_row_parses_cites_its_source_and_is_a_percentage(path):
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(table.columns) == COLUMNS
    for column in CITATION:
        assert (table[column].str.strip() != "").all(), f"{path.name}: a row without its {column}"
    assert set(table["peer"]) == {path.name.split("_")[1]} and table["table"].str.match(r"Table \d+$").all()
    values = table["value"].astype(float)
    assert values.between(0, 100).all() and not values.isna().any()
    assert not table.duplicated(["table", "row", "column"]).any()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_mapped_cell_is_named_as_bench_names_it(path):
    from bench.splits.settings import EVALUATIONS, K_SOURCES, MIXED_SPLITS
    from bench.registries import DATASETS, load_all

    load_all()
    from bench.features.bank_space import FEATURE_DIMS

    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    # a cell bench has no name for says why, in its note
    assert (table.loc[~mapped(table), "note"] != "").all()
    rows = table[mapped(table)]
    assert set(rows["dataset"]) <= set(DATASETS.module_dict)
    assert set(rows["split"]) <= set(MIXED_SPLITS)
    assert set(rows["backbone"]) <= set(FEATURE_DIMS)
    assert set(rows["k"]) <= set(K_SOURCES) and set(rows["evaluation"]) <= set(EVALUATIONS)
    assert set(rows["flavour"]) <= set(FLAVOURS) and set(rows["group"]) <= {"all", "old", "new", "summary"}
    summary = rows["group"] == "summary"
    assert (rows.loc[summary, "step"] == "summary").all() and set(rows.loc[summary, "metric"]) <= SUMMARY
    steps = rows.loc[~summary]
    assert (steps["metric"] == "acc").all() and steps["step"].str.isdigit().all()
    # a step's split must have that step (step 0: the labelled one)
    assert all(int(s) <= MIXED_SPLITS[p].steps for s, p in zip(steps["step"], steps["split"]))
    # old/new of a step are a sense of old (hard or soft), All has none
    assert ((steps["group"] == "all") == (steps["flavour"] == "cgcd")).all()


def test_promptccds_averages_are_the_means_of_its_seven_datasets():
    """Table 1's `Avg. results` (printed) against the mean of the 7 datasets as transcribed, row by row."""
    table = peer_reference("promptccd")
    table["what"] = table["column"].str.rsplit(" ", n=1).str[1]
    table["where"] = table["column"].str.rsplit(" ", n=1).str[0]
    for (row, what), part in table.groupby(["row", "what"]):
        values = part.set_index("where")["value"]
        assert values.drop("Avg. results").mean() == pytest.approx(values["Avg. results"], abs=0.011), (row, what)


def test_happys_md_is_the_mean_new_of_its_table_1_and_its_text_agrees():
    table = peer_reference("happy")
    t1, t3 = table[table["table"] == "Table 1"], table[table["table"] == "Table 3"]
    new = t1[t1["column"].str.endswith(" New")]
    for r in t3[t3["column"].str.endswith(" Md")].itertuples():
        mean = new[(new["label"] == r.label) & (new["dataset"] == r.dataset)]["value"]
        assert len(mean) == 5 and mean.mean() == pytest.approx(r.value, abs=0.006), (r.row, r.column)

    def cell(label, column):
        return t1[(t1["label"] == label) & (t1["column"] == column)]["value"].item()

    # its Sec. 5.2: on IN100, 11.90% and 7.50% over MetaGCD and GM in 'All' (the last step)
    assert cell("Happy", "IN100 Stage-5 All") - cell("MetaGCD", "IN100 Stage-5 All") == pytest.approx(11.90)
    assert cell("Happy", "IN100 Stage-5 All") - cell("GM", "IN100 Stage-5 All") == pytest.approx(7.50)
    # its Table 5 (g): CIFAR100's 5-stage averages 69.00 / 71.82 / 51.36
    happy = t1[(t1["label"] == "Happy") & (t1["dataset"] == "cifar100") & (t1["step"] != "0")]
    for sense, printed in (("All", 69.00), ("Old", 71.82), ("New", 51.36)):
        assert happy[happy["column"].str.endswith(f" {sense}")]["value"].mean() == pytest.approx(printed, abs=0.006)


def test_an_unknown_peer_is_refused_with_the_valid_names(tmp_path, capsys):
    with pytest.raises(BenchError, match=r"paper, a peer's tables \(one name alone: happy, promptccd, vb-cgcd\) or "
                                          r"two methods.*did you mean 'happy'"):
        peer_name(["hapy"])
    assert peer_name(["paper"]) is None and peer_name(["Baseline", "K-means"]) is None
    assert peer_name(["PromptCCD"]) == "promptccd" and set(PEERS) == {"happy", "promptccd", "vb-cgcd"}
    assert main(["report", "--results", str(tmp_path), "--compare", "promtccd"]) == 2
    assert "did you mean 'promptccd'" in capsys.readouterr().err


def test_a_peer_without_a_stored_table_says_what_is_missing(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "paper"
    empty.mkdir()
    monkeypatch.setattr("bench.reporting.peers.PAPER_DIR", empty)
    with pytest.raises(BenchError, match="no published table of vb-cgcd under"):
        peer_reference("vb-cgcd")
    assert main(["report", "--results", str(tmp_path), "--compare", "vb-cgcd"]) == 2  # before any run is read
    err = capsys.readouterr().err
    assert "no published table of vb-cgcd" in err and not (tmp_path / "reports").exists()
    assert "`--compare vb-cgcd` alone names VB-CGCD's published tables: to compare the method VB-CGCD with another, " \
           "name both (`--compare vb-cgcd k-means`)" in err


def test_one_name_is_a_peers_tables_and_two_names_are_two_methods(capsys):
    """`vb-cgcd`, `happy` and `promptccd` are both a peer and a method's slug: one name alone is the peer's tables,
    two names are two methods of the report (their rows found by slug, name or label), as `--help` says."""
    from bench.cli.main import build_parser
    from bench.reporting.compare import Named, compare_request, paired_labels

    assert compare_request(["Happy"]) == ("happy", ()) and compare_request(["paper"]) == (None, ())
    assert compare_request(["vb-cgcd", "k-means"]) == (None, (Named("vb-cgcd", "VB-CGCD"), Named("k-means", "K-means")))
    assert compare_request(["happy", "promptccd"]) == (None, (Named("happy", "Happy"), Named("promptccd", "PromptCCD")))
    frame = pd.DataFrame({"label": ["VB-CGCD", "K-means", "Happy · pixels", "EwC [equations]"]})
    assert paired_labels(frame, compare_request(["vb-cgcd", "k-means"])[1]) == ("VB-CGCD", "K-means")
    assert paired_labels(frame, compare_request(["happy", "ewc:equations"])[1]) == ("Happy · pixels", "EwC [equations]")
    assert paired_labels(frame, compare_request(["EwC [equations]", "VB-CGCD"])[1]) == ("EwC [equations]", "VB-CGCD")
    with pytest.raises(BenchError, match="'ewc' is no row of the report"):  # EwC's default preset: not in the report
        paired_labels(frame, compare_request(["ewc", "k-means"])[1])
    two = pd.DataFrame({"label": ["K-means", "K-means · pixels", "Happy"]})
    with pytest.raises(BenchError, match=r"'k-means' names 2 rows of the report \(K-means, K-means · pixels\)"):
        paired_labels(two, compare_request(["k-means", "happy"])[1])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["report", "--help"])
    assert "one name alone is the peer's tables" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("split, parts", [("happy-5-stage · draw 0", ("happy-5-stage", "known", "inductive")),
                                          ("promptccd-3-stage · draw 1 · K silhouette · transductive",
                                           ("promptccd-3-stage", "silhouette", "transductive"))])
def test_a_measured_split_label_is_read_back_into_its_protocol(split, parts):
    assert split_parts(split) == parts


@pytest.fixture
def happy_on_synthetic(tmp_path, monkeypatch):
    """Happy's Table 1, as stored, but its CIFAR-100 cells on bench's `synthetic` dataset and `pixels`; and a K-means run of
    `happy-5-stage` on it (K known and estimated)."""
    from bench.config.grids import expand, load_grid
    from bench.protocol.runner import execute

    papers = tmp_path / "paper"
    papers.mkdir()
    table = pd.read_csv(PAPER_DIR / "peer_happy_table1.csv", dtype=str, keep_default_na=False)
    table.loc[table["dataset"] == "cifar100", ["dataset", "backbone"]] = ["synthetic", "pixels"]
    table.to_csv(papers / "peer_happy_table1.csv", index=False)
    shutil.copy(PAPER_DIR / "peer_happy_table4.csv", papers)
    monkeypatch.setattr("bench.reporting.peers.PAPER_DIR", papers)
    specs = expand(load_grid("cgcd-demo"), methods=["K-means"], seeds=[0], splits=["happy-5-stage"],
                   options={"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4},
                   datasets=["synthetic"])
    runs = {s.config["setting"]["k"]: execute(s, tmp_path / "results") for s in specs}
    return tmp_path / "results", runs


def test_compare_happy_renders_published_and_measured_cells(happy_on_synthetic, capsys):
    results, runs = happy_on_synthetic
    report = bench.report(results=results, format=["markdown", "latex", "csv"], compare=["happy"], out=results / "r")
    assert {"compare_happy.md", "compare_happy.tex", "compare_happy.csv"} <= {p.name for p in report.paths}
    err = capsys.readouterr().err
    assert "--compare happy: 578 rows, 16 beside a measured cell, 0 reference only" in err
    metrics = pd.read_parquet(runs["known"] / "metrics.parquet")
    stage1 = metrics[(metrics.step == 1) & (metrics.group == "new") & (metrics.flavour == "cgcd_soft")]["value"].item()
    stage0 = metrics[(metrics.step == 0) & (metrics.group == "all")]["value"].item()
    text = (results / "r" / "compare_happy.md").read_text()
    rows = {line.split("|")[2].strip(): line for line in text.splitlines()
            if line.startswith("| KMeans [43]") and "synthetic" in line}
    assert len(rows) == 16  # S-0 All and 5 steps of All, Old, New on the dataset that ran
    assert "32.80" in rows["C100 Stage-1 New"] and f"happy-5-stage · draw 0: {stage1:.2f} (n=1)" in rows["C100 Stage-1 New"]
    assert f"{stage1 - 32.80:+.2f}" in rows["C100 Stage-1 New"] and f"{stage0:.2f}" in rows["C100 S-0 All"]
    # bench's draw in the class order is Happy's protocol but not Happy's run of it: set beside, and marked so
    assert all("[not Happy's run: bench's draw, not Happy's images (setting.draw=happy); its classes in another "
               "order than Happy's (setting.arrival=happy)]" in row for row in rows.values())
    assert "16 of the measured cells are not Happy's own run of the protocol" in err
    tables, left = text.split("## Measured, beside no published cell")
    assert "K silhouette" not in tables and "K silhouette" in left  # Happy's tables are K known: beside none
    # a method bench does not run: published only; a cell bench has no protocol for: reference only, and why
    assert "| Happy (Ours)          | C100 Stage-5 All  | 59.99       | Happy Tab. 1 | synthetic · happy-5-stage · "\
           "step 5 all" in text and "not run" in text
    # its Table 4's 10 sessions are bench's happy-10-stage: not run here, no longer reference only
    table4 = [line for line in text.splitlines() if "C100 stage 10 All" in line]
    assert len(table4) == 3 and all("cifar100 · happy-10-stage · step 10 all" in line and "not run" in line
                                    for line in table4), table4
    assert "Source: NeurIPS 2024 camera-ready PDF" in text and "## Ma et al., Happy, NeurIPS 2024, Table 4" in text
    latex = (results / "r" / "compare_happy.tex").read_text()
    assert "\\paragraph{Ma et al., Happy, NeurIPS 2024, Table 1}" in latex and "\\toprule" in latex
    frame = pd.read_csv(results / "r" / "compare_happy.csv")
    measured = frame[frame["status"].isna()]
    assert len(measured) == 16 and np.allclose(measured["diff"], measured["mean"] - measured["value"])
    # the estimated-K run is beside no cell, and the one field that keeps it out is named
    assert "--compare happy leaves out synthetic · happy-5-stage · draw 0 · K silhouette on pixels (K-means): beside " \
           "no published cell: its K silhouette (the tables': known)\n" in err


def test_compare_happy_names_every_field_that_keeps_a_run_out_backbone_included(happy_on_synthetic, monkeypatch,
                                                                                  capsys):
    from bench.reporting.load import load_metrics
    from bench.reporting.peers import left_out

    results, runs = happy_on_synthetic
    papers = results.parent / "dino"  # the tables' cells on the dataset that ran, but on their own backbone
    papers.mkdir()
    table = pd.read_csv(PAPER_DIR / "peer_happy_table1.csv", dtype=str, keep_default_na=False)
    table.loc[table["dataset"] == "cifar100", "dataset"] = "synthetic"
    table.to_csv(papers / "peer_happy_table1.csv", index=False)
    monkeypatch.setattr("bench.reporting.peers.PAPER_DIR", papers)
    bench.report(results=results, format="markdown", compare=["happy"], out=results / "r")
    err = capsys.readouterr().err
    assert "0 beside a measured cell" in err and "with the tables' backbone, K and evaluation" in err
    assert "--compare happy leaves out synthetic · happy-5-stage · draw 0 on pixels (K-means): beside no published " \
           "cell: its backbone pixels (the tables': dino-vitb16)\n" in err
    assert "· K silhouette on pixels (K-means): beside no published cell: its backbone pixels (the tables': " \
           "dino-vitb16), K silhouette (the tables': known)\n" in err
    text = (results / "r" / "compare_happy.md").read_text()
    assert "## Measured, beside no published cell" in text and "- synthetic · happy-5-stage · draw 0 on pixels" in text
    # on the tables' protocol, a method they have no row of is named as such
    frame = load_metrics(runs.values()).assign(label="Baseline++", backbone="dino-vitb16")
    lines = left_out("happy", frame)
    assert lines[0].startswith("Baseline++ on synthetic · happy-5-stage · draw 0 on dino-vitb16: no row of Happy's "
                               "tables (their methods: ") and "K-means" in lines[0]


def test_compare_happy_on_runs_of_no_happy_protocol_says_what_is_missing(tmp_path, capsys):
    from bench.config.grids import expand, load_grid
    from bench.protocol.runner import execute

    specs = expand(load_grid("cgcd-demo"), methods=["K-means"], seeds=[0], splits=["promptccd-3-stage"],
                   options={"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4},
                   datasets=["synthetic"])
    execute(specs[0], tmp_path)
    bench.report(results=tmp_path, format="markdown", compare="happy", out=tmp_path / "r")
    err = capsys.readouterr().err
    assert "0 beside a measured cell" in err and "no run of this report is on a protocol of Happy's tables" in err
    assert "cifar100/happy-5-stage" in err and "bench run --grid cgcd" in err
    table = compare_peer("happy", pd.DataFrame(columns=["label", "dataset", "split", "backbone", "seed", "step",
                                                        "group", "flavour", "metric", "value"]))
    assert set(table["status"]) == {"not run", "no bench protocol"}


@pytest.mark.parametrize("split, said", [
    ("happy-5-stage · Happy's draw · arrival happy · selected as Happy · ORACLE ON TEST", []),
    ("happy-5-stage · draw 0", ["bench's draw", "another order"]),
    ("happy-5-stage · Happy's draw", ["another order"]),
    ("happy-cub-5-stage · draw 0 · arrival happy-ssb", ["bench's draw"]),
    ("happy-cub-5-stage · Happy's draw · arrival happy-ssb", []),
    ("happy-in100-5-stage · Happy's draw · arrival happy", []),
])
def test_a_cell_beside_happys_says_what_of_happys_run_it_did_not_replay(split, said):
    from bench.reporting.peers import departures

    got = departures("happy", split)
    assert len(got) == len(said) and all(words in line for words, line in zip(said, got))
    assert departures("promptccd", split) == []


def _vb_cell(table: pd.DataFrame, label: str, column: str) -> float:
    return table[(table["row"] == label) & (table["column"] == column)]["value"].item()


# VB-CGCD's Table 3 (printed): its novelty learning rate M_d, "the average accuracy of new classes in each session"
VB_CGCD_MD = {"PromptCCD": {"C100": 54.28, "Tiny": 54.88, "IN100": 72.77, "CUB": 47.15},
              "Happy": {"C100": 55.80, "Tiny": 41.70, "IN100": 72.88, "CUB": 35.26},
              "VB-CGCD": {"C100": 79.14, "Tiny": 68.12, "IN100": 87.04, "CUB": 56.46}}
# its Tables 11, 12 and 13 (App. C.4), row R = 0, the setting of Table 2: C100 All, Old and New of the 5 online sessions
VB_CGCD_R0 = {"All": [88.40, 86.0, 83.61, 82.72, 81.23], "Old": [89.46, 87.06, 84.75, 82.85, 81.84],
              "New": [83.10, 79.60, 75.60, 81.70, 75.70]}


def test_vb_cgcds_table_2_agrees_with_its_table_3_its_appendix_and_its_text():
    table = peer_reference("vb-cgcd")
    for label, printed in VB_CGCD_MD.items():
        for data, md in printed.items():
            new = [_vb_cell(table, label, f"{data} S{s} New") for s in range(1, 6)]
            # to the printed digit: PromptCCD's CUB mean, 47.158, is printed 47.15 (cut, not rounded)
            assert np.mean(new) == pytest.approx(md, abs=0.0081), (label, data)
    for what, values in VB_CGCD_R0.items():
        assert [_vb_cell(table, "VB-CGCD", f"C100 S{s} {what}") for s in range(1, 6)] == pytest.approx(values)
    # its Sec. 4.2 and abstract: the last session's All exceeds the best baseline's by 15.21 on average over the datasets
    gains = [_vb_cell(table, "VB-CGCD", f"{d} S5 All") - max(_vb_cell(table, m, f"{d} S5 All")
                                                              for m in ("GM", "MetaGCD", "PromptCCD", "Happy"))
             for d in ("C100", "Tiny", "IN100", "CUB")]
    assert np.mean(gains) == pytest.approx(15.21, abs=0.006)


def test_vb_cgcds_gm_and_metagcd_rows_are_happys_table_1_and_are_mapped_as_it_maps_them():
    """GM's and MetaGCD's rows (and Happy's on IN100) are Happy's Table 1 cell for cell: Happy's runs, copied, so on
    Happy's protocols; Happy's other rows are not Happy's numbers (VB-CGCD's runs), nor are they mapped as Happy's."""
    ours, happy = peer_reference("vb-cgcd"), peer_reference("happy")
    happy = happy[happy["table"] == "Table 1"]
    happy = happy.assign(column=happy["column"].str.replace("S-0", "S0").str.replace("Stage-", "S"))
    key = ["label", "column"]
    both = ours.merge(happy, on=key, suffixes=("", "_happy"))
    assert len(both) == 3 * 4 * 16
    copied = both["label"].isin(["GM", "MetaGCD"]) | both["column"].str.startswith("IN100")
    assert (both.loc[copied, "value"] == both.loc[copied, "value_happy"]).all()
    assert (both.loc[~copied, "value"] != both.loc[~copied, "value_happy"]).sum() >= 40  # Happy re-run: other numbers
    same = ["dataset", "split", "step", "group", "flavour"]
    assert (both.loc[copied, same].to_numpy() == both.loc[copied, [f"{c}_happy" for c in same]].to_numpy()).all()
    assert both.loc[copied, "note"].str.contains("copied").all()


def test_vb_cgcds_own_runs_are_mapped_only_where_bench_has_its_protocol_with_its_notes():
    table = peer_reference("vb-cgcd")
    own = table[~table["note"].str.contains("copied")]
    assert set(own["label"]) == {"VB-CGCD", "Happy", "PromptCCD"}
    assert own["note"].str.contains("one run, seeds 0").all() and own["note"].str.contains("K known per session").all()
    assert own["note"].str.contains("New = the classes new in this session").all()
    # C100 and Tiny are happy-5-stage (its counts, the class order); IN100 (another class list) and CUB (other labelled
    # classes and counts) are no bench protocol, and say why
    on = own[mapped(own)]
    assert set(on["dataset"]) == {"cifar100", "tinyimagenet"} and set(on["split"]) == {"happy-5-stage"}
    off = own[~mapped(own)]
    assert set(off["column"].str.split().str[0]) == {"IN100", "CUB"} and off["note"].str.contains("not mapped").all()
    # New is the session's new classes, Old every class before: bench's soft sense
    steps = table[table["group"].isin(["old", "new"])]
    assert set(steps["flavour"]) == {"cgcd_soft"}


def test_compare_vb_cgcd_sets_measured_cells_beside_its_table_and_marks_another_class_order(tmp_path, capsys):
    from bench.reporting.peers import departures, write_peer_compare

    def metric(split: str, seed: int, value: float) -> dict:
        return dict(label="VB-CGCD", dataset="cifar100", split=split, backbone="dino-vitb16", seed=seed, step=5,
                    group="new", flavour="cgcd_soft", metric="acc", value=value)

    frame = pd.DataFrame([metric("happy-5-stage · draw 0", 0, 70.0), metric("happy-5-stage · draw 0", 1, 72.0),
                          metric("happy-5-stage · draw 0 · arrival happy", 0, 60.0)])
    table = compare_peer("vb-cgcd", frame)
    cell = table[(table["row"] == "VB-CGCD") & (table["column"] == "C100 S5 New")]
    assert len(cell) == 2 and set(cell["status"]) == {""}
    canonical = cell[cell["measured_split"] == "happy-5-stage · draw 0"].iloc[0]
    assert canonical["mean"] == pytest.approx(71.0) and canonical["diff"] == pytest.approx(71.0 - 75.70)
    assert canonical["departs"] == "" and "another order than VB-CGCD's" in cell["departs"].iloc[1]
    assert departures("vb-cgcd", "happy-in100-5-stage · draw 0") == departures("happy", "happy-in100-5-stage · draw 0")
    paths = write_peer_compare("vb-cgcd", frame, ["markdown"], tmp_path, {"markdown": "md"})
    text = paths[0].read_text()
    assert "## Dai and Chauhan, VB-CGCD, ICML 2025, Table 2" in text and "VB-CGCD Tab. 2" in text
    assert "happy-5-stage · draw 0: 71.00 ± 1.41 (n=2)" in text and "no bench protocol (not mapped: its ImageNet-100" in text
    err = capsys.readouterr().err  # 320 cells, one beside two configurations; IN100 and CUB of its own runs: 5 x 16
    assert "--compare vb-cgcd: 321 rows, 2 beside a measured cell, 80 reference only" in err
    assert "1 of the measured cells are not VB-CGCD's own run" in err and "bench run --grid vb-cgcd-tables" in err


def test_vb_cgcds_rows_copied_from_happy_are_judged_as_happys_runs():
    from bench.reporting.peers import departures

    happys_run = "happy-5-stage · Happy's draw · arrival happy"
    assert departures("vb-cgcd", happys_run, "MetaGCD") == [] and departures("vb-cgcd", happys_run, "GM") == []
    assert "another order than VB-CGCD's" in departures("vb-cgcd", happys_run, "VB-CGCD")[0]
    assert "bench's draw" in departures("vb-cgcd", "happy-5-stage · draw 0", "MetaGCD")[0]
    assert departures("vb-cgcd", "happy-5-stage · draw 0", "VB-CGCD") == []


def test_a_published_cell_that_does_not_add_up_is_kept_as_printed_and_says_so():
    """Happy's Table 1, MetaGCD on ImageNet-100 after stage 2: All 73.79 where its Old 75.93 (60 classes) and New 54.90
    (10 classes, 50 test images each) give 72.93; VB-CGCD's Table 2 prints the same 73.79, so it is the paper's."""
    happy, vb = peer_reference("happy"), peer_reference("vb-cgcd")

    def cell(table, row, column):
        return table[(table["row"] == row) & (table["column"] == column)]

    printed = cell(happy, "MetaGCD [18]", "IN100 Stage-2 All")
    old, new = (cell(happy, "MetaGCD [18]", f"IN100 Stage-2 {g}")["value"].item() for g in ("Old", "New"))
    assert printed["value"].item() == 73.79 and abs((60 * old + 10 * new) / 70 - 72.93) < 0.005
    assert cell(vb, "MetaGCD", "IN100 S2 All")["value"].item() == 73.79
    assert "kept as printed" in printed["note"].item()

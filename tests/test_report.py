"""Reports: aggregation over seeds, the Tab. 5 layout with direction-aware bolding, the layouts of Tab. 2,
3 and 4, and the figures."""
from __future__ import annotations

import io
import shutil
import subprocess

import pandas as pd
import pytest

from bench.reporting import write_report
from bench.reporting.aggregate import backbone_label, final_scores, step_curves
from bench.reporting.plots import method_colour
from bench.reporting.table import escape_latex, leaderboard, render_table


def frame_of(entries):
    """entries: (label, dataset, split, seed, primary, {(flavour, metric): value}, curve) → long frame."""
    rows = []
    for label, dataset, split, seed, primary, summary, curve in entries:
        preset = label.split(" [")[1].rstrip("]") if " [" in label else "code"  # as RunSpec.label writes it
        base = dict(run_id=f"{label}-{dataset}-{split}-{seed}", method=label.split(" [")[0], preset=preset,
                    label=label, dataset=dataset, split=split, n_steps=len(curve), backbone="pixels", seed=seed,
                    primary_flavour=primary)
        for (flavour, metric), v in summary.items():
            rows.append({**base, "step": len(curve) - 1, "group": "summary", "flavour": flavour, "metric": metric, "value": v})
        for step, v in enumerate(curve):
            for flavour in ("wo", "w"):
                rows.append({**base, "step": step, "group": "all", "flavour": flavour, "metric": "acc", "value": v})
    return pd.DataFrame(rows)


def s(a, f, a_w=0.0, f_w=0.0):
    return {("wo", "A"): a, ("wo", "F"): f, ("w", "A"): a_w, ("w", "F"): f_w}


@pytest.fixture
def frame():
    return frame_of([
        ("Baseline", "C10", "5-step", 0, "wo", s(80.0, 10.0), [90, 80]),
        ("Baseline", "C10", "5-step", 1, "wo", s(84.0, 14.0), [92, 84]),
        ("Baseline++", "C10", "5-step", 0, "wo", s(84.04, 5.0), [91, 84]),  # ties Baseline's 82.0? no: 84.0 vs 82.0
        ("K-means", "C10", "5-step", 0, "w", s(1.0, 99.0, a_w=95.0, f_w=2.0), [99, 95]),
        ("Baseline", "C10", "10-step", 0, "wo", s(70.0, 20.0), [90, 70]),
        ("Baseline", "C10", "2-step", 0, "wo", s(88.0, 3.0), [93, 88]),
        ("Baseline++", "C10", "2-step", 0, "wo", s(88.04, 3.0), [93, 88]),
    ])


def test_mean_std_and_seed_count(frame):
    scores = final_scores(frame)
    row = scores[(scores["label"] == "Baseline") & (scores["split"] == "5-step") & (scores["metric"] == "A")].iloc[0]
    assert (row["mean"], row["n"]) == (82.0, 2)
    assert row["std"] == pytest.approx(2.8284271, rel=1e-6)  # sample std of 80 and 84
    one = scores[(scores["label"] == "Baseline++") & (scores["split"] == "5-step") & (scores["metric"] == "A")].iloc[0]
    assert one["n"] == 1 and pd.isna(one["std"])


def test_each_method_is_scored_in_its_primary_flavour(frame):
    scores = final_scores(frame)
    kmeans = scores[(scores["label"] == "K-means") & (scores["metric"] == "A")].iloc[0]
    assert kmeans["mean"] == 95.0  # its w value, not the near-chance wo one


def test_splits_sort_numerically(frame):
    assert list(final_scores(frame)["split"].cat.categories) == ["2-step", "5-step", "10-step"]


def test_bold_is_direction_aware_tie_aware_and_skips_references(frame):
    md = render_table(final_scores(frame), "markdown", exclude_from_best=["K-means"])
    lines = {line.split("|")[1].strip() + "/" + line.split("|")[2].strip(): line for line in md.splitlines()[2:] if line.startswith("|")}
    # 5-step: A best is Baseline++ 84.0 (K-means' 95.0 is a reference: never bold); F best is Baseline++ 5.0.
    assert "**84.0**" in lines["5-step/Baseline++"] and "**5.0**" in lines["5-step/Baseline++"]
    assert "**" not in lines["5-step/Baseline"] and "**" not in lines["5-step/K-means"]
    assert "82.0 ± 2.8" in lines["5-step/Baseline"]
    # 2-step: 88.0 and 88.04 display equally → both bold; F ties at 3.0 → both bold.
    assert lines["2-step/Baseline"].count("**") == 4 and lines["2-step/Baseline++"].count("**") == 4


def test_csv_is_tidy(frame):
    text = render_table(final_scores(frame), "csv")
    assert text.splitlines()[0] == "split,dataset,method,metric,mean,std,n,ci95,source"
    # two seeds, 80 and 84: std 2.8284, the 95% CI's half-width t(0.975, 1) · 2.8284 / √2 = 25.4124
    assert "5-step,C10,Baseline,A,82.0000,2.8284,2,25.4124" in text


def test_latex_layout_and_escaping(frame):
    tex = render_table(final_scores(frame).assign(label=lambda d: d["label"].astype(str).replace("Baseline", "My_m&thod")),
                       "latex", caption="c")
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"\multirow{3}{*}{5-step}" in tex
    assert r"\multicolumn{2}{c}{C10}" in tex and r"\cmidrule(lr){3-4}" in tex
    assert r"My\_m\&thod" in tex and r"82.0\,$\pm$\,2.8" in tex
    assert escape_latex("50%_#") == r"50\%\_\#"


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_latex_compiles(frame, tmp_path):
    tex = render_table(final_scores(frame), "latex", caption=r"mean $\pm$ std")
    compile_latex(tex, tmp_path, packages="booktabs,multirow")


def compile_latex(tex, tmp_path, packages):
    doc = tmp_path / "doc.tex"
    doc.write_text(f"\\documentclass{{article}}\n\\usepackage{{{packages}}}\n\\begin{{document}}\n"
                   + tex + "\n\\end{document}\n")
    out = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 0


def test_leaderboard_sorts_best_first(frame):
    text = leaderboard(final_scores(frame))
    five = [line for line in text.splitlines() if "5-step" in line]
    assert [line.split("|")[3].strip() for line in five] == ["K-means", "Baseline++", "Baseline"]


def test_curves_and_figures(frame, tmp_path):
    curves = step_curves(frame)
    base = curves[(curves["label"] == "Baseline") & (curves["split"] == "5-step")]
    assert base["mean"].tolist() == [91.0, 82.0]
    paths = write_report(frame, tmp_path, "latex", title="t", exclude_from_best=["K-means"])
    names = {p.name for p in paths}
    assert {"table.tex", "radar.png", "radar.pdf", "curve_C10_2-step.pdf", "steps_C10.png", "steps_C10.pdf"} <= names
    assert all(p.stat().st_size > 1000 for p in paths if p.suffix in (".png", ".pdf"))
    # the caption says why a reference method's best F or A is not bold
    tex = (tmp_path / "table.tex").read_text()
    assert "best per column in bold (K-means: reference methods, never bold)." in tex


def test_empty_frame_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no finished runs"):
        write_report(pd.DataFrame(), tmp_path, "csv", title="t")


def test_colours_are_fixed_per_method():
    assert method_colour("Baseline") == method_colour("Baseline [code]") != method_colour("Baseline++")
    assert method_colour("MyMethod") == method_colour("MyMethod")


def test_every_method_of_a_figure_is_drawn_distinctly_and_the_paper_methods_keep_their_colours():
    from bench.reporting.plots import MIN_DELTA_E, PALETTE, _lab, delta_e, figure_styles

    # a user's method beside Baseline was drawn in a near-Baseline blue (its name's hash): never again
    styles = figure_styles(["Baseline", "proto-head", "Baseline [equations]"])
    assert styles["Baseline"] == (PALETTE["Baseline"], "-") and styles["Baseline [equations]"] == (PALETTE["Baseline"], "--")
    assert delta_e(styles["proto-head"][0], PALETTE["Baseline"]) >= MIN_DELTA_E
    # every paper method and 30 plugins' in one figure: no two methods share colour and line style
    labels = list(PALETTE) + [f"plugin-{i}" for i in range(30)]
    styles = figure_styles(labels)
    assert len(set(styles.values())) == len(labels)
    assert all(styles[m] == (c, "-") for m, c in PALETTE.items())
    # distinct colours first: the first plugins' are all at least MIN_DELTA_E from every colour drawn before them
    solid = [styles[f"plugin-{i}"][0] for i in range(30) if styles[f"plugin-{i}"][1] == "-"]
    drawn = list(PALETTE.values())
    for colour in solid:
        assert all(delta_e(colour, d) >= MIN_DELTA_E for d in drawn), colour
        drawn.append(colour)
    assert figure_styles(labels) == styles  # the same labels, the same styles
    assert _lab("#ffffff").round(1).tolist() == [100.0, 0.0, 0.0] and _lab("#000000").round(1).tolist() == [0.0, 0.0, 0.0]


def test_the_colour_difference_is_ciede2000_and_the_mixed_settings_methods_are_told_apart():
    from bench.config.grids import load_grid
    from bench.reporting.plots import MIN_DELTA_E, ciede2000, delta_e, figure_styles

    # Sharma, Wu and Dalal's (2005) test pairs, with their published differences
    for first, second, published in [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
                                     ((50, 2.5, 0), (73, 25, -18), 27.1492), ((50, 2.5, 0), (61, -5, 29), 22.8977),
                                     ((50, 2.5, 0), (56, -27, -3), 31.9030), ((50, 0, 0), (50, -1, 2), 2.3669),
                                     ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644)]:
        assert ciede2000(first, second) == pytest.approx(published, abs=1e-4)
    # the greens the plain L*a*b* distance let through: Joint (frozen) and VB-CGCD in the cgcd-demo's figures
    assert delta_e("#2ca02c", "#009E73") < MIN_DELTA_E
    for grid in ("cgcd-demo", "cgcd", "cgcd-smoke"):
        labels = list(load_grid(grid).methods)
        styles = figure_styles(labels)
        for i, first in enumerate(labels):
            for second in labels[i + 1:]:
                assert delta_e(styles[first][0], styles[second][0]) >= MIN_DELTA_E, (grid, first, second)
    assert figure_styles(list(load_grid("cgcd-demo").methods))["VB-CGCD"][0] != "#009E73"


def test_compare_with_the_papers_numbers():
    from bench.reporting.compare import compare, paper_reference, render_compare

    ref = paper_reference()
    assert set(ref["metric"]) == {"A", "F"}
    row = ref[(ref["split"] == "2-step") & (ref["dataset"] == "cifar10") & (ref["label"] == "Baseline")
              & (ref["backbone"] == "dino-vitb16") & (ref["metric"] == "A")]
    assert row["paper"].tolist() == [89.2]
    rn50 = ref[(ref["backbone"] == "dino-resnet50") & (ref["dataset"] == "cifar10") & (ref["metric"] == "A")]
    assert rn50["paper"].tolist() == [45.8]
    ablation = ref[(ref["label"] == "Baseline++ [no_cosnorm]") & (ref["split"] == "2-step") & (ref["dataset"] == "cifar10")]
    assert len(ablation) == 2
    scores = pd.DataFrame([dict(split="2-step", dataset="cifar10", label="Baseline", backbone="dino-vitb16",
                                metric="A", mean=90.0, std=1.0, n=3),
                           dict(split="2-step", dataset="digits", label="Baseline", backbone="pixels",
                                metric="A", mean=50.0, std=float("nan"), n=1)])
    table = compare(scores, ref)
    assert table["diff"].iloc[0] == pytest.approx(0.8) and pd.isna(table["paper"].iloc[1])
    text = render_compare(table, "markdown")
    assert "90.0 ± 1.0" in text and "89.2" in text and "+0.8" in text


def test_the_paper_grid_has_a_block_per_table():
    from bench.config.grids import expand, load_grid

    grid = load_grid("paper")
    assert [b.name for b in grid.blocks] == ["tab5", "tab2", "tab3", "tab4", "cassle"]
    specs = expand(grid)
    assert len(specs) == len({s.run_id for s in specs}) == 116  # overlapping cells counted once
    tab4 = [s for s in specs if grid.blocks[3].contains(s)]
    assert sorted({s.backbone for s in tab4}) == ["clip-vitb16", "dino-resnet50", "dino-vitb16"]
    assert len(expand(load_grid("full"))) == 348
    # Tab. 5 and the appendix's table list the paper's rows in the paper's order
    from bench.reporting.compare import PAPER_DIR

    for block, csv in ((0, "table5_sota_comparison.csv"), (4, "appendix_table_cassle.csv")):
        assert list(grid.blocks[block].methods) == list(dict.fromkeys(pd.read_csv(PAPER_DIR / csv)["method"]))


def test_every_cell_of_the_paper_grid_has_the_papers_numbers_to_compare_with():
    """`bench report --compare paper` on the paper grid: every run's A and F has a number from the paper."""
    from bench.reporting.compare import paper_reference
    from bench.config.grids import expand, load_grid

    reference = paper_reference().set_index(["split", "dataset", "label", "backbone", "metric"])["paper"]
    cells = [(s.split, s.dataset, s.label, s.backbone, metric) for s in expand(load_grid("paper")) for metric in "AF"]
    missing = [cell for cell in cells if cell not in reference.index]
    assert not missing


# --- per-block layouts (Tab. 2, 3 and 4) ---------------------------------------------------------------

def md_rows(text):
    """A github table → its header cells and its rows as lists of stripped cells."""
    lines = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.strip().splitlines()
             if line.startswith("|")]  # the protocol note below the table is not a row
    return lines[0], lines[2:]


@pytest.fixture
def ablation_frame():
    # listed (d), (c), (b), (a) so that the order of the rows is the layout's, not the frame's;
    # Baseline [no_cosnorm] has no 5-step run: its row there must show `--`
    return frame_of([
        ("Baseline [no_cosnorm]", "C10", "2-step", 0, "wo", s(74.3, 16.1), [90, 74]),
        ("Baseline++ [no_cosnorm]", "C10", "2-step", 0, "wo", s(80.2, 8.2), [90, 80]),
        ("Baseline++ [no_cosnorm]", "C10", "5-step", 0, "wo", s(90.7, 6.3), [90, 90]),
        ("Baseline", "C10", "2-step", 0, "wo", s(89.2, 8.5), [90, 89]),
        ("Baseline", "C10", "5-step", 0, "wo", s(85.4, 8.2), [90, 85]),
        ("Baseline++", "C10", "2-step", 0, "wo", s(90.9, 4.5), [91, 90]),
        ("Baseline++", "C10", "5-step", 0, "wo", s(91.7, 7.6), [92, 91]),
        ("Baseline++", "C100", "5-step", 0, "wo", s(67.7, 12.3), [70, 67]),
    ])


def test_ablation_rows_marks_and_order(ablation_frame):
    headers, rows = md_rows(render_table(final_scores(ablation_frame), "markdown", layout="ablation"))
    assert headers[:4] == ["split", "", "CosNorm", "KTRFR"] and headers[4:] == ["C10 F↓", "C10 A↑", "C100 F↓", "C100 A↑"]
    marks = {"(a)": ["✓", "✓"], "(b)": ["✓", "✗"], "(c)": ["✗", "✓"], "(d)": ["✗", "✗"]}
    for split in ("2-step", "5-step"):
        group = [r for r in rows if r[0] == split]
        assert [r[1] for r in group] == ["(a)", "(b)", "(c)", "(d)"]
        assert all(r[2:4] == marks[r[1]] for r in group)
    by_row = {(r[0], r[1]): r[4:] for r in rows}
    # each row holds its own method's numbers; bold per split and column, F lower and A higher
    assert by_row[("2-step", "(a)")][:2] == ["**4.5**", "**90.9**"]
    assert by_row[("2-step", "(c)")][:2] == ["8.2", "80.2"] and by_row[("2-step", "(d)")][:2] == ["16.1", "74.3"]
    assert by_row[("5-step", "(c)")][:2] == ["**6.3**", "90.7"] and by_row[("5-step", "(a)")][:2] == ["7.6", "**91.7**"]
    assert by_row[("5-step", "(d)")] == ["--"] * 4  # no runs
    assert by_row[("5-step", "(a)")][2:] == ["**12.3**", "**67.7**"] and by_row[("5-step", "(b)")][2:] == ["--", "--"]


def test_ablation_latex_and_csv(ablation_frame):
    scores = final_scores(ablation_frame)
    tex = render_table(scores, "latex", layout="ablation")
    assert "amssymb" in tex.splitlines()[0] and tex.splitlines()[0].startswith("%")
    assert r"Split &  & CosNorm & KTRFR & F$\downarrow$" in tex and r"\cmidrule(lr){5-6} \cmidrule(lr){7-8}" in tex
    assert r"\multirow{4}{*}{5-step} & (a) & \checkmark & \checkmark & 7.6 & \textbf{91.7}" in tex
    assert r" & (c) & $\times$ & \checkmark & 8.2 & 80.2 & -- & --" in tex
    assert r" & (d) & $\times$ & $\times$ & -- & -- & -- & --" in tex
    csv = pd.read_csv(io.StringIO(render_table(scores, "csv", layout="ablation")))
    assert list(csv.columns) == ["split", "dataset", "row", "cosnorm", "ktrfr", "method", "metric", "mean", "std", "n", "ci95",
                                 "source"]
    keys = csv.drop_duplicates("method").set_index("method")[["row", "cosnorm", "ktrfr"]]
    assert keys.loc["Baseline [no_cosnorm]"].tolist() == ["(d)", "no", "no"]
    assert keys.loc["Baseline++ [no_cosnorm]"].tolist() == ["(c)", "no", "yes"]
    assert keys.loc["Baseline"].tolist() == ["(b)", "yes", "no"] and keys.loc["Baseline++"].tolist() == ["(a)", "yes", "yes"]
    assert csv[csv["split"] == "5-step"]["row"].drop_duplicates().tolist() == ["(a)", "(b)", "(c)"]


def backbone_frame(splits=("5-step",)):
    """Baseline on four backbones, labelled as `bench report` labels them, listed out of the paper's order."""
    entries = []
    for split in splits:
        for backbone, a, f in [("clip-vitb16", 87.5, 5.3), ("pixels", 30.0, 50.0), ("dino-resnet50", 45.8, 37.5),
                               ("dino-vitb16", 85.4, 8.2)]:
            for dataset, shift in (("C10", 0.0), ("C100", -20.0)):
                entries.append((backbone_label("Baseline", backbone, "dino-vitb16"), dataset, split, 0, "wo",
                                s(a + shift, f), [90, a]))
    frame = frame_of(entries)
    return frame.assign(backbone=frame["label"].str.split(" · ").str[1].fillna("dino-vitb16"), method="Baseline")


def test_backbone_rows_in_the_papers_order():
    headers, rows = md_rows(render_table(final_scores(backbone_frame()), "markdown", layout="backbones"))
    assert headers == ["backbone", "C10 F↓", "C10 A↑", "C100 F↓", "C100 A↑"]  # one split: no split column
    assert [r[0] for r in rows] == ["ResNet50-DINO", "ViT-B/16-DINO", "ViT-B/16-CLIP", "pixels"]
    assert rows[0][1:] == ["37.5", "45.8", "37.5", "25.8"]
    assert rows[2][1:] == ["**5.3**", "**87.5**", "**5.3**", "**67.5**"]  # best F and A of every column


def test_backbone_layout_with_several_splits_latex_and_csv():
    scores = final_scores(backbone_frame(("2-step", "5-step")))
    headers, rows = md_rows(render_table(scores, "markdown", layout="backbones"))
    assert headers[:2] == ["split", "backbone"] and [r[0] for r in rows] == ["2-step"] * 4 + ["5-step"] * 4
    tex = render_table(scores, "latex", layout="backbones")
    assert r"\multirow{4}{*}{2-step} & ResNet50-DINO & 37.5 & 45.8" in tex and "amssymb" not in tex
    csv = pd.read_csv(io.StringIO(render_table(scores, "csv", layout="backbones")))
    assert list(csv.columns) == ["split", "dataset", "method", "backbone", "metric", "mean", "std", "n", "ci95",
                                 "source"]
    assert set(csv["method"]) == {"Baseline"}
    assert csv["backbone"].drop_duplicates().tolist() == ["dino-resnet50", "dino-vitb16", "clip-vitb16", "pixels"]
    a = csv[(csv["metric"] == "A") & (csv["dataset"] == "C10") & (csv["split"] == "5-step")].set_index("backbone")
    assert a.loc["dino-resnet50", "mean"] == 45.8


def test_references_come_first_then_a_rule(frame):
    scores = final_scores(frame)  # K-means is listed after the baselines in the frame
    headers, rows = md_rows(render_table(scores, "markdown", exclude_from_best=["K-means"], layout="references"))
    assert [r[1] for r in rows if r[0] == "5-step"] == ["K-means", "Baseline", "Baseline++"]
    assert "**" not in " ".join(next(r for r in rows if r[1] == "K-means"))  # a reference is never bold
    tex = render_table(scores, "latex", exclude_from_best=["K-means"], layout="references").splitlines()
    kmeans = next(i for i, line in enumerate(tex) if "K-means" in line and not line.startswith(r"\caption"))
    assert tex[kmeans + 1] == r"\cmidrule{2-4}" and tex[kmeans + 2].startswith(" & Baseline &")
    assert sum(line.startswith(r"\cmidrule{") for line in tex) == 1  # no references in the other splits: no rule
    assert not any(line.startswith(r"\cmidrule{") for line in render_table(scores, "latex").splitlines())
    csv = pd.read_csv(io.StringIO(render_table(scores, "csv", exclude_from_best=["K-means"], layout="references")))
    assert csv.drop_duplicates("method").set_index("method")["reference"].to_dict() ==\
        {"Baseline": "no", "Baseline++": "no", "K-means": "yes"}


def test_bold_cells_are_the_same_in_every_layout(ablation_frame):
    """The layouts only reorder and rename rows: the bold cells are those of the Tab. 5 layout."""
    scores = final_scores(ablation_frame)

    def bold(layout, n_head):
        _, rows = md_rows(render_table(scores, "markdown", layout=layout))
        return sorted((r[0], tuple(r[n_head:])) for r in rows if any("**" in c for c in r))

    assert bold("comparison", 2) == bold("ablation", 4) != []


def test_unknown_layout_lists_the_valid_ones(frame):
    with pytest.raises(ValueError, match="unknown table layout 'tab9'; choose from comparison, references, ablation, backbones, "
                                         "baselines_last"):
        render_table(final_scores(frame), "markdown", layout="tab9")


def test_grid_layouts_are_checked(tmp_path, monkeypatch):
    from bench.registries import plugins
    from bench.errors import BenchError
    from bench.reporting.layouts import BUILDERS
    from bench.config.grids import LAYOUTS, load_grid

    assert set(LAYOUTS) == set(BUILDERS)
    assert [b.layout for b in load_grid("paper").blocks] == ["comparison", "references", "ablation", "backbones",
                                                             "baselines_last"]
    (tmp_path / "bad.py").write_text('seeds = [0]\nbackbone = "pixels"\nblocks = [dict(name="t", layout="wide", '
                                     'methods=["Baseline"], datasets=["digits"], splits=["2-step"])]\n')
    monkeypatch.setattr(plugins, "GRIDS_DIR", tmp_path)
    with pytest.raises(BenchError, match="grid 'bad', block 't': unknown table layout 'wide'; known: ablation, backbones, "
                                         "baselines_last, comparison, references"):
        load_grid("bad")


@pytest.fixture
def cassle_frame():
    """The appendix's table: CaSSLe listed last in the frame, two splits."""
    return frame_of([
        ("Baseline", "C10", "2-step", 0, "wo", s(89.2, 8.5), [95, 89]),
        ("Baseline++", "C10", "2-step", 0, "wo", s(90.9, 4.5), [95, 91]),
        ("CaSSLe", "C10", "2-step", 0, "wo", s(87.3, 9.1), [95, 87]),
        ("Baseline", "C10", "5-step", 0, "wo", s(85.4, 8.2), [95, 85]),
        ("CaSSLe", "C10", "5-step", 0, "wo", s(78.5, 11.3), [95, 78]),
    ])


def test_the_appendix_table_puts_the_compared_method_first_then_a_rule(cassle_frame):
    scores = final_scores(cassle_frame, {"label": ["CaSSLe", "Baseline", "Baseline++"]})
    headers, rows = md_rows(render_table(scores, "markdown", layout="baselines_last"))
    assert [r[1] for r in rows] == ["CaSSLe", "Baseline", "Baseline++", "CaSSLe", "Baseline"]
    assert (rows[0][3], rows[1][3], rows[2][3]) == ("87.3", "89.2", "**90.9**")  # bold: the best A of the split
    tex = render_table(scores, "latex", layout="baselines_last").splitlines()
    cassle = [i for i, line in enumerate(tex) if "& CaSSLe &" in line]
    assert len(cassle) == 2 and all(tex[i + 1].startswith(r"\cmidrule{2-") for i in cassle)


def test_forgetting_after_every_step_by_hand():
    """a_0 is the task-specific accuracy on task 0 after step 0; after step k the forgetting is a_0
    minus the accuracy on task 0 in the flavour of the method's reported F."""
    from bench.reporting.aggregate import step_forgetting

    rows = []
    for seed, (a0, wo, w) in enumerate([(90.0, [80.0, 70.0], [85.0, 60.0]), (94.0, [84.0, 64.0], [0.0, 0.0])]):
        base = dict(run_id=f"r{seed}", method="M", preset="code", label="M", dataset="C10", split="5-step",
                    n_steps=3, backbone="pixels", seed=seed, reported_A="wo/A", reported_F="wo/F", group="task_0",
                    metric="acc")
        rows.append({**base, "step": 0, "flavour": "task", "value": a0})
        rows += [{**base, "step": 0, "flavour": f, "value": 50.0} for f in ("wo", "w")]  # never read
        rows += [{**base, "step": k + 1, "flavour": "wo", "value": v} for k, v in enumerate(wo)]
        rows += [{**base, "step": k + 1, "flavour": "w", "value": v} for k, v in enumerate(w)]
    frame = pd.DataFrame(rows)
    out = step_forgetting(frame)
    assert out["mean"].tolist() == [0.0, 10.0, 25.0]  # seeds: (0, 10, 20) and (0, 10, 30)
    assert out["n"].tolist() == [2, 2, 2]
    frame["reported_F"] = "w/F"
    assert step_forgetting(frame[frame["run_id"] == "r0"])["mean"].tolist() == [0.0, 5.0, 30.0]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("layout", ["references", "ablation", "backbones", "baselines_last"])
def test_layouts_compile(layout, frame, ablation_frame, cassle_frame, tmp_path):
    scores = final_scores({"references": frame, "ablation": ablation_frame, "backbones": backbone_frame(),
                           "baselines_last": cassle_frame}[layout])
    tex = render_table(scores, "latex", caption="c", exclude_from_best=["K-means"], layout=layout)
    compile_latex(tex, tmp_path, packages="booktabs,multirow,amssymb")


# --- seed statistics ------------------------------------------------------------------------------------

def test_confidence_interval_by_hand():
    from bench.reporting.stats import ci95_half_width

    # values 1, 2, 3: std 1; Student's t at 0.975 with 2 degrees of freedom is 4.302653
    assert ci95_half_width(1.0, 3) == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-6)
    assert ci95_half_width(2.0, 2) == pytest.approx(12.706205 * 2 / 2 ** 0.5, rel=1e-6)
    assert pd.isna(ci95_half_width(float("nan"), 1))
    scores = final_scores(frame_of([("M", "C10", "2-step", seed, "wo", s(a, 0.0), [a]) for seed, a in
                                    enumerate([1.0, 2.0, 3.0])]))
    row = scores[scores["metric"] == "A"].iloc[0]
    assert (row["mean"], row["n"]) == (2.0, 3) and row["ci95"] == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-6)


def test_a_shown_interval_is_cut_to_the_metrics_range(frame):
    from bench.reporting.stats import ci95_bounds

    # Baseline, 5-step: A 82 ± 25.4124 over seeds 80 and 84 runs to 107.4, past any accuracy; F 12 ± 25.4 stays
    assert ci95_bounds(82.0, 25.4124, "A") == (pytest.approx(56.5876), 100.0)
    assert ci95_bounds(12.0, 25.4124, "F") == (pytest.approx(-13.4124), pytest.approx(37.4124))
    assert ci95_bounds(-95.0, 10.0, "F") == (-100.0, pytest.approx(-85.0))
    assert ci95_bounds(50.0, 80.0, "nmi") == (pytest.approx(-30.0), pytest.approx(130.0))  # no known range: uncut
    line = next(line for line in leaderboard(final_scores(frame)).splitlines() if "5-step" in line and "Baseline " in line)
    assert "56.6 – 100.0" in line


def test_paired_differences_over_shared_seeds_by_hand():
    from bench.reporting.stats import paired_differences

    rows = [("A", 0, 5.0), ("A", 1, 7.0), ("A", 2, 6.0), ("B", 0, 4.0), ("B", 1, 5.0), ("B", 2, 6.0), ("B", 3, 9.0),
            ("C", 0, 15.0), ("C", 1, 16.0), ("C", 2, 18.0)]
    values = pd.DataFrame([dict(split="2-step", dataset="C10", label=l, metric="A", seed=seed, value=v)
                           for l, seed, v in rows])
    near = paired_differences(values, "A", "B").iloc[0]  # differences 1, 2, 0 over the 3 shared seeds
    half = 4.302653 / 3 ** 0.5
    assert near["n"] == 3 and near["diff"] == pytest.approx(1.0)
    assert (near["ci_low"], near["ci_high"]) == (pytest.approx(1 - half, rel=1e-5), pytest.approx(1 + half, rel=1e-5))
    assert not near["beyond_noise"]
    far = paired_differences(values, "C", "B").iloc[0]  # differences 11, 11, 12
    assert far["diff"] == pytest.approx(34 / 3) and far["beyond_noise"]


def test_separable_by_hand():
    from bench.reporting.stats import separable

    half = 4.302653 / 3 ** 0.5  # differences with sample std 1 over 3 seeds
    assert separable({0: 3.0, 1: 4.0, 2: 5.0, 7: 0.0}, {0: 2.0, 1: 2.0, 2: 2.0}) is (2.0 > half)  # d = 1, 2, 3
    assert separable({0: 10.0, 1: 11.0, 2: 12.0}, {0: 2.0, 1: 2.0, 2: 2.0}) is True  # d = 8, 9, 10
    assert separable({0: 2.0, 1: 1.0}, {0: 1.0, 1: 2.0}) is False  # d = 1, −1
    assert separable({0: 5.0, 1: 6.0}, {1: 1.0, 2: 1.0}) is None  # one shared seed: cannot tell
    assert separable(float("nan"), {0: 1.0, 1: 2.0}) is None


def test_a_best_value_within_noise_of_the_runner_up_gets_a_dagger(tmp_path):
    runs = [("Near", 0, 60.0), ("Near", 1, 64.0), ("Near", 2, 59.0), ("Best", 0, 62.0), ("Best", 1, 61.0),
            ("Best", 2, 63.0), ("Far", 0, 30.0), ("Far", 1, 31.0), ("Far", 2, 29.0)]
    scores = final_scores(frame_of([(label, "C10", "2-step", seed, "wo", s(a, 100.0 - a), [a]) for label, seed, a in runs]))
    md = render_table(scores, "markdown")
    rows = {line.split("|")[2].strip(): line for line in md.splitlines()[2:] if line.startswith("|")}
    # A: Best 62.0 against Near 61.0, paired differences 2, −3, 4: not separable; F the same way round
    assert "**62.0 ± 1.0**†" in rows["Best"] and "**38.0 ± 1.0**†" in rows["Best"]
    assert "†" not in rows["Near"] and "†" not in rows["Far"]
    assert md.rstrip().endswith("† not separable from the runner-up: corrected p ≥ 0.05 (paired t-test over the seeds "
                                "both have, p-values corrected with Holm over the 2 comparisons of this table, each "
                                "column's bold value against its runner-up).")
    tex = render_table(scores, "latex", caption="Tab.")
    assert r"\textbf{62.0\,$\pm$\,1.0}$^\dagger$" in tex and r"\caption{Tab. " in tex
    assert r"$^\dagger$ not separable from the runner-up" in tex
    if shutil.which("pdflatex"):
        compile_latex(tex, tmp_path, packages="booktabs,multirow")
    # Near far behind: Best is separable from the runner-up, so no mark and no note
    clear = final_scores(frame_of([(label, "C10", "2-step", seed, "wo", s(a, 100.0 - a), [a])
                                   for label, seed, a in runs if label != "Near"]))
    assert "†" not in render_table(clear, "markdown") and "dagger" not in render_table(clear, "latex")
    # one seed: nothing can be told, nothing is marked
    one = final_scores(frame_of([(label, "C10", "2-step", 0, "wo", s(a, 0.0), [a]) for label, seed, a in runs if seed == 0]))
    assert "†" not in render_table(one, "markdown")


def test_the_runner_up_is_the_closest_by_its_unrounded_mean_and_missing_values_are_skipped():
    # Low (49.96) and High (50.04) both show 50.0; High is the runner-up, and Best is within its noise
    runs = [("Low", 0, 49.96), ("Low", 1, 49.96), ("Low", 2, 49.96), ("Best", 0, 51.0), ("Best", 1, 51.1),
            ("Best", 2, 50.9), ("High", 0, 52.04), ("High", 1, 48.04), ("High", 2, 50.04)]
    scores = final_scores(frame_of([(label, "C10", "2-step", seed, "wo", s(a, 0.0), [a]) for label, seed, a in runs]))
    rows = {line.split("|")[2].strip(): line for line in render_table(scores, "markdown").splitlines()[2:]
            if line.startswith("|")}
    assert "**51.0 ± 0.1**†" in rows["Best"]
    nan = final_scores(frame_of([(label, "C10", "2-step", seed, "wo", s(a, 0.0), [a]) for label, seed, a in
                                 [("Best", 0, 51.0), ("Best", 1, 51.1), ("Gone", 0, float("nan")), ("Gone", 1, float("nan"))]]))
    assert "†" not in render_table(nan, "markdown")  # a runner-up without values: nothing to test against
    from bench.reporting.stats import separable

    assert separable({0: 1.0, 1: float("nan"), 2: 2.0}, {0: 0.0, 1: 0.0, 2: 0.0}) is False  # 2 valid seeds: d = 1, 2
    assert separable({0: 1.0, 1: float("nan")}, {0: 0.0, 1: 0.0}) is None


def test_compare_two_methods_from_the_command_line(tmp_path, capsys):
    from bench.cli import main

    argv = ["--grid", "smoke", "--methods", "Baseline", "K-means", "--backbone", "pixels", "--seeds", "0", "1",
            "--results", str(tmp_path)]
    assert main(["run", *argv, "--cluster", "debug"]) == 0
    capsys.readouterr()
    assert main(["report", *argv, "--format", "markdown", "--compare", "Baseline", "K-means"]) == 0
    out = capsys.readouterr().out
    assert "Baseline − K-means" in out and "shared seeds" in out
    assert (tmp_path / "reports" / "smoke" / "compare_Baseline_vs_K-means.md").exists()
    # slugs, as every other option takes them, and a preset as --methods writes it
    assert main(["report", *argv, "--format", "markdown", "--compare", "k-means", "baseline:code", "--out",
                 str(tmp_path / "slugs")]) == 0
    assert "K-means − Baseline" in capsys.readouterr().out
    assert (tmp_path / "slugs" / "compare_K-means_vs_Baseline.md").exists()
    # refused before anything is written: no INCOMPLETE folder left behind
    refused = tmp_path / "refused"
    for compare, said in ((["Baseline", "EwC"], "--compare 'EwC' is no row of the report; its rows: Baseline, K-means"),
                          (["baseline", "k-meanz"], "--compare 'k-meanz' is no row of the report; did you mean "
                                                    "'K-means'?"),
                          (["baseline"], "got the one method 'baseline': name another to compare it with"),
                          (["baseline", "k-means", "ewc"], "(two different ones); got baseline k-means ewc"),
                          (["baseline", "Baseline"], "(two different ones); got baseline Baseline")):
        assert main(["report", *argv, "--compare", *compare, "--out", str(refused)]) == 2
        assert said in capsys.readouterr().err and not refused.exists()


@pytest.mark.parametrize("preset, old_label, label", [("code", "K-means [code]", "K-means"),
                                                      ("paper", "K-means", "K-means [equations]")])
def test_runs_recorded_under_the_old_preset_names_land_in_todays_rows(preset, old_label, label, tmp_path):
    """Before `code` became the default, the authors' configuration was labelled "[code]" and the paper's
    text was the default `paper`: reports label a run from its method and preset as they are named now."""
    from bench.reporting.load import load_metrics
    from bench.protocol.runner import execute
    from bench.runs.rundir import METRICS
    from tests.helpers import tiny_specs

    (spec,) = tiny_specs(methods=["K-means"])
    out = execute(spec, tmp_path)
    frame = pd.read_parquet(out / METRICS)
    frame.assign(preset=preset, label=old_label).to_parquet(out / METRICS, index=False)
    assert set(load_metrics([out])["label"]) == {label}


def test_report_file_names_are_plain():
    from bench.reporting.files import plain_name

    assert plain_name("K known") == "K-known" and plain_name("tab2") == "tab2"
    assert plain_name("happy-5-stage · draw 0 · K silhouette") == "happy-5-stage-draw-0-K-silhouette"
    assert plain_name("2-step · order 3") == "2-step-order-3" and plain_name("a/b") == "a-b"


def test_the_radar_draws_absolute_percentages_and_numbers_long_split_labels(tmp_path, monkeypatch):
    import bench.reporting.plots as plots

    kept = {}
    monkeypatch.setattr(plots, "_save", lambda fig, stem: kept.setdefault("fig", fig) and [])
    long = ["happy-5-stage · draw 0", "happy-5-stage · draw 0 · K silhouette"]
    scores = pd.DataFrame([dict(split=sp, dataset=d, label=l, metric=m, mean=v)
                           for sp in long for d in ("C100", "CUB")
                           for l, a, f in (("Baseline", 60.0, 20.0), ("mine", 30.0, 10.0)) for m, v in (("A", a), ("F", f))])
    plots.radar_plot(scores, long, tmp_path / "radar")
    ax = kept["fig"].axes[0]
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert lines["Baseline"][:4] == [60.0, 80.0, 60.0, 80.0] and lines["mine"][:4] == [30.0, 90.0, 30.0, 90.0]
    assert ax.get_ylim() == (0.0, 100.0)  # one absolute scale, not each axis over its best method
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "[1] C100\nA" and not any("silhouette" in t for t in ticks)
    assert "[2] happy-5-stage · draw 0 · K silhouette" in " ".join(t.get_text() for t in kept["fig"].texts)


def test_the_accuracy_matrix_is_each_tasks_accuracy_after_each_step_and_its_bwt(tmp_path):
    from bench.reporting.aggregate import accuracy_matrices, backward_transfer

    base = dict(method="Baseline", preset="code", label="Baseline", dataset="C10", split="3-step", n_steps=3,
                backbone="pixels", primary_flavour="wo")
    # R[t, k] by hand (flavour wo, the method's A): tasks lose 10 points per later step; `w` rows must not be read
    values = {(0, 0): 90.0, (1, 0): 80.0, (1, 1): 85.0, (2, 0): 70.0, (2, 1): 75.0, (2, 2): 88.0}
    rows = []
    for seed, shift in ((0, 0.0), (1, 2.0)):
        for (t, k), v in values.items():
            for flavour, value in (("wo", v + shift), ("w", 0.0)):
                rows.append({**base, "run_id": f"r{seed}", "seed": seed, "step": t, "group": f"task_{k}",
                             "flavour": flavour, "metric": "acc", "value": value})
        rows.append({**base, "run_id": f"r{seed}", "seed": seed, "step": 2, "group": "summary", "flavour": "wo",
                     "metric": "A", "value": 0.0})
    matrices = accuracy_matrices(pd.DataFrame(rows))
    got = {(int(r.step), int(r.task)): r.mean for r in matrices.itertuples()}
    assert got == {key: v + 1.0 for key, v in values.items()} and set(matrices["n"]) == {2}  # over the two seeds
    # BWT: mean of R[2,0] - R[0,0] = -20 and R[2,1] - R[1,1] = -10
    assert backward_transfer(matrices) == pytest.approx(-15.0)
    paths = write_report(frame_of([("Baseline", "C10", "2-step", 0, "wo", s(80.0, 10.0), [90, 80])]), tmp_path, "csv", "t")
    assert not any(p.name.startswith("matrix_") for p in paths)  # no per-task rows: no matrix drawn
    from bench.reporting.plots import matrix_plot

    written = matrix_plot(matrices, "C10", "3-step", tmp_path / "matrix_C10_3-step")
    assert [p.name for p in written] == ["matrix_C10_3-step.png", "matrix_C10_3-step.pdf"]
    assert all(p.stat().st_size > 1000 for p in written)


def test_per_class_accuracy_and_the_old_new_confusion_by_hand():
    import numpy as np

    from bench.reporting.per_class import per_class

    # classes 0, 1 old, 2 new; clusters 7, 8, 9: the match takes 7→0, 8→1, 9→2
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    pred = np.array([7, 7, 7, 9, 8, 8, 7, 9, 9, 8])
    got = per_class(labels, pred, first_new=2)
    assert got.classes["accuracy"].round(4).tolist() == [75.0, round(200 / 3, 4), round(200 / 3, 4)]
    assert got.classes["kind"].tolist() == ["old", "old", "new"] and got.classes["images"].tolist() == [4, 3, 3]
    # old images: 6 of 7 predicted old (0 or 1), 1 new; new images: 2 of 3 new, 1 old
    assert got.confusion.loc["old"].round(4).tolist() == [round(600 / 7, 4), round(100 / 7, 4), 0.0]
    assert got.confusion.loc["new"].round(4).tolist() == [round(100 / 3, 4), round(200 / 3, 4), 0.0]
    # a fourth cluster no class is matched to: its images count as unmatched
    got = per_class(np.array([0, 0, 1]), np.array([5, 6, 7]), first_new=1)
    assert got.confusion.loc["old", "unmatched"] == 50.0

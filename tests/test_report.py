"""Reports: aggregation over seeds, the Tab. 5 layout with direction-aware bolding, and the figures."""
from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest

from bench.report import write_report
from bench.report.aggregate import final_scores, step_curves
from bench.report.plots import method_colour
from bench.report.table import escape_latex, leaderboard, render_table


def frame_of(entries):
    """entries: (label, dataset, split, seed, primary, {(flavour, metric): value}, curve) → long frame."""
    rows = []
    for label, dataset, split, seed, primary, summary, curve in entries:
        base = dict(run_id=f"{label}-{dataset}-{split}-{seed}", method=label.split(" [")[0], preset="paper",
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
    lines = {line.split("|")[1].strip() + "/" + line.split("|")[2].strip(): line for line in md.splitlines()[2:]}
    # 5-step: A best is Baseline++ 84.0 (K-means' 95.0 is a reference: never bold); F best is Baseline++ 5.0.
    assert "**84.0**" in lines["5-step/Baseline++"] and "**5.0**" in lines["5-step/Baseline++"]
    assert "**" not in lines["5-step/Baseline"] and "**" not in lines["5-step/K-means"]
    assert "82.0 ± 2.8" in lines["5-step/Baseline"]
    # 2-step: 88.0 and 88.04 display equally → both bold; F ties at 3.0 → both bold.
    assert lines["2-step/Baseline"].count("**") == 4 and lines["2-step/Baseline++"].count("**") == 4


def test_csv_is_tidy(frame):
    text = render_table(final_scores(frame), "csv")
    assert text.splitlines()[0] == "split,dataset,method,metric,mean,std,n"
    assert "5-step,C10,Baseline,A,82.0000,2.8284,2" in text


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
    doc = tmp_path / "doc.tex"
    doc.write_text("\\documentclass{article}\n\\usepackage{booktabs,multirow}\n\\begin{document}\n"
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
    assert {"table.tex", "radar.png", "radar.pdf", "curve_C10_2-step.pdf"} <= names  # one dataset: one radar
    assert all(p.stat().st_size > 1000 for p in paths if p.suffix in (".png", ".pdf"))


def test_empty_frame_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no finished runs"):
        write_report(pd.DataFrame(), tmp_path, "csv", title="t")


def test_colours_are_fixed_per_method():
    assert method_colour("Baseline") == method_colour("Baseline [code]") != method_colour("Baseline++")
    assert method_colour("MyMethod") == method_colour("MyMethod")


def test_compare_with_the_papers_numbers():
    from bench.report.compare import compare, paper_reference, render_compare

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
    from bench.spec import expand, load_grid

    grid = load_grid("paper")
    assert [b.name for b in grid.blocks] == ["tab5", "tab2", "tab3", "tab4"]
    specs = expand(grid)
    assert len(specs) == len({s.run_id for s in specs}) == 56  # overlapping cells counted once
    tab4 = [s for s in specs if grid.blocks[3].contains(s)]
    assert sorted({s.backbone for s in tab4}) == ["clip-vitb16", "dino-resnet50", "dino-vitb16"]
    assert len(expand(load_grid("full"))) == 168

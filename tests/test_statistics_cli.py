"""`bench report`'s statistics part end to end, through the command line: tiny smoke-grid runs on the pixel
backbone (three methods, two splits, two seeds: two blocks), reported with --posthoc, --correction and
--bootstrap; the files say what was chosen, a refused option lists the valid ones, and a report of one block
refuses the ranks in one line while writing everything else."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from bench.cli import main

TINY = ["features.views=2", "dataset.num_classes=10", "dataset.image_size=8", "dataset.train_per_class=12",
        "dataset.test_per_class=6"]  # 10 classes: 5-step fits


def argv(results: Path, splits: tuple[str, ...] = ("2-step", "5-step")) -> list[str]:
    return ["--grid", "smoke", "--backbone", "pixels", "--methods", "Baseline", "Baseline++", "K-means",
            "--datasets", "synthetic", "--splits", *splits, "--seeds", "0", "1", "--results", str(results),
            "--cfg-options", *TINY]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """12 finished runs (3 methods × 2 splits × 2 seeds), each with its stored predictions."""
    root = tmp_path_factory.mktemp("statistics_cli")
    assert main(["run", "--cluster", "debug", *argv(root)]) == 0
    return root


def test_posthoc_correction_and_bootstrap_reach_the_files(results, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", *argv(results), "--out", str(out), "--format", "markdown", "latex", "csv", "html",
                 "--posthoc", "wilcoxon-holm", "--correction", "bh", "--bootstrap", "50"]) == 0
    md = (out / "stats.md").read_text()
    for metric in ("A ↑", "F ↓"):
        assert f"## Average ranks of {metric}" in md
    assert md.count("Post-hoc: Wilcoxon signed-rank, Benjamini–Hochberg;") == 2 and "Nemenyi" not in md
    assert "over the blocks (50 resamples)" in md
    assert "p-value corrected with Benjamini–Hochberg over the 8 tests of this table" in md  # 2 others × 2 × 2 blocks
    assert "A is recomputed on 50 paired resamples of the test images and seeds" in md
    assert "Rests on 2 blocks (1 dataset(s) × 2 split(s)), 3 methods, 2 seed(s) per value" in md
    assert "Holm" not in md
    csv = pd.read_csv(out / "stats.csv")
    compared = csv[csv["kind"] == "comparison"]
    assert len(compared) == 8 and compared.loc[compared["metric"] == "A", "images"].eq(60).all()  # 10 classes × 6
    assert compared.loc[compared["metric"] == "F", "images"].isna().all()  # F is not bootstrapped
    assert {"cd_A.png", "cd_A.pdf", "cd_F.png", "cd_F.pdf"} <= {p.name for p in out.iterdir()}
    # the tables' daggers follow the same --correction
    assert "corrected with Benjamini–Hochberg over the" in (out / "table.md").read_text()
    assert "corrected with Benjamini--Hochberg over the" in (out / "table.tex").read_text()
    site = (out / "index.html").read_text()
    assert "Wilcoxon signed-rank, Benjamini–Hochberg" in site and "corrected with Benjamini–Hochberg over the" in site
    if shutil.which("pdflatex"):  # stats.tex is a fragment: input into a document beside its diagrams
        for name, packages in (("stats", "booktabs,graphicx"), ("table", "booktabs,multirow,amssymb")):
            doc = out / f"doc_{name}.tex"
            doc.write_text(f"\\documentclass{{article}}\n\\usepackage{{{packages}}}\n\\begin{{document}}\n"
                           f"\\input{{{name}.tex}}\n\\end{{document}}\n")
            ran = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=out,
                                 capture_output=True, text=True, timeout=120)
            assert ran.returncode == 0, ran.stdout[-2000:]
        # as a paper inputs it, from its own folder: the diagrams are found beside stats.tex (were by bare name)
        paper = tmp_path / "paper.tex"
        paper.write_text(f"\\documentclass{{article}}\n\\usepackage{{booktabs,graphicx}}\n\\begin{{document}}\n"
                         f"\\input{{{out.name}/stats.tex}}\n\\end{{document}}\n")
        ran = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", paper.name], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stdout[-2000:]


def test_bootstrap_zero_leaves_out_the_image_bootstrap(results, tmp_path):
    out = tmp_path / "report"
    assert main(["report", *argv(results), "--out", str(out), "--format", "markdown", "csv", "--bootstrap", "0"]) == 0
    md = (out / "stats.md").read_text()
    assert "Image bootstrap off (--bootstrap 0)." in md and "paired resamples of the test images" not in md
    assert "Post-hoc: Nemenyi; critical difference" in md  # the defaults: Nemenyi, Holm
    assert "p-value corrected with Holm over the 8 tests of this table" in md
    compared = pd.read_csv(out / "stats.csv").query("kind == 'comparison'")
    assert len(compared) == 8
    assert compared[["images", "boot_low", "boot_high", "p_better"]].isna().all().all()
    assert "corrected with Holm over the" in (out / "table.md").read_text()


def test_an_unknown_posthoc_or_correction_is_refused_with_the_valid_choices(results, tmp_path, capsys):
    out = tmp_path / "report"
    with pytest.raises(SystemExit) as exited:
        main(["report", *argv(results), "--out", str(out), "--posthoc", "x"])
    assert exited.value.code == 2
    assert "argument --posthoc: invalid choice: 'x' (choose from nemenyi, wilcoxon-holm)" in\
        capsys.readouterr().err.replace("'nemenyi'", "nemenyi").replace("'wilcoxon-holm'", "wilcoxon-holm")
    with pytest.raises(SystemExit):
        main(["report", *argv(results), "--out", str(out), "--correction", "bonferroni"])
    assert "argument --correction: invalid choice: 'bonferroni'" in capsys.readouterr().err
    assert not out.exists()  # refused before anything is written


def test_a_wrong_statistics_option_from_python_is_refused_before_anything_is_written(results, tmp_path):
    from bench.api import report
    from bench.errors import BenchError

    out = tmp_path / "report"
    with pytest.raises(BenchError, match="statistics options: unknown correction 'bonferroni'; choose from holm, bh"):
        report("smoke", methods=["K-means"], datasets=["synthetic"], splits=["2-step"], seeds=[0], backbones=["pixels"],
               results=results, cfg_options=TINY, format="markdown", out=out, statistics={"correction": "bonferroni"})
    assert not out.exists()


def test_one_block_refuses_the_ranks_in_one_line_and_writes_the_rest(results, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", *argv(results, splits=("2-step",)), "--out", str(out), "--format", "markdown",
                 "--bootstrap", "50"]) == 0
    md = (out / "stats.md").read_text()
    assert "## Average ranks" not in md and not list(out.glob("cd_*"))
    refused = [line for line in md.splitlines() if "refused" in line]
    assert refused == [f"- ranks of {m} refused: 1 block(s) (split × dataset) with every method; ranks need at least 2"
                       for m in ("A", "F")]
    # the rest of the statistics part and of the report is still there
    assert "## Paired comparisons, corrected" in md and "over the 4 tests of this table" in md
    assert "A is recomputed on 50 paired resamples" in md
    assert (out / "table.md").exists() and (out / "radar.png").exists() and not (out / "INCOMPLETE").exists()
    assert "stats.md" in capsys.readouterr().out


def test_an_unreadable_predictions_file_is_left_out_in_one_line_and_the_rest_reported(results, tmp_path, capsys):
    """A run's predictions.npz cut short (BadZipFile): the bootstrap, its per-class table and training curves
    leave that run out and a warning says which and why; its metrics and every other run are reported."""
    root = tmp_path / "results"
    shutil.copytree(results / "runs", root / "runs")
    damaged = next(d for d in sorted((root / "runs").iterdir()) if '"Baseline"' in (d / "spec.json").read_text())
    path = damaged / "predictions.npz"
    path.write_bytes(path.read_bytes()[:300])
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["report", *argv(root), "--out", str(out), "--format", "markdown", "csv", "html",
                 "--bootstrap", "20"]) == 0
    printed, err = capsys.readouterr()
    assert "Traceback" not in err
    assert f"bench: warning: run {damaged.name}: cannot read its {path} (BadZipFile" in err
    assert "left out of the image bootstrap" in err and "12/12 runs finished" in printed
    md = (out / "stats.md").read_text()
    assert "image bootstrap leaves out 1 run(s): no readable predictions.npz (BadZipFile)" in md
    assert damaged.name in md and "A is recomputed on 20 paired resamples" in md  # the other runs still are
    table = pd.read_csv(out / "table.csv")
    assert set(table["n"]) == {2}  # the damaged run's metrics are still reported
    assert (out / "runs").is_dir() and not (out / "INCOMPLETE").exists()

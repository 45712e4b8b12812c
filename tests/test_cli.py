"""The command line: listing, running, skipping, reporting and every user error."""
from __future__ import annotations

import shutil

import pytest

from bench.cli import main
from bench.config.grids import load_grid

SMOKE_METHODS = load_grid("smoke").blocks[0].methods
TINY = ["method.epochs=3", "features.views=2", "dataset.num_classes=6", "dataset.image_size=8",
        "dataset.train_per_class=10", "dataset.test_per_class=5"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind, expected", [("methods", "K-means"), ("datasets", "digits"), ("splits", "5-step"),
                                            ("backbones", "timm:<model name>"), ("grids", "smoke")])
def test_list(capsys, kind, expected):
    code, out, _ = run(capsys, "list", kind)
    assert code == 0 and expected in out


# Unknown names, bad options and values, missing data or weights: the catalogue in test_bad_input.py.


def test_run_skip_rerun_and_report(capsys, tmp_path):
    argv = ["run", "--grid", "smoke", "--cluster", "debug", "--results", str(tmp_path), "--cfg-options", *TINY]
    n = len(SMOKE_METHODS)
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert f"{n} done, 0 failed" in out
    assert "| split" in out and "Baseline" in out and "K-means" in out  # the leaderboard

    code, out, _ = run(capsys, *argv)
    assert code == 0 and f"all {n} runs already done, nothing to run" in out

    code, out, _ = run(capsys, *argv, "--dry-run", "--force")
    assert code == 0 and f"{n} would run" in out

    code, out, _ = run(capsys, "report", "--grid", "smoke", "--results", str(tmp_path), "--format", "markdown",
                       "--cfg-options", *TINY)
    assert code == 0
    table = (tmp_path / "reports" / "smoke" / "table.md").read_text()
    assert "Baseline" in table and "K-means" in table
    assert (tmp_path / "reports" / "smoke" / "radar.png").stat().st_size > 0
    assert "K-means" in table and "Joint (frozen)" in table
    assert all(m.split(":")[0] in table for m in SMOKE_METHODS)

    # every table layout renders the smoke grid's results, and compiles where pdflatex is
    from bench.reporting.aggregate import final_scores
    from bench.reporting.load import load_metrics
    from bench.reporting.table import render_table
    from bench.config.grids import LAYOUTS
    from tests.test_report import compile_latex

    scores = final_scores(load_metrics(sorted((tmp_path / "runs").iterdir())))
    for layout in LAYOUTS:
        tex = render_table(scores, "latex", caption="smoke", exclude_from_best=["K-means"], layout=layout)
        assert all(m.split(":")[0] in tex for m in SMOKE_METHODS) or layout in ("ablation", "backbones")
        if shutil.which("pdflatex"):
            (tmp_path / layout).mkdir()
            compile_latex(tex, tmp_path / layout, packages="booktabs,multirow,amssymb")


def test_report_without_runs_says_what_to_do(capsys, tmp_path):
    code, _, err = run(capsys, "report", "--grid", "smoke", "--results", str(tmp_path))
    assert code == 2 and "bench run --grid smoke" in err


def test_local_cluster_runs_in_subprocesses(capsys, tmp_path):
    code, out, _ = run(capsys, "run", "--grid", "smoke", "--cluster", "local", "--results", str(tmp_path),
                       "--cfg-options", *TINY)
    assert code == 0 and f"{len(SMOKE_METHODS)} done, 0 failed" in out
    assert list((tmp_path / "submitit").iterdir())  # it really went through submitit's local executor


def test_offline_hub_weights_fail_fast_with_instructions(capsys, tmp_path, monkeypatch):
    import time

    start = time.monotonic()
    code, out, err = run(capsys, "run", "--grid", "smoke", "--methods", "K-means", "--cluster", "debug",
                         "--backbone", "timm:vit_tiny_patch16_224", "--results", str(tmp_path),
                         "--cfg-options", "backbone.pretrained=True")
    assert code == 1
    assert "could not load pretrained weights for timm model 'vit_tiny_patch16_224' (HF_HUB_OFFLINE is set)" in err
    assert "backbone.pretrained=/path/to/weights (a local file: DINO's .pth, OpenAI CLIP's .pt" in err
    assert "--weights-dir DIR (the paper backbones' published files: dino_vitbase16_pretrain.pth" in err
    assert time.monotonic() - start < 30


def fake_run(results, spec, a, f=5.0):
    """A finished run of `spec` whose final A and F are `a` and `f` (both flavours), written as the runner does."""
    import pandas as pd

    from bench.runs.rundir import run_dir

    out = run_dir(results, spec)
    out.mkdir(parents=True)
    rows = [dict(step=spec.n_steps - 1, group="summary", flavour=fl, metric=m, value=a if m == "A" else f)
            for fl in ("wo", "w") for m in ("A", "F")]
    rows += [dict(step=k, group="all", flavour="wo", metric="acc", value=a) for k in range(spec.n_steps)]
    frame = pd.DataFrame(rows).assign(run_id=spec.run_id, method=spec.method, preset=spec.preset, label=spec.label,
                                      dataset=spec.dataset, split=spec.split, n_steps=spec.n_steps,
                                      backbone=spec.backbone, seed=spec.seed, primary_flavour="wo")
    frame.to_parquet(out / "metrics.parquet")
    (out / "spec.json").write_text(spec.to_json())  # a report reads the run's configuration from it
    (out / "DONE").write_text("")


def test_compare_paper_keeps_backbones_apart(capsys, tmp_path):
    """Tab. 4 runs of one method on several backbones are compared each with its own paper row."""
    import pandas as pd

    from bench.config.grids import expand, load_grid

    specs = [s for s in expand(load_grid("paper"), methods=["Baseline"], datasets=["cifar10"], splits=["5-step"])]
    assert sorted(s.backbone for s in specs) == ["clip-vitb16", "dino-resnet50", "dino-vitb16"]
    for spec, a in zip(sorted(specs, key=lambda s: s.backbone), (70.0, 40.0, 80.0)):
        fake_run(tmp_path, spec, a)
    code, out, err = run(capsys, "report", "--grid", "paper", "--results", str(tmp_path), "--format", "csv",
                         "--compare", "paper")
    assert code == 0, err
    table = pd.read_csv(tmp_path / "reports" / "paper" / "compare_paper.csv")
    a = table[(table["metric"] == "A")].set_index("backbone")
    assert a.loc["dino-resnet50", "mean"] == 40.0 and a.loc["dino-resnet50", "paper"] == 45.8
    assert a.loc["dino-vitb16", "mean"] == 80.0 and a.loc["dino-vitb16", "paper"] == 85.4
    assert a.loc["clip-vitb16", "mean"] == 70.0
    tab4 = pd.read_csv(tmp_path / "reports" / "paper" / "table_tab4.csv")
    a4 = tab4[tab4["metric"] == "A"].set_index("backbone")["mean"]
    assert a4.to_dict() == {"dino-resnet50": 40.0, "dino-vitb16": 80.0, "clip-vitb16": 70.0}  # the paper's row order
    assert set(tab4["method"]) == {"Baseline"}


def test_report_writes_each_block_in_its_papers_layout(capsys, tmp_path):
    """`bench report --grid paper`: table_tab2..5 in the layouts of Tab. 2, 3, 4 and 5."""
    from bench.config.grids import expand, load_grid

    specs = expand(load_grid("paper"), datasets=["cifar10"], splits=["5-step"])
    values = {}
    for i, spec in enumerate(specs):  # a distinct A per run, to find each run's row again
        values[(spec.label, spec.backbone)] = a = 50.0 + i
        fake_run(tmp_path, spec, a)
    code, out, err = run(capsys, "report", "--grid", "paper", "--results", str(tmp_path), "--format", "markdown")
    assert code == 0, err
    folder = tmp_path / "reports" / "paper"
    assert {p.name for p in folder.glob("table*.md")} == {"table.md", "table_tab2.md", "table_tab3.md", "table_tab4.md",
                                                         "table_tab5.md", "table_cassle.md"}
    # the appendix's per-step figures: one per dataset for the whole grid and for each block
    assert {p.name for p in folder.glob("steps*.png")} == {f"steps_{b}cifar10.png" for b in
                                                          ("", "tab5_", "tab2_", "tab3_", "tab4_", "cassle_")}

    def rows(name):
        lines = (folder / name).read_text().strip().splitlines()
        return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]

    tab3 = rows("table_tab3.md")
    assert tab3[0][:4] == ["split", "", "CosNorm", "KTRFR"]
    vit = "dino-vitb16"
    assert [r[1:4] for r in tab3[2:]] == [["(a)", "✓", "✓"], ["(b)", "✓", "✗"], ["(c)", "✗", "✓"], ["(d)", "✗", "✗"]]
    a_of = [r[5].strip("*") for r in tab3[2:]]
    assert a_of == [f"{values[(label, vit)]:.1f}" for label in
                    ("Baseline++", "Baseline", "Baseline++ [no_cosnorm]", "Baseline [no_cosnorm]")]
    tab4 = rows("table_tab4.md")
    assert tab4[0][:2] == ["backbone", "cifar10 F↓"]
    assert [r[0] for r in tab4[2:]] == ["ResNet50-DINO", "ViT-B/16-DINO", "ViT-B/16-CLIP"]
    assert tab4[2][2] == f"{values[('Baseline', 'dino-resnet50')]:.1f}"
    tab2 = rows("table_tab2.md")
    assert [r[1] for r in tab2[2:]] == ["K-means", "Joint (frozen)", "Joint (unfrozen)", "Baseline", "Baseline++"]
    tab5 = rows("table_tab5.md")
    assert tab5[0][:2] == ["split", "method"]
    assert [r[1] for r in tab5[2:]] == ["EwC", "LwF", "DER", "ResTune", "FRoST", "CaSSLe", "Baseline", "Baseline++"]
    assert [r[1] for r in rows("table_cassle.md")[2:]] == ["CaSSLe", "Baseline", "Baseline++"]
    code, _, err = run(capsys, "report", "--grid", "paper", "--results", str(tmp_path), "--format", "latex")
    assert code == 0, err
    tex = (folder / "table_tab3.tex").read_text()
    assert "amssymb" in tex and r"& (d) & $\times$ & $\times$ &" in tex and r"& (a) & \checkmark & \checkmark &" in tex
    assert r"\cmidrule{2-" in (folder / "table_tab2.tex").read_text()


def test_report_takes_several_formats_after_one_format_or_each_after_its_own():
    from bench.cli import build_parser

    parser = build_parser()
    one = parser.parse_args(["report", "--format", "markdown", "latex", "html"]).format
    each = parser.parse_args(["report", "--format", "markdown", "--format", "latex", "--format", "html"]).format
    assert one == each == ["markdown", "latex", "html"]
    assert parser.parse_args(["report"]).format is None  # the default formats (bench.api)
    with pytest.raises(SystemExit):
        parser.parse_args(["report", "--format", "markdown", "pdf"])


def test_report_help_says_what_it_reports_without_a_grid(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: every finished run under the results root" in text and "default: demo" not in text

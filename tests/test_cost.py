"""The cost model (bench/execution/cost.py) and the dry run that prints it: the mixed setting's runs priced by
their own epochs on their protocol's steps, VB-CGCD by its Adam steps, one cost per method in the dry run and in
docs/performance.md alike, and a narrowed grid named as such. The paper's runs: tests/test_packing.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cli import main
from bench.config.grids import Block, Grid, expand
from bench.execution import cost

DOCS = Path(__file__).resolve().parents[1] / "docs" / "performance.md"


def spec_of(method: str, split: str, dataset: str = "cifar100", backbone: str = "dino-vitb16", **options):
    (spec,) = expand(Grid("t", (Block((method,), (dataset,), (split,), (backbone,)),), (0,), {}), options=options)
    return spec


def test_the_mixed_methods_that_train_the_last_block_are_priced_by_their_epochs_on_their_steps():
    """By hand, in block-forward units at 7600 ViT-B/16 forwards (12 units) a second, plus the 60 s floor.
    Happy on happy-5-stage: 20,000 labelled images for 100 epochs, then 5,250 + 5,500 + ... + 6,250 = 28,750 for
    30; two views; the trained block's forward and backward (3), the previous block after the labelled step (1),
    the 11 frozen blocks with live tokens. PromptCCD on promptccd-3-stage: 30,450, 5,950, 6,550, 7,050 images,
    200 epochs a step: 30 through the 11 frozen blocks and the trained one, 170 through its query (12) too."""
    rate = cost.THROUGHPUT * 12
    live = 2 * (100 * 20000 * (11 + 3) + 30 * 28750 * (11 + 3 + 1))
    bank = 2 * (100 * 20000 * 3 + 30 * 28750 * (3 + 1))
    assert cost.run_seconds(spec_of("Happy", "happy-5-stage")) == pytest.approx(60 + live / rate, rel=1e-9)
    assert cost.run_seconds(spec_of("Happy", "happy-5-stage", **{"features.tokens": "bank"})) == pytest.approx(
        60 + bank / rate, rel=1e-9)
    prompt = 2 * sum(30 * n * 14 + 170 * n * 26 for n in (30450, 5950, 6550, 7050))
    assert cost.run_seconds(spec_of("PromptCCD", "promptccd-3-stage")) == pytest.approx(60 + prompt / rate, rel=1e-9)
    assert 1.4 < (60 + prompt / rate) / 3600 < 1.6  # was priced at 0.199 GPU-h: an even cut and 200 epochs of one block
    simgcd = 2 * (100 * 20000 + 30 * 28750) * (11 + 3)
    assert cost.run_seconds(spec_of("SimGCD (continual)", "happy-5-stage")) == pytest.approx(60 + simgcd / rate,
                                                                                          rel=1e-9)


def test_vb_cgcd_is_priced_by_its_adam_steps_beyond_the_floor():
    """1000 Adam steps for the labelled step's fit, then two fits a step: 11 fits on happy-5-stage (6 steps),
    7 on promptccd-3-stage (4), at the measured seconds a step; the other methods on features at the floor."""
    assert cost.run_seconds(spec_of("VB-CGCD", "happy-5-stage", "digits", "pixels")) == pytest.approx(
        cost.FLOOR_S + 11 * 1000 * cost.ADAM_STEP_S, rel=1e-9)
    fewer = spec_of("VB-CGCD", "promptccd-3-stage", "digits", "pixels", **{"method.svi_iters": 200})
    assert cost.run_seconds(fewer) == pytest.approx(cost.FLOOR_S + 7 * 200 * cost.ADAM_STEP_S, rel=1e-9)
    assert cost.run_seconds(spec_of("Gaussian per class", "happy-5-stage", "digits", "pixels")) == cost.FLOOR_S


def test_the_docs_table_of_costs_is_the_cost_models():
    """docs/performance.md's table of what a run costs, cell by cell, is what the cost model (and so the dry
    run) gives those runs."""
    from bench.execution.plan import duration

    text = DOCS.read_text()
    section = text[text.index("### What the cost model prices a run at"):text.index("## VB-CGCD's fit")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| method")]
    assert {r[0] for r in rows} >= {"K-means", "VB-CGCD", "SimGCD (continual)", "Happy", "PromptCCD"}
    for method, split, bank, live in rows:
        priced = [cost.priced(method, "cifar100", split, options={"features.tokens": t}) for t in ("bank", "live")]
        assert [bank, live] == [duration(p) for p in priced if p is not None], method


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_dry_run_prices_each_method_and_names_a_narrowed_grid_as_such(capsys, tmp_path):
    code, out, _ = run(capsys, "run", "--grid", "cgcd-demo", "--methods", "vb-cgcd", "k-means", "--seeds", "0",
                       "--dry-run", "--results", str(tmp_path))
    assert code == 0
    assert out.startswith("grid cgcd-demo, narrowed by --methods --seeds: 8 runs, 0 done, 8 would run")
    vb = 60 + 1000 * cost.ADAM_STEP_S * 7, 60 + 1000 * cost.ADAM_STEP_S * 11  # promptccd-3-stage, happy-5-stage
    lines = out.splitlines()
    at = lines.index("  per method, by the cost model:")
    assert lines[at + 1] == "    K-means     4 run(s), 60 s a run, est. 0.07 GPU-h"
    assert lines[at + 2] == (f"    VB-CGCD     4 run(s), {vb[0]:.0f} s to {vb[1]:.0f} s a run, "
                             f"est. {2 * sum(vb) / 3600:.2f} GPU-h")
    code, out, _ = run(capsys, "run", "--grid", "cgcd-demo", "--dry-run", "--results", str(tmp_path))
    assert code == 0 and re.match(r"grid cgcd-demo: 84 runs, 0 done, 84 would run", out)
    code, out, _ = run(capsys, "run", "--grid", "demo", "--backbone", "pixels", "--cfg-options", "method.epochs=2",
                       "--dry-run", "--results", str(tmp_path))
    assert code == 0 and out.startswith("grid demo, narrowed by --backbone, with --cfg-options: ")


def test_metagcd_is_priced_by_its_offline_and_meta_training_epochs():
    # on the bank: 3 units an image-view. Labelled 1,200 images, 4 sessions, 3/4 pseudo-old with 1/3 held, 2/3 of
    # each pseudo-novel class a session, cumulative: a meta-task's sessions hold 1200·(1/4·2/3·5/2 + 3/4·1/3) = 800
    c = dict(offline_epochs=2, meta_tasks=3, inner_epochs=5, epochs=7, pseudo_sessions=4, pseudo_old_ratio=0.75,
             pseudo_old_held=1 / 3, pseudo_novel_share=2 / 3)
    got = cost.mixed_units("MetaGCD", [1200, 100, 100], c, "bank")
    assert got == pytest.approx(2 * 3 * (2 * 1200 + 3 * 5 * 800 + 7 * 200), rel=1e-12)

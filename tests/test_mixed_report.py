"""The report of the mixed setting, as a newcomer reads it: docs/settings.md's `--cfg-options` recipe on the
`cgcd-smoke` grid (tiny generated images, a tiny random ViT) with `setting.selection=last setting.evaluation=inductive`.
Each block is named from what its runs ran and every file's header says the overrides (bench/reporting/files.py); the
tables, the leaderboards and the site say what A and F are in the mixed setting, what the rank column averages, and
where the peers' published tables are (bench/reporting/table.py, bench/reporting/site/)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cli import main
from bench.config.grids import expand, load_grid, members

OVERRIDES = {"setting.selection": "last", "setting.evaluation": "inductive"}
RECIPE = [f"{key}={value}" for key, value in OVERRIDES.items()]
# two frozen-feature methods that run fast on the grid's random ViT: NCM + k-means is the grid's, K-means is not (a
# method outside the grid runs in each of its blocks)
SELECTION = ["--grid", "cgcd-smoke", "--methods", "NCM + k-means", "K-means", "--cfg-options", *RECIPE]


@pytest.mark.parametrize("options, expected", [
    ({}, ["last epoch", "Happy's selection", "PromptCCD's protocol"]),
    (OVERRIDES, ["last epoch", "Happy's selection (overridden: setting.selection=last)",
                 "PromptCCD's protocol (overridden: setting.selection=last, setting.evaluation=inductive)"]),
    ({"setting.selection": "val"}, ["last epoch (overridden: setting.selection=val)",
                                    "Happy's selection (overridden: setting.selection=val)",
                                    "PromptCCD's protocol (overridden: setting.selection=val)"]),
    ({"method.epochs": 3}, ["last epoch", "Happy's selection", "PromptCCD's protocol"]),  # defines no block
])
def test_a_block_is_named_from_what_its_runs_ran(options, expected):
    from bench.reporting.files import block_title

    grid = load_grid("cgcd-smoke")
    specs = expand(grid, options=options)
    assert [block_title(grid, block, members(grid, block, specs, options)) for block in grid.blocks] == expected


def test_a_block_that_relies_on_a_default_is_overridden_too():
    from bench.reporting.files import block_title

    grid = load_grid("cgcd-demo")  # "K known" sets no cfg: K known is the setting's default
    options = {"setting.k": "silhouette"}
    specs = expand(grid, options=options)
    assert [block_title(grid, b, members(grid, b, specs, options)) for b in grid.blocks] ==\
        ["K known (overridden: setting.k=silhouette)", "K estimated"]
    specs = expand(grid)
    assert [block_title(grid, b, members(grid, b, specs)) for b in grid.blocks] == ["K known", "K estimated"]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The recipe's report (markdown, LaTeX, csv and the site) of 4 runs: 2 methods × the grid's 2 splits."""
    results = tmp_path_factory.mktemp("mixed_report")
    assert main(["run", "--cluster", "debug", *SELECTION, "--results", str(results)]) == 0
    out = results / "report"
    assert main(["report", *SELECTION, "--results", str(results), "--out", str(out), "--format", "markdown",
                 "latex", "csv", "html", "--bootstrap", "100"]) == 0
    return out


def test_the_blocks_files_are_named_from_what_their_runs_ran(report):
    names = {p.name for p in report.glob("table_*.md")}
    # were table_Happy-s-selection.md and table_PromptCCD-s-protocol.md, holding last-epoch inductive runs
    assert names == {"table_last-epoch.md", "table_Happy-s-selection-overridden-setting-selection-last.md",
                     "table_PromptCCD-s-protocol-overridden-setting-selection-last-setting-evaluation-inductive.md"}
    happy = (report / "table_Happy-s-selection-overridden-setting-selection-last.md").read_text()
    assert "Happy's selection (overridden: setting.selection=last)" in happy and "selected as Happy" not in happy
    tex = (report / "table_Happy-s-selection-overridden-setting-selection-last.tex").read_text()
    assert r"Happy's selection (overridden: setting.selection=last)" in tex
    assert {p.name for p in report.glob("steps_*.png")} == {f"steps_{name}synthetic.png" for name in (
        "", "last-epoch_", "Happy-s-selection-overridden-setting-selection-last_",
        "PromptCCD-s-protocol-overridden-setting-selection-last-setting-evaluation-inductive_")}
    site = (report / "index.html").read_text()
    assert "table_Happy-s-selection-overridden-setting-selection-last (comparison layout)" in site


def test_every_files_header_says_the_overrides(report):
    said = "grid cgcd-smoke with --cfg-options setting.selection=last setting.evaluation=inductive"
    for name in ("table.md", "cgcd.md", "table_last-epoch.md"):
        assert (report / name).read_text().splitlines()[0].startswith(f"Table: {said}"), name
    assert (report / "stats.md").read_text().splitlines()[0] == f"# Statistics: {said}"
    assert r"\caption{grid cgcd-smoke with -{}-cfg-options setting.selection=last setting.evaluation=inductive" in\
        (report / "table.tex").read_text()
    for name in ("cgcd.tex", "stats.tex"):
        assert (report / name).read_text().splitlines()[0].startswith(f"% {said}"), name
    assert f"<h1>{said}</h1>" in (report / "index.html").read_text()
    assert (report / "table.csv").read_text().startswith("split,")  # tidy data: no preamble


def test_the_mixed_settings_tables_say_what_a_and_f_are(report):
    note = (report / "table.md").read_text().split("\n\n")[-1]
    # was "A and F task-agnostic (W/O), except K-means: A cgcd; F cgcd, NCM + k-means: A cgcd; F cgcd"
    assert "task-agnostic" not in note and "A cgcd" not in note
    assert "Mixed setting (continual category discovery): A is All" in note
    site = (report / "index.html").read_text()
    leaderboard = site[site.index('<section id="leaderboards">'):site.index("</section>")]
    assert "cgcd · cgcd" not in leaderboard and leaderboard.count("mixed setting: A = All, F = labelled classes") == 4
    # the rank column is one average over every block: its title and a note say so
    assert "avg rank of A over 2 blocks (95% CI)" in leaderboard
    assert "not its rank within the row&#x27;s split" in leaderboard or "not its rank within the row's split" in leaderboard


def test_the_sites_paper_comparison_points_to_the_peers_tables(report):
    site = (report / "index.html").read_text()
    section = site[site.index('<section id="comparison">'):]
    section = section[:section.index("</section>")]
    assert "nothing to compare" not in section
    assert all(f"<code>--compare {peer}</code>" in section for peer in ("happy", "promptccd", "vb-cgcd"))


def test_the_mixed_cells_paired_comparisons_have_their_image_bootstrap(report):
    stats = (report / "stats.md").read_text()
    assert "mixed setting: its steps are not bootstrapped" not in stats
    rows = [line for line in stats.splitlines() if re.match(r"\| .*\| A +\|", line)]
    assert len(rows) == 2  # one comparison of A per split
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        images, interval, better = cells[-3:]
        assert images.isdigit() and "…" in interval and better != "--", row

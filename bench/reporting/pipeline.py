"""`bench report` from end to end, behind one entry point, `write_reports(selected, options)`: the finished runs
of a selection to the files of their report (tables, figures, statistics, comparisons, the html site), in order:
load → label → tables → blocks → statistics → comparisons → site. `results_of` gives the report's cells as
pandas objects and writes nothing (`bench.results`). `bench.report` and `bench report` are these behind their
options.

Which runs a selection means (`Selected`) is the execution layer's question (`bench.execution.selection
.runs_to_report`), asked by the caller. Importing this module imports nothing heavy: each step imports what it
needs (`bench.reporting.site` at call time, so that a benchmark may replace its `write_site`).
"""
from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from bench.config.selection import PathLike, Selected, flag_of, path_of
from bench.core.provenance import VERSION_COLUMNS
from bench.core.storage import shortened, unwritable, usable_path
from bench.errors import BenchError, disk_full, unknown
from bench.reporting.outcomes import reference_labels, warn_mixed_versions

REPORT_FORMATS = {"latex": "tex", "markdown": "md", "csv": "csv", "html": "html"}  # format -> file suffix
DEFAULT_REPORT_FORMATS = ("latex", "html")  # the LaTeX tables and, beside them, the site (index.html)


@dataclass(frozen=True)
class ReportOptions:
    """What `bench report` writes of a selection, checked when made (a `BenchError` names a wrong value before
    anything is read): `formats` (latex, markdown, csv, html), `out` (default `<results>/reports/<grid>`),
    `pool_orders`, `by` (a version column), `compare` (["paper"], a mixed-setting peer's tables: one name alone, or two
    methods: names, slugs or labels, `bench.reporting.compare.compare_request`) and `statistics`
    (`bench.reporting.statistics.Options`, its fields by name, or None for the defaults)."""

    formats: str | Sequence[str] = DEFAULT_REPORT_FORMATS  # None, from the API, is taken as the default
    out: PathLike | None = None
    pool_orders: bool = False
    by: str | None = None
    compare: str | Sequence[str] | None = None
    statistics: Any = None
    peer: str | None = field(init=False, default=None)  # `compare` naming a mixed-setting peer (its tables)
    methods: tuple[Any, ...] = field(init=False, default=())  # `compare` naming two methods (`compare.Named`)

    def __post_init__(self) -> None:
        from bench.reporting.compare import compare_request
        from bench.reporting.stats_files import statistics_options

        given = DEFAULT_REPORT_FORMATS if self.formats is None else self.formats
        if isinstance(given, str):
            formats: tuple[str, ...] = (given,)
        elif isinstance(given, (list, tuple)) and all(isinstance(f, str) for f in given):
            formats = tuple(dict.fromkeys(given))
        else:
            raise BenchError(f"bad format={given!r}: a format or a list of them, from {', '.join(REPORT_FORMATS)}")
        for fmt in formats:
            if fmt not in REPORT_FORMATS:
                raise unknown("report format", fmt, REPORT_FORMATS)
        if not formats:
            raise BenchError(f"no report format given; choose from {', '.join(REPORT_FORMATS)}")
        if self.by is not None and not isinstance(self.by, str):
            raise BenchError(f"bad by={self.by!r}: a version column, from {', '.join(VERSION_COLUMNS)}")
        if self.by is not None and self.by not in VERSION_COLUMNS:
            raise unknown("version column", self.by, VERSION_COLUMNS)
        compare = (self.compare,) if isinstance(self.compare, str) else self.compare
        if compare is not None and not (isinstance(compare, (list, tuple)) and all(isinstance(c, str) for c in compare)):
            raise BenchError(f"bad compare={self.compare!r}: a list of names (paper, a peer, or two methods)")
        compare = None if compare is None else tuple(compare)
        peer, methods = compare_request(compare)
        if compare is not None and len(compare) == 1 and compare[0].lower() == "paper":
            compare = ("paper",)
        # a frozen dataclass: the normalized values are set once, here
        object.__setattr__(self, "formats", formats)
        object.__setattr__(self, "out", path_of(self.out, "out") if self.out else None)
        flag_of(self.pool_orders, "pool_orders")
        object.__setattr__(self, "statistics", statistics_options(self.statistics))
        object.__setattr__(self, "compare", compare)
        object.__setattr__(self, "peer", peer)
        object.__setattr__(self, "methods", methods)


@dataclass(frozen=True)
class ReportOutcome:
    """What `bench.report` wrote: the files (tables, plots, comparisons) in `out`, and the metrics frame
    (one row per run, step and metric) they were made from."""

    grid: str
    out: Path
    paths: tuple[Path, ...]
    frame: Any = field(repr=False)


@dataclass(frozen=True)
class Results:
    """`bench.results`'s answer: `leaderboard`, a row per (split, dataset, method label, metric) with `mean`, `std`,
    seeds `n`, `ci95` and `source` (`bench report`'s table cells as data); `runs`, every metric row of every finished
    run (each step, group, flavour and metric, with the run's identity and provenance columns)."""

    leaderboard: Any = field(repr=False)
    runs: Any = field(repr=False)


def write_reports(selected: Selected, options: ReportOptions) -> ReportOutcome:
    """The report of the selected runs, as `options` say; a BenchError, before anything is written, when none has
    finished or `out` cannot be written. The folder holds an INCOMPLETE note until its last file is written."""
    from bench.config.grids import members
    from bench.core.storage import write_atomic
    from bench.reporting.aggregate import final_scores, split_by
    from bench.reporting.compare import paired_labels
    from bench.reporting.files import INCOMPLETE, block_reports, report_title, row_order, write_figures, write_report
    from bench.reporting.stats_files import report_statistics

    from bench.reporting.load import warn_unreadable_predictions

    frame, unplaced = load_finished(selected, options.pool_orders)
    grid, specs, selection = selected.grid, selected.specs, selected.selection
    out = Path(options.out) if options.out is not None else selection.results / "reports" / grid.name
    labelled = _labelled(frame, selected)
    # pool_orders: load_runs made each (class order, seed) one sample of the cell, as mammoth and PyCIL
    # average orders, before it told configurations apart
    labels = row_order(labelled, specs)
    if options.by:  # each label's rows by version, next to each other in the labels' order
        labelled = split_by(labelled, options.by, VERSION_COLUMNS)
        labels = [split for label in labels for split in sorted(set(labelled["label"]))
                  if split.startswith(f"{label} · {options.by}=")]
    # what `--compare A B` names is settled before anything is written: a refusal leaves no folder behind
    paired = paired_labels(labelled, options.methods) if options.methods else None
    check_report_dir(out)
    warn_unreadable_predictions(selected.directories, frame["run_id"].astype(str).unique())
    write_atomic(out / INCOMPLETE, "bench report was stopped while writing this folder: some files are of this "
                 "report, others of an earlier one or missing; run `bench report` again\n")
    warn_mixed_versions(labelled)
    order = _order(specs, labels)
    references = reference_labels(labelled)
    texts = [fmt for fmt in options.formats if fmt != "html"]
    correction = options.statistics.correction
    title = report_title(grid.name, selection.cfg_options)  # every file's header: the grid and its --cfg-options
    paths: list[Path] = []
    for i, fmt in enumerate(texts):  # the figures once, with the first format's table
        paths += write_report(labelled, out, fmt, title=title, order=order,
                              exclude_from_best=references, figures=i == 0, correction=correction)
    if not texts:
        paths += write_figures(labelled, out, order)
    site_tables = [("table (Tab. 5 layout, every run)", "comparison", final_scores(labelled, order))]
    blocks = [(block, members(grid, block, specs, selection.cfg_options, selection.axes))
              for block in (grid.blocks if len(grid.blocks) > 1 else ())]
    written, tables = block_reports(labelled, out, texts, title, blocks, order, references, correction, grid=grid)
    stats, statistics_files = report_statistics(labelled, order, out, texts, selected.directories, options.statistics,
                                                title=title)
    paths, site_tables = paths + written + statistics_files, site_tables + tables
    comparison, paired_table, compared = _comparisons(frame, labelled, order, out, texts, options, paired)
    paths += compared
    if "html" in options.formats:
        from bench.reporting.aggregate import backbone_label
        from bench.reporting.site import write_site

        spec_of, shown = {s.run_id: s for s in specs}, selection.shown_backbone(grid)
        paths += write_site(labelled, out, title=title,
                            runs=[(d, spec_of.get(d.name)) for d in selected.directories],
                            unplaced={u.run: u.why for u in unplaced},
                            label_of_spec=lambda s: backbone_label(s.label, s.backbone, shown), order=order,
                            references=references, tables=site_tables, comparison=comparison, paired=paired_table,
                            figures=paths, files=paths, statistics=stats)
    (out / INCOMPLETE).unlink(missing_ok=True)  # every file written: the folder is this report
    _say(grid.name, frame, unplaced, selected.directories, out, paths)
    return ReportOutcome(grid.name, out, tuple(paths), labelled)


def results_of(selected: Selected) -> Results:
    """The selected finished runs as pandas objects, aggregated over seeds as `write_reports` does; writes nothing."""
    from bench.reporting.aggregate import final_scores
    from bench.reporting.files import row_order

    frame, _ = load_finished(selected, pool_orders=False)
    labelled = _labelled(frame, selected)
    return Results(final_scores(labelled, _order(selected.specs, row_order(labelled, selected.specs))), labelled)


def load_finished(selected: Selected, pool_orders: bool) -> tuple[Any, list[Any]]:
    """The metrics of the selection's finished runs, with the runs no table row could place; a BenchError when
    none has finished."""
    from bench.reporting.load import load_runs

    frame, unplaced = load_runs(list(selected.directories), pool_orders=pool_orders)
    if not len(frame):
        results, name = selected.selection.results, selected.grid.name
        if not selected.selection.grid:
            raise BenchError(f"no finished runs under {results} match the selection; `bench run` makes some")
        raise BenchError(f"no finished runs of grid {name!r} under {results}; run `bench run --grid {name}` first")
    return frame, unplaced


def check_report_dir(out: Path) -> None:
    """One line, before anything is computed, when the report cannot be written to `out` (a read-only
    mount, a file of that name, a file where a parent directory should be)."""
    err = unwritable(usable_path(Path(out), "--out"))
    if err is None or disk_full(err):  # a full disk: the writes say so in their own line, naming the file
        return
    why = {errno.EEXIST: "a file of that name exists", errno.ENOTDIR: "a part of the path is a file"}.get(
        err.errno or 0, err.strerror or str(err))
    raise BenchError(f"cannot write the report to {shortened(out)} ({why}); choose another directory with --out DIR")


def _labelled(frame: Any, selected: Selected) -> Any:
    """The frame with each run of another backbone than the shown one labelled with it: a row of its own."""
    from bench.reporting.aggregate import backbone_label

    shown = selected.selection.shown_backbone(selected.grid)
    return frame.assign(label=[backbone_label(l, b, shown) for l, b in zip(frame["label"], frame["backbone"])])


def _order(specs: Sequence[Any], labels: list[str]) -> dict[str, list[str]]:
    """The tables' order of splits, datasets (as the selection names them) and row labels."""
    return {"split": list(dict.fromkeys(s.split_label for s in specs)),
            "dataset": list(dict.fromkeys(s.dataset for s in specs)), "label": labels}


def _comparisons(frame: Any, labelled: Any, order: dict[str, list[str]], out: Path, texts: list[str],
                 options: ReportOptions, pair: tuple[str, str] | None) -> tuple[Any, Any, list[Path]]:
    """`--compare`'s files (a peer's tables, two methods' paired difference (`pair`: their labels), or the paper's
    numbers beside the measured ones) and what the site shows of them: (the comparison with the paper, the paired
    table, files)."""
    from bench.core.storage import write_atomic
    from bench.reporting.aggregate import final_scores
    from bench.reporting.compare import (compare as compare_with, compare_methods, paired_table, paper_reference,
                                         render_compare)
    from bench.reporting.peers import write_peer_compare

    compare, html, paths = list(options.compare or ()), "html" in options.formats, []
    paired = None
    if options.peer:
        paths += write_peer_compare(options.peer, frame, texts, out, REPORT_FORMATS)
    elif pair:
        for fmt in texts:
            paths.append(compare_methods(labelled, pair, out, REPORT_FORMATS[fmt]))
        if html:
            paired = (list(pair), paired_table(labelled, pair))
    comparison = None
    if compare == ["paper"] or html:  # the site always shows the reproduction rows
        # score the relabelled frame, so that runs of different backbones are never averaged together,
        # then give the rows their method label back: the backbone is a column of its own
        scores = final_scores(labelled, order)
        scores["label"] = scores["label"].astype(str).str.split(" · ").str[0]
        comparison = compare_with(scores, paper_reference(default_backbone="dino-vitb16"))
    if compare == ["paper"]:
        for fmt in texts:
            path = out / f"compare_paper.{REPORT_FORMATS[fmt]}"
            write_atomic(path, render_compare(comparison, fmt))
            paths.append(path)
    return comparison, paired, paths


def _say(grid: str, frame: Any, unplaced: Sequence[Any], directories: Sequence[Path], out: Path,
         paths: Sequence[Path]) -> None:
    """The report's last lines: how many runs it holds, and every file it wrote."""
    n_finished = frame["run_id"].nunique() + len(unplaced)
    left_out = (f", {len(unplaced)} of them in no row ({', '.join(u.run for u in unplaced)}: see the warnings above)"
                if unplaced else "")
    print(f"report of grid {grid}: {n_finished}/{len(directories)} runs finished{left_out}; "
          f"wrote {len(paths)} files to {out}")
    for path in paths:
        print(f"  {path}" + (f"  (the site: open it in a browser; one page per run under {out / 'runs'})"
                             if path.name == "index.html" else ""))

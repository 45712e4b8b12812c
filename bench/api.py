"""bench's Python API: `bench.run(...)` and `bench.report(...)` do what `bench run` and `bench report` do,
with the same checks before anything runs (`bench.execution.preflight`), the same progress lines on stdout and
the same `BenchError` for bad input; the commands are these functions behind an argument parser.

    import bench
    outcome = bench.run(grid="smoke", methods=["baseline", "k-means"], cluster="debug", results="out")
    written = bench.report(grid="smoke", results="out", format="markdown")

Importing this module imports nothing heavy: each call imports what it needs.

Imports from: bench.errors, bench.core, bench.registries, bench.data, bench.config, bench.features, bench.runs,
bench.protocol, bench.reporting, bench.execution.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from bench.errors import BenchError, unknown
from bench.reporting.outcomes import (error_line, print_leaderboard, reference_labels, report_failures, run_dirs,
                            warn_mixed_versions)
from bench.execution import plan
from bench.execution.preflight import (check_caches, check_cluster, check_device, check_inputs, check_pack, check_report_dir,
                                       check_splits, check_tail_backbones, check_timm_models, local_slots)
from bench.core.provenance import VERSION_COLUMNS
from bench.execution.selection import (default_backbone, expand_selection, finished_selection, names_of,
                                       options_of, path_of, seeds_of)

DEFAULT_RESULTS = Path("results")
REPORT_FORMATS = {"latex": "tex", "markdown": "md", "csv": "csv", "html": "html"}  # format -> file suffix
DEFAULT_REPORT_FORMATS = ("latex", "html")  # the LaTeX tables and, beside them, the site (index.html)
PathLike = str | os.PathLike[str]
Options = Mapping[str, Any] | Sequence[str]  # {"method.epochs": 3} or ["method.epochs=3"], as on the command line


@dataclass(frozen=True)
class RunOutcome:
    """What `bench.run` did. `exit_code` is the command's exit status: 0 when every run it started
    finished (or, with `dry_run` or SLURM without `wait`, when everything was planned or submitted)."""

    grid: str
    results: Path
    specs: tuple[Any, ...]  # every selected run (RunSpec)
    already_done: tuple[Any, ...]  # done before this call
    pending: tuple[Any, ...]  # what ran, was submitted, or would run (dry_run)
    done: tuple[Any, ...] = ()  # finished by this call (local clusters, or SLURM with wait)
    failed: tuple[tuple[Any, str], ...] = ()  # (spec, first line of its error)
    busy: tuple[Any, ...] = ()  # skipped: being run elsewhere
    jobs: tuple[tuple[str, int, str], ...] = ()  # SLURM: (job id, runs, resources) of each job array
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def finished(self) -> tuple[Any, ...]:
        """Every selected run that is finished now: done before this call, or by it (`done` alone is empty when
        everything was done already)."""
        return self.already_done + self.done


@dataclass(frozen=True)
class ReportOutcome:
    """What `bench.report` wrote: the files (tables, plots, comparisons) in `out`, and the metrics frame
    (one row per run, step and metric) they were made from."""

    grid: str
    out: Path
    paths: tuple[Path, ...]
    frame: Any = field(repr=False)


def _use_plugins(include: Sequence[PathLike] | None) -> None:
    """Plugin folders given to the API, as `--include` gives them to a command (`bench.registries.plugins`)."""
    if include is not None:
        from bench.registries.plugins import activate

        activate(include)


def run(grid: str = "demo", *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
        splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
        backbones: Sequence[str] | None = None, results: PathLike = DEFAULT_RESULTS, data_root: PathLike | None = None,
        cache_dir: PathLike | None = None, cfg_options: Options | None = None, cluster: str = "local",
        workers: int | None = None, device: str | None = None, threads: int | None = None,
        read_ahead: bool | None = None, weights_dir: PathLike | None = None, force: bool = False,
        retry_failed: bool = False, dry_run: bool = False, profile: str = "default",
        slurm_options: Options | None = None, wait: bool = False, include: Sequence[PathLike] | None = None,
        gpus: Sequence[str] | None = None, runs_per_gpu: int = 1, pack: int | str | None = None,
        pack_hours: float = 4.0, trackers: Sequence[str] | None = None) -> RunOutcome:
    """Run a grid, as `bench run` does: the selection's runs not yet done, on `cluster` (local worker
    processes, one per GPU slot where there are GPUs (`gpus`, each `runs_per_gpu` times), debug in this process,
    or SLURM job arrays with `profile`, `pack`ed N or "auto" runs per task). Every check (names, splits,
    devices, backbones, data and weight files, cache space) is made before anything is written.
    `include`: plugin folders, as `--include` (with $BENCH_INCLUDE's; None: those already in use). `trackers`: where
    each run also sends its losses and metrics, as `--tracker` (`bench.runs.trackers`), besides the grid's."""
    started = time.monotonic()  # the SLURM plan's time includes expanding the grid
    methods, datasets, splits, backbones = (names_of(methods, "methods"), names_of(datasets, "datasets"),
                                            names_of(splits, "splits"), names_of(backbones, "backbones"))
    seeds, results = seeds_of(seeds), path_of(results, "results")
    _use_plugins(include)
    from bench.runs.rundir import DONE, ERROR, check_writable, invalidate, is_done, run_dir, unreadable

    check_cluster(cluster, workers, threads)
    check_device(device, cluster)
    slots = local_slots(cluster, gpus, runs_per_gpu, device, workers)
    pack = check_pack(cluster, pack, pack_hours)
    loaded, specs = expand_selection(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                                     backbones=backbones, cfg_options=options_of(cfg_options), data_root=data_root,
                                     cache_dir=cache_dir, device=device, read_ahead=read_ahead, threads=threads,
                                     weights_dir=weights_dir, trackers=names_of(trackers, "trackers") or [])
    check_splits(specs)
    check_tail_backbones(specs)
    check_timm_models(specs)
    done = [s for s in specs if is_done(results, s)]
    for spec in specs if not dry_run else ():
        out = run_dir(results, spec)
        if spec not in done and (out / DONE).exists() and _rebuild_metrics(out):
            done.append(spec)
    finished = {s.run_id for s in done}
    for spec in specs:
        out = run_dir(results, spec)
        if spec.run_id not in finished and (out / DONE).exists():  # marked done, but cannot be read back
            bad = "; ".join(f"{out / name}: {why}" for name, why in unreadable(out).items())
            print(f"bench: warning: run {spec.run_id} ({spec.describe()}) is marked done but cannot be read back "
                  f"({bad}); it runs again, its damaged files kept aside in the run directory", file=sys.stderr)
    if force:
        pending = specs
    elif retry_failed:
        pending = [s for s in specs if s.run_id not in finished and (run_dir(results, s) / ERROR).exists()]
    else:
        pending = [s for s in specs if s.run_id not in finished]
    if not dry_run:
        check_inputs(pending)
        check_caches(results, pending)
    outcome = RunOutcome(loaded.name, results, tuple(specs), tuple(done), tuple(pending))
    shown_backbone = default_backbone(backbones, loaded)
    if cluster == "slurm":
        return _run_slurm(outcome, loaded, profile, slurm_options, force=force, dry_run=dry_run, wait=wait,
                          started=started, shown_backbone=shown_backbone, pack=pack, pack_hours=pack_hours)
    if dry_run:
        plan.print_local(loaded.name, specs, done, pending, workers, slots)
        return outcome
    check_writable(results)
    if not pending:
        what = "no failed runs to retry" if retry_failed else "nothing to run (--force re-runs them)"
        print(f"grid {loaded.name}: {len(done)} of {len(specs)} runs already done, {what}"
              if len(done) < len(specs) else f"grid {loaded.name}: all {len(specs)} runs already done, {what}")
        print_leaderboard(results, specs, shown_backbone)
        return outcome
    for spec in pending if force else ():
        invalidate(results, spec)
    print(f"grid {loaded.name}: {len(specs)} runs, {len(specs) - len(pending)} already done, "
          f"running {len(pending)} on {cluster}")
    start = time.monotonic()
    from bench.execution.scheduler import run_specs
    from bench.execution.workers import sigterm_stops

    with sigterm_stops():  # a closed session's or `timeout`'s SIGTERM stops the runs as Ctrl-C does
        ran = run_specs(pending, results, cluster=cluster, max_parallel=workers, gpus=slots)
    busy = f", {len(ran.busy)} skipped (being run elsewhere)" if ran.busy else ""
    print(f"{len(ran.done)} done, {len(ran.failed)} failed{busy} in {time.monotonic() - start:.1f}s")
    print_leaderboard(results, specs, shown_backbone)
    return replace(outcome, done=tuple(ran.done), failed=tuple(ran.failed), busy=tuple(ran.busy),
                   exit_code=report_failures(results, ran.failed))


def _rebuild_metrics(out: Path) -> bool:
    """A finished run whose metrics.parquet alone is unreadable gets it back from its stored
    predictions, here and now (seconds on the CPU), instead of running again (GPU-hours)."""
    from bench.runs.predictions import PREDICTIONS
    from bench.runs.rundir import METRICS, RunBusy, unreadable

    if set(unreadable(out)) != {METRICS} or not (out / PREDICTIONS).exists():
        return False  # nothing to rebuild from: no torch imported for it
    from bench.protocol.recompute import rebuild_metrics

    try:
        why = rebuild_metrics(out)
    except RunBusy:
        return False
    if why is not None:
        print(f"bench: warning: run {out.name}: {out / METRICS} could not be read ({why}); rebuilt from its "
              f"{PREDICTIONS} without running again, the damaged file kept aside in the run directory", file=sys.stderr)
    return why is not None


def _run_slurm(outcome: RunOutcome, grid: Any, profile_name: str, slurm_options: Options | None, *, force: bool,
               dry_run: bool, wait: bool, started: float, shown_backbone: str, pack: int | str | None,
               pack_hours: float) -> RunOutcome:
    from bench.execution import slurm
    from bench.runs.rundir import check_writable, invalidate

    results, specs, pending = outcome.results, list(outcome.specs), list(outcome.pending)
    profile = slurm.load_profile(profile_name)
    overrides = options_of(slurm_options)
    chunks = slurm.plan(pending, profile, overrides, pack=pack, pack_hours=pack_hours)
    if dry_run:
        plan.print_slurm(grid.name, specs, pending, chunks, profile, time.monotonic() - started, pack, slurm.resources_line)
        return outcome
    check_writable(results)
    if not pending:
        print(f"grid {grid.name}: all {len(specs)} runs already done, nothing to submit")
        print_leaderboard(results, specs, shown_backbone)
        return outcome
    for spec in pending if force else ():
        invalidate(results, spec)
    sub = slurm.submit(pending, results, profile, overrides, grid.name, pack=pack, pack_hours=pack_hours)
    submitted = sum(n for _, n, _, _ in sub.arrays)
    print(f"grid {grid.name}: submitted {submitted} runs in {len(sub.arrays)} job array(s) with profile {profile.path} "
          f"({sub.skipped_active} already queued or running) in {time.monotonic() - started:.1f}s")
    for job_id, n, summary, tasks in sub.arrays:
        print(f"  job {job_id}: {n} runs" + (f" in {tasks} packed task(s)" if pack is not None else "") + f" ({summary})")
    outcome = replace(outcome, jobs=tuple((str(j), n, s) for j, n, s, _ in sub.arrays))
    if not wait:
        print(f"follow with: bench status --grid {grid.name}" + (f" --results {results}" if results != DEFAULT_RESULTS else ""))
        return outcome
    final = slurm.wait(results, specs)
    print_leaderboard(results, specs, shown_backbone)
    failed = [(s, error_line(results, s)) for s in final.states.get("failed", [])]
    return replace(outcome, done=tuple(final.states.get("done", [])), failed=tuple(failed),
                   exit_code=report_failures(results, failed))


def report(grid: str | None = None, *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
           splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
           backbones: Sequence[str] | None = None, results: PathLike = DEFAULT_RESULTS,
           data_root: PathLike | None = None, cache_dir: PathLike | None = None, cfg_options: Options | None = None,
           format: str | Sequence[str] = DEFAULT_REPORT_FORMATS, out: PathLike | None = None, pool_orders: bool = False,
           by: str | None = None, compare: Sequence[str] | None = None, statistics: Any = None,
           include: Sequence[PathLike] | None = None) -> ReportOutcome:
    """Tables and plots of finished runs, as `bench report` writes them: of a grid's selection, or without
    `grid` of every finished run under `results`. `format`: one of latex, markdown, csv, html (the
    static site, `index.html`) or several (default: latex and html). `compare`: ["paper"], a mixed-setting peer
    (["happy"], ["promptccd"], ["vb-cgcd"]) or two method labels. `statistics`: `bench.reporting.statistics.Options`
    or its fields by name. `include`: plugin folders, as for `run`."""
    methods, datasets, splits, backbones = (names_of(methods, "methods"), names_of(datasets, "datasets"),
                                            names_of(splits, "splits"), names_of(backbones, "backbones"))
    seeds, results = seeds_of(seeds), path_of(results, "results")
    _use_plugins(include)
    formats = [format] if isinstance(format, str) else list(dict.fromkeys(format))
    for fmt in formats:
        if fmt not in REPORT_FORMATS:
            raise unknown("report format", fmt, REPORT_FORMATS)
    if not formats:
        raise BenchError(f"no report format given; choose from {', '.join(REPORT_FORMATS)}")
    if by is not None and by not in VERSION_COLUMNS:
        raise unknown("version column", by, VERSION_COLUMNS)
    from bench.reporting.stats_files import report_statistics, statistics_options
    compare, statistics = ([compare] if isinstance(compare, str) else compare), statistics_options(statistics)
    from bench.reporting.peers import peer_name, write_peer_compare
    peer, results = peer_name(compare), Path(results)  # peer: `--compare happy` (a mixed-setting peer's tables)
    from bench.config.grids import members
    from bench.reporting.files import INCOMPLETE, block_reports, row_order, write_figures, write_report
    from bench.reporting.aggregate import backbone_label, final_scores, split_by
    from bench.core.storage import write_atomic

    loaded, specs, directories, frame, unplaced = _finished(grid, methods, datasets, splits, seeds, backbones, results,
                                                            data_root, cache_dir, cfg_options, pool_orders)
    out = Path(out) if out else results / "reports" / loaded.name
    check_report_dir(out)
    write_atomic(out / INCOMPLETE, "bench report was stopped while writing this folder: some files are of this "
                 "report, others of an earlier one or missing; run `bench report` again\n")
    shown_backbone = default_backbone(backbones, loaded)
    labelled = frame.assign(label=[backbone_label(l, b, shown_backbone) for l, b in zip(frame["label"], frame["backbone"])])
    # pool_orders: load_runs made each (class order, seed) one sample of the cell, as mammoth and PyCIL
    # average orders, before it told configurations apart
    labels = row_order(labelled, specs)
    if by:  # each label's rows by version, next to each other in the labels' order
        labelled = split_by(labelled, by, VERSION_COLUMNS)
        labels = [split for label in labels for split in sorted(set(labelled["label"]))
                  if split.startswith(f"{label} · {by}=")]
    warn_mixed_versions(labelled)
    order = {"split": list(dict.fromkeys(s.split_label for s in specs)),
             "dataset": list(dict.fromkeys(s.dataset for s in specs)), "label": labels}
    references = reference_labels(labelled)
    texts = [fmt for fmt in formats if fmt != "html"]
    paths: list[Path] = []
    for i, fmt in enumerate(texts):  # the figures once, with the first format's table
        paths += write_report(labelled, out, fmt, title=f"grid {loaded.name}", order=order,
                              exclude_from_best=references, figures=i == 0, correction=statistics.correction)
    if not texts:
        paths += write_figures(labelled, out, order)
    site_tables = [("table (Tab. 5 layout, every run)", "comparison", final_scores(labelled, order))]
    replaced = [axis for axis, given in zip(("methods", "datasets", "splits", "backbones"),
                                            (methods, datasets, splits, backbones)) if given]
    blocks = [(block, members(loaded, block, specs, options_of(cfg_options), replaced))
              for block in (loaded.blocks if len(loaded.blocks) > 1 else ())]
    written, tables = block_reports(labelled, out, texts, f"grid {loaded.name}", blocks, order, references,
                                    statistics.correction)
    stats, statistics_files = report_statistics(labelled, order, out, texts, directories, statistics)
    paths, site_tables = paths + written + statistics_files, site_tables + tables
    from bench.reporting.compare import (compare as compare_with, compare_methods, paired_table, paper_reference,
                                         render_compare)
    paired = None
    if peer:
        paths += write_peer_compare(peer, frame, texts, out, REPORT_FORMATS)
    elif compare and list(compare) != ["paper"]:
        for fmt in texts:
            paths.append(compare_methods(labelled, list(compare), out, REPORT_FORMATS[fmt]))
        if "html" in formats:
            paired = (list(compare), paired_table(labelled, list(compare)))

    comparison = None
    if (compare and list(compare) == ["paper"]) or "html" in formats:  # the site always shows the reproduction rows
        # score the relabelled frame, so that runs of different backbones are never averaged together,
        # then give the rows their method label back: the backbone is a column of its own
        scores = final_scores(labelled, order)
        scores["label"] = scores["label"].astype(str).str.split(" · ").str[0]
        comparison = compare_with(scores, paper_reference(default_backbone="dino-vitb16"))
    if compare and list(compare) == ["paper"]:
        for fmt in texts:
            path = out / f"compare_paper.{REPORT_FORMATS[fmt]}"
            write_atomic(path, render_compare(comparison, fmt))
            paths.append(path)
    if "html" in formats:
        from bench.reporting.site import write_site

        spec_of = {s.run_id: s for s in specs}
        site = write_site(labelled, out, title=f"grid {loaded.name}", runs=[(d, spec_of.get(d.name)) for d in directories],
                          unplaced={u.run: u.why for u in unplaced},
                          label_of_spec=lambda s: backbone_label(s.label, s.backbone, shown_backbone), order=order,
                          references=references, tables=site_tables, comparison=comparison, paired=paired,
                          figures=paths, files=paths, statistics=stats)
        paths += site
    (out / INCOMPLETE).unlink(missing_ok=True)  # every file written: the folder is this report
    n_finished = frame["run_id"].nunique() + len(unplaced)
    left_out = (f", {len(unplaced)} of them in no row ({', '.join(u.run for u in unplaced)}: see the warnings above)"
                if unplaced else "")
    print(f"report of grid {loaded.name}: {n_finished}/{len(directories)} runs finished{left_out}; "
          f"wrote {len(paths)} files to {out}")
    for path in paths:
        print(f"  {path}" + (f"  (the site: open it in a browser; one page per run under {out / 'runs'})"
                             if path.name == "index.html" else ""))
    return ReportOutcome(loaded.name, out, tuple(paths), labelled)


def _finished(grid: str | None, methods: Any, datasets: Any, splits: Any, seeds: Any, backbones: Any, results: Path,
              data_root: Any, cache_dir: Any, cfg_options: Any, pool_orders: bool) -> tuple[Any, ...]:
    """The selection's grid, specs and run directories, and the metrics of its finished runs (with the runs no
    table row could place), or a BenchError when none has finished."""
    from bench.reporting.load import load_runs

    if grid:
        loaded, specs = expand_selection(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                                         backbones=backbones, cfg_options=options_of(cfg_options), data_root=data_root,
                                         cache_dir=cache_dir)
        directories = run_dirs(results, specs)
    else:
        loaded, specs, directories = finished_selection(results, methods=methods, datasets=datasets, splits=splits,
                                                        seeds=seeds, backbones=backbones,
                                                        cfg_options=options_of(cfg_options))
    frame, unplaced = load_runs(directories, pool_orders=pool_orders)
    if not len(frame):
        if not grid:
            raise BenchError(f"no finished runs under {results} match the selection; `bench run` makes some")
        raise BenchError(f"no finished runs of grid {loaded.name!r} under {results}; run `bench run --grid {loaded.name}` first")
    return loaded, specs, directories, frame, unplaced


@dataclass(frozen=True)
class Results:
    """`bench.results`'s answer: `leaderboard`, a row per (split, dataset, method label, metric) with `mean`, `std`,
    seeds `n`, `ci95` and `source` (`bench report`'s table cells as data); `runs`, every metric row of every finished
    run (each step, group, flavour and metric, with the run's identity and provenance columns)."""

    leaderboard: Any = field(repr=False)
    runs: Any = field(repr=False)


def results(grid: str | None = None, *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
            splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
            backbones: Sequence[str] | None = None, results: PathLike = DEFAULT_RESULTS,
            cfg_options: Options | None = None, include: Sequence[PathLike] | None = None) -> Results:
    """The finished runs of a grid's selection (or without `grid`, every one under `results`) as pandas objects,
    aggregated over seeds as `bench report` does; the selection's options are `report`'s. Writes nothing."""
    from bench.reporting.aggregate import backbone_label, final_scores
    from bench.reporting.files import row_order

    methods, datasets, splits, backbones = (names_of(methods, "methods"), names_of(datasets, "datasets"),
                                            names_of(splits, "splits"), names_of(backbones, "backbones"))
    seeds, root = seeds_of(seeds), Path(path_of(results, "results"))
    _use_plugins(include)
    loaded, specs, _, frame, _ = _finished(grid, methods, datasets, splits, seeds, backbones, root, None, None,
                                           cfg_options, False)
    shown = default_backbone(backbones, loaded)
    labelled = frame.assign(label=[backbone_label(l, b, shown) for l, b in zip(frame["label"], frame["backbone"])])
    order = {"split": list(dict.fromkeys(s.split_label for s in specs)),
             "dataset": list(dict.fromkeys(s.dataset for s in specs)), "label": row_order(labelled, specs)}
    return Results(final_scores(labelled, order), labelled)

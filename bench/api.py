"""bench's Python API: `bench.run(...)` and `bench.report(...)` do what `bench run` and `bench report` do,
with the same checks before anything runs, the same progress lines on stdout and the same `BenchError` for bad
input; `bench.results(...)` gives the finished runs as pandas objects. The commands are these functions behind an
argument parser.

    import bench
    outcome = bench.run(grid="smoke", methods=["baseline", "k-means"], cluster="debug", results="out")
    written = bench.report(grid="smoke", results="out", format="markdown")

A facade: the keyword arguments make a `Selection` (which runs: `bench.config.selection`, also taken whole in place
of `grid`) and the command's options, handed to one entry point each: `bench.execution.launch.launch` and
`bench.reporting.pipeline.write_reports`. Importing this module imports nothing heavy: each call imports what it
needs.

Imports from: bench.errors, bench.registries, bench.config, bench.reporting, bench.execution, bench.store, bench.tuning.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from bench.config.selection import DEFAULT_RESULTS, Options, PathLike, Selection
from bench.errors import BenchError
from bench.execution.launch import RunOptions, RunOutcome
from bench.reporting.pipeline import DEFAULT_REPORT_FORMATS, ReportOptions, ReportOutcome, Results


def _use_plugins(include: PathLike | Sequence[PathLike] | None) -> None:
    """Plugin folders given to the API, as `--include` gives them to a command (`bench.registries.plugins`)."""
    if include is not None:
        from bench.registries.plugins import activate

        # one folder given alone is that folder, not its name's characters
        activate([include] if isinstance(include, (str, os.PathLike)) else include)


def run(grid: str | Selection = "demo", *, methods: Sequence[str] | None = None,
        datasets: Sequence[str] | None = None, splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
        backbones: Sequence[str] | None = None, results: PathLike = DEFAULT_RESULTS, data_root: PathLike | None = None,
        cache_dir: PathLike | None = None, cfg_options: Options | None = None, cluster: str = "local",
        workers: int | None = None, device: str | None = None, threads: int | None = None,
        read_ahead: bool | None = None, weights_dir: PathLike | None = None, force: bool = False,
        retry_failed: bool = False, dry_run: bool = False, profile: str = "default",
        slurm_options: Options | None = None, wait: bool = False, include: PathLike | Sequence[PathLike] | None = None,
        gpus: Sequence[str] | None = None, runs_per_gpu: int = 1, pack: int | str | None = None,
        pack_hours: float = 4.0, trackers: Sequence[str] | None = None) -> RunOutcome:
    """Run a grid, as `bench run` does: the selection's runs not yet done, on `cluster` (local worker
    processes, one per GPU slot where there are GPUs (`gpus`, each `runs_per_gpu` times), debug in this process,
    or SLURM job arrays with `profile`, `pack`ed N or "auto" runs per task). Every check (names, splits,
    devices, backbones, data and weight files, cache space) is made before anything is written.
    `grid`: a grid's name, or a whole `Selection` (then without the other selection keywords).
    `include`: plugin folders, as `--include` (with $BENCH_INCLUDE's; None: those already in use). `trackers`: where
    each run also sends its losses and metrics, as `--tracker` (`bench.runs.trackers`), besides the grid's."""
    selection = Selection.of(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                             backbones=backbones, results=results, data_root=data_root, cache_dir=cache_dir,
                             cfg_options=cfg_options)
    _use_plugins(include)
    from bench.execution.launch import launch

    return launch(selection, RunOptions(
        cluster=cluster, workers=workers, gpus=gpus, runs_per_gpu=runs_per_gpu, device=device, threads=threads,
        read_ahead=read_ahead, weights_dir=weights_dir, force=force, retry_failed=retry_failed, dry_run=dry_run,
        profile=profile, slurm_options=slurm_options, wait=wait, pack=pack, pack_hours=pack_hours, trackers=trackers))


def report(grid: str | Selection | None = None, *, methods: Sequence[str] | None = None,
           datasets: Sequence[str] | None = None, splits: Sequence[str] | None = None,
           seeds: Sequence[int] | None = None, backbones: Sequence[str] | None = None,
           results: PathLike = DEFAULT_RESULTS, data_root: PathLike | None = None, cache_dir: PathLike | None = None,
           cfg_options: Options | None = None, format: str | Sequence[str] | None = DEFAULT_REPORT_FORMATS,
           out: PathLike | None = None, pool_orders: bool = False, by: str | None = None,
           compare: Sequence[str] | None = None, statistics: Any = None,
           include: PathLike | Sequence[PathLike] | None = None, store: PathLike | None = None) -> ReportOutcome:
    """Tables and plots of finished runs, as `bench report` writes them: of a grid's selection, or without
    `grid` of every finished run under `results` (`grid` may also be a whole `Selection`). `format`: one of latex,
    markdown, csv, html (the static site, `index.html`) or several (default, or None: latex and html). `compare`: ["paper"],
    a mixed-setting peer's tables (one name alone: ["happy"], ["promptccd"], ["vb-cgcd"]) or two methods, each a name,
    slug or label (["vb-cgcd", "k-means"]: the methods). `statistics`:
    `bench.reporting.statistics.Options` or its fields by name. `include`: plugin folders, as for `run`. `store`: a
    results store's checkout; the report adds `store_comparison.md`, the runs beside the store's entries on the same
    protocol with the paired image bootstrap (`bench.store.compare`)."""
    selection = Selection.of(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                             backbones=backbones, results=results, data_root=data_root, cache_dir=cache_dir,
                             cfg_options=cfg_options)
    _use_plugins(include)
    options = ReportOptions(formats=DEFAULT_REPORT_FORMATS if format is None else format, out=out,
                            pool_orders=pool_orders, by=by, compare=compare, statistics=statistics)
    from bench.execution.selection import runs_to_report
    from bench.reporting.pipeline import write_reports

    if store is not None:
        from bench.store.layout import check_store

        check_store(Path(store))  # before anything of the report is written
    selected = runs_to_report(selection)
    outcome = write_reports(selected, options)
    if store is None:
        return outcome
    from dataclasses import replace

    from bench.store.compare import compare_with_store

    resamples = getattr(options.statistics, "resamples", 1000) or 1000
    path = compare_with_store(selected.directories, Path(store), outcome.out, resamples=resamples)
    print(f"the runs beside the store {store}: {path}")
    return replace(outcome, paths=(*outcome.paths, path))


def results(grid: str | Selection | None = None, *, methods: Sequence[str] | None = None,
            datasets: Sequence[str] | None = None, splits: Sequence[str] | None = None,
            seeds: Sequence[int] | None = None, backbones: Sequence[str] | None = None,
            results: PathLike = DEFAULT_RESULTS, cfg_options: Options | None = None,
            include: PathLike | Sequence[PathLike] | None = None) -> Results:
    """The finished runs of a grid's selection (or without `grid`, every one under `results`) as pandas objects,
    aggregated over seeds as `bench report` does; the selection's options are `report`'s. Writes nothing."""
    selection = Selection.of(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                             backbones=backbones, results=results, cfg_options=cfg_options)
    _use_plugins(include)
    from bench.execution.selection import runs_to_report
    from bench.reporting.pipeline import results_of

    return results_of(runs_to_report(selection))


def publish(grid: str | Selection, store: str, *, methods: Sequence[str] | None = None,
            datasets: Sequence[str] | None = None, splits: Sequence[str] | None = None,
            seeds: Sequence[int] | None = None, backbones: Sequence[str] | None = None,
            results: PathLike = DEFAULT_RESULTS, cfg_options: Options | None = None, push: bool = False,
            branch: str | None = None, checkout: PathLike | None = None,
            include: PathLike | Sequence[PathLike] | None = None) -> Any:
    """Bundle a grid's finished runs into a results store (`store`: a checkout, a bare repository or a git URL) on a
    new branch, in one commit, as `bench publish` does (`bench.store.publish`); `push`: send the branch to the store's
    remote for a pull request. `checkout`: where to clone a store that is not a checkout (default: a new temporary
    folder). Returns `bench.store.publish.Published`."""
    selection = Selection.of(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                             backbones=backbones, results=results, cfg_options=cfg_options)
    _use_plugins(include)
    from bench.execution.selection import runs_to_report
    from bench.store.publish import publish as publish_runs

    selected = runs_to_report(selection)
    return publish_runs(list(selected.directories), store, grid=selected.grid.name, results=Path(selection.results),
                        push=push, branch=branch, checkout=None if checkout is None else Path(checkout))


def tune(grid: str | Selection = "demo", *, trials: int, space: PathLike | None = None,
         methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
         splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
         backbones: Sequence[str] | None = None, results: PathLike = DEFAULT_RESULTS, data_root: PathLike | None = None,
         cache_dir: PathLike | None = None, cfg_options: Options | None = None, protocol: str = "validation",
         holdout: float = 0.2, storage: str | None = None, study: str | None = None, seed: int = 0,
         cluster: str = "local", workers: int | None = None, profile: str = "default",
         include: PathLike | Sequence[PathLike] | None = None, batch: int = 1, transfer_from: str | None = None,
         final: bool = True) -> Any:
    """Tune one method of a grid's selection, as `bench tune` does (`bench.tuning.study`): `trials` Optuna trials on
    the tuning `protocol` (`validation`: `holdout` of each class's training images scored in place of the test set;
    `transfer`: on `transfer_from`, another dataset or `order:N`, another class order, scored on held-out images),
    each an ordinary run of the selection with the trial's values, run on `cluster` as `bench.run` runs a grid.
    `space`: a JSON or YAML search space (default: the method's `_search_space` beside its presets). `storage`: an
    RDB URL (default: the journal file `<results>/tuning/<study>.journal`). `batch`: trials asked for at once and,
    for a method that learns them together (`batchable`, e.g. Baseline), run in this process as one batched
    computation (`bench.protocol.batched`); 1, the default, runs them one at a time on `cluster`. `final`: then run the
    selection once with the best values, marked as tuned by the study (`tuning.study`). Returns
    `bench.tuning.study.TuneOutcome`."""
    selection = Selection.of(grid, methods=methods, datasets=datasets, splits=splits, seeds=seeds,
                             backbones=backbones, results=results, data_root=data_root, cache_dir=cache_dir,
                             cfg_options=cfg_options)
    _use_plugins(include)
    from bench.execution.launch import launch, launch_batched
    from bench.execution.selection import expand_selection
    from bench.tuning.space import preset_space, read_space_file
    from bench.tuning.study import TuneOptions, tune as run_study

    if space is not None:
        params = read_space_file(Path(space))
    else:
        _, specs = expand_selection(selection)
        methods_named = sorted({s.method for s in specs})
        if len(methods_named) != 1:
            raise BenchError(f"bench tune tunes one method; the selection holds {', '.join(methods_named)}: name one "
                             f"with --methods")
        params = preset_space(methods_named[0])
    options = TuneOptions(trials=trials, protocol=protocol, holdout=holdout, storage=storage, study=study, seed=seed,
                          batch=batch, source=transfer_from, final=final)
    if batch > 1 and cluster == "slurm":
        raise BenchError(f"--batch {batch} runs a batch's trials together in the tuner's own process: use --cluster "
                         f"local or debug, or --batch 1 to run each trial on slurm")
    run_options = RunOptions(cluster=cluster, workers=workers, profile=profile, wait=True)
    return run_study(selection, params, options, lambda trial: launch(trial, run_options),
                     run_batch=lambda trials: launch_batched(trials, run_options))

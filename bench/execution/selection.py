"""Which runs a command or an API call means: a `Selection` (`bench.config.selection`) with where things
are (data root, cache, device) expanded into run specs; for a report, with the run directories it reads.

The command line and `bench.run` / `bench.report` / `bench.results` expand through here, so that both name the
same runs.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Sequence

from bench.config.selection import Selected, Selection
from bench.errors import BenchError
from bench.execution.preflight import resolve_data_root


def expand_selection(selection: Selection, *, device: str | None = None, read_ahead: bool | None = None,
                     threads: int | None = None, weights_dir: str | os.PathLike[str] | None = None,
                     trackers: Sequence[str] | None = None) -> tuple[Any, list[Any]]:
    """The grid and its run specs as selected. Where things are (data root, cache, device, threads,
    weights) goes into each spec's `location`, recorded but kept out of its run id; so do the trackers a run sends
    to (`trackers`: given by `bench run` alone, None otherwise; they add to the grid's `trackers`), with the grid's
    name, which groups the runs there."""
    from bench.config.grids import expand, load_grid

    if selection.grid is None:
        raise BenchError("no grid to run: name one (--grid NAME; `bench list grids` lists them)")
    loaded = load_grid(selection.grid)
    cache_dir = selection.cache_dir
    location: dict[str, Any] = {"data_root": resolve_data_root(selection.data_root),
                                "cache_dir": str(Path(cache_dir).resolve()) if cache_dir else None}
    if device:
        location["device"] = device
    if read_ahead is not None:
        location["read_ahead"] = read_ahead
    if threads is not None:  # not in the run id: where it runs, as the device
        location["threads"] = threads
    weights_dir = weights_dir or os.environ.get("BENCH_WEIGHTS_DIR")
    if weights_dir:
        location["weights_dir"] = str(Path(weights_dir).expanduser().resolve())
    if trackers is not None:
        from bench.runs.tracker_endpoints import answering
        from bench.runs.trackers import check_trackers

        chosen = check_trackers([*loaded.trackers, *trackers])  # unknown ones or missing extras refused here
        # a server away is asked once here, not retried for minutes by every run: the runs go on without it
        chosen = answering(chosen, say=lambda line: print(f"bench: warning: {line}", file=sys.stderr, flush=True))
        if chosen:
            location.update(trackers=chosen, grid=loaded.name)
    specs = expand(loaded, methods=selection.methods, datasets=selection.datasets, splits=selection.splits,
                   seeds=selection.seeds, backbones=selection.backbones, options=dict(selection.cfg_options),
                   location=location)
    return loaded, specs


def runs_to_report(selection: Selection) -> Selected:
    """The runs a report of `selection` reads: its grid's runs and their directories, finished or not (the
    report says how many are), or without a grid every finished run under the results root."""
    from bench.runs.rundir import run_dir

    if not selection.grid:
        return finished_selection(selection)
    loaded, specs = expand_selection(selection)
    directories = [run_dir(selection.results, s) for s in specs]
    for spec, directory in tuned_companions(selection.results, specs):  # the honest track beside the grid's runs
        specs.append(spec)
        directories.append(directory)
    return Selected(selection, loaded, tuple(specs), tuple(directories))


def tuned_companions(results: Path, specs: Sequence[Any]) -> list[tuple[Any, Path]]:
    """The finished runs under `results` that hold a `bench tune` study's best values (`tuning.study`) for a
    (method, preset, dataset, split, seed, backbone) of `specs`: a report of a grid sets them beside its runs (the
    tuning block, `bench.reporting.tuning`), whatever values the study found. None where no study ran."""
    from bench.config.spec import RunSpec
    from bench.runs.rundir import DONE

    cells = {(s.method, s.preset, s.dataset, s.split, s.seed, s.backbone) for s in specs}
    chosen = {s.run_id for s in specs}
    found = []
    for directory in sorted((Path(results) / "runs").glob("*/")):
        if directory.name in chosen or not (directory / DONE).exists():
            continue
        try:
            text = (directory / "spec.json").read_text()
            if '"study"' not in text:  # most runs: no study's values (the JSON not even parsed)
                continue
            spec = RunSpec.from_json(text)
        except Exception:  # unreadable: not a companion anyone can vouch for
            continue
        if spec.config.get("tuning", {}).get("study") and \
                (spec.method, spec.preset, spec.dataset, spec.split, spec.seed, spec.backbone) in cells:
            found.append((spec, directory))
    return found


def finished_selection(selection: Selection) -> Selected:
    """A report without a grid: every finished run under the results root (what the user just ran,
    whatever grid or options it came from), narrowed by methods, datasets, splits, seeds and backbones,
    as one grid named `all`; with the directories to read. A directory whose spec.json cannot be read is
    among them whatever the selection (what it holds is unknown): the report names it."""
    from collections import Counter

    from bench.runs.rundir import DONE
    from bench.config.spec import RunSpec
    from bench.config.grids import Block, Grid

    results, methods, datasets, splits, seeds, backbones = (selection.results, selection.methods, selection.datasets,
                                                            selection.splits, selection.seeds, selection.backbones)
    if selection.cfg_options:
        raise BenchError("--cfg-options selects runs of a grid: name it with --grid (without --grid, bench report "
                         "reports every finished run under the results root)")
    selected = {_selected_method(entry) for entry in methods or ()}
    specs, directories = [], []
    for directory in sorted((Path(results) / "runs").glob("*/")):
        if not (directory / DONE).exists():
            continue
        try:
            spec = RunSpec.from_json((directory / "spec.json").read_text())
        except Exception:  # not JSON, not a spec's fields (a list has no .pop): `load_runs` says which
            directories.append(directory)
            continue
        if ((methods and (spec.method, spec.preset) not in selected)  # `Baseline:equations` names a preset, as in grids
                or (datasets and spec.dataset not in datasets) or (splits and spec.split not in splits)
                or (seeds and spec.seed not in seeds) or (backbones and spec.backbone not in backbones)):
            continue
        specs.append(spec)
        directories.append(directory)  # its own: an edited spec.json's run id names another directory
    specs.sort(key=lambda s: (s.method, s.preset, s.dataset, s.n_steps, s.backbone, s.seed))
    shown = [b for b, _ in Counter(s.backbone for s in specs).most_common()]  # the usual one first
    axis = {name: tuple(dict.fromkeys(getattr(s, name) for s in specs)) for name in ("dataset", "split")}
    block = Block(tuple(dict.fromkeys(Block._entry(s) for s in specs)), axis["dataset"], axis["split"], tuple(shown))
    print(f"no --grid given: reporting the {len(directories)} finished run(s) under {Path(results) / 'runs'}"
          + (f" ({', '.join(dict.fromkeys(s.label for s in specs))} on {', '.join(axis['dataset'])})" if specs else ""))
    grid = Grid(name="all", blocks=(block,), seeds=tuple(sorted({s.seed for s in specs})), cfg={})
    return Selected(selection, grid, tuple(specs), tuple(directories))


def _selected_method(entry: str) -> tuple[str, str]:
    """A `--methods` entry of a report without a grid: a name or slug of a registered method, or the name
    of one no longer registered, whose finished runs still report."""
    from bench.config.spec import parse_method, split_method

    try:
        return parse_method(entry)
    except BenchError:
        return split_method(entry)

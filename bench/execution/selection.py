"""Which runs a command or an API call means: a grid narrowed by methods, datasets, splits, seeds and
backbones, with where things are (data root, cache, device), expanded into run specs.

The command line and `bench.run` / `bench.report` expand through here, so that both name the same runs.
"""
from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from bench.errors import BenchError
from bench.execution.preflight import resolve_data_root


def parse_options(pairs: Sequence[str], option: str = "--cfg-options") -> dict[str, Any]:
    """`k=v` pairs; values parsed as Python literals where possible (`3`, `1e-4`, `True`, `[1,2]`); `true` and
    `false` (as JSON and YAML write them) are booleans too."""
    import ast

    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise BenchError(f"bad {option} item {pair!r}: use section.key=value, e.g. method.epochs=10")
        if raw in ("true", "false"):
            options[key] = raw == "true"
            continue
        try:
            options[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            options[key] = raw
    return options


def expand_selection(grid: str, *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
                     splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                     backbones: Sequence[str] | None = None, cfg_options: Mapping[str, Any] | None = None,
                     data_root: str | os.PathLike[str] | None = None, cache_dir: str | os.PathLike[str] | None = None,
                     device: str | None = None, read_ahead: bool | None = None, threads: int | None = None,
                     weights_dir: str | os.PathLike[str] | None = None,
                     trackers: Sequence[str] | None = None) -> tuple[Any, list[Any]]:
    """The grid and its run specs as selected. Where things are (data root, cache, device, threads,
    weights) goes into each spec's `location`, recorded but kept out of its run id; so do the trackers a run sends
    to (`trackers`: given by `bench run` alone, None otherwise; they add to the grid's `trackers`), with the grid's
    name, which groups the runs there."""
    from bench.config.grids import expand, load_grid

    loaded = load_grid(grid)
    negative = [seed for seed in seeds or () if seed < 0]
    if negative:
        raise BenchError(f"--seeds {negative[0]}: a seed must be an integer >= 0")
    location: dict[str, Any] = {"data_root": resolve_data_root(data_root),
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
        from bench.runs.trackers import check_trackers

        chosen = check_trackers([*loaded.trackers, *trackers])  # unknown ones or missing extras refused here
        if chosen:
            location.update(trackers=chosen, grid=loaded.name)
    specs = expand(loaded, methods=methods, datasets=datasets, splits=splits, seeds=seeds, backbones=backbones,
                   options=dict(cfg_options or {}), location=location)
    return loaded, specs


def finished_selection(results: Path, *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
                       splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                       backbones: Sequence[str] | None = None,
                       cfg_options: Mapping[str, Any] | None = None) -> tuple[Any, list[Any], list[Path]]:
    """A report without a grid: every finished run under the results root (what the user just ran,
    whatever grid or options it came from), narrowed by methods, datasets, splits, seeds and backbones,
    as one grid named `all`; with the directories to read. A directory whose spec.json cannot be read is
    among them whatever the selection (what it holds is unknown): the report names it."""
    from collections import Counter

    from bench.runs.rundir import DONE
    from bench.config.spec import RunSpec
    from bench.config.grids import Block, Grid

    if cfg_options:
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
    return grid, specs, directories


def _selected_method(entry: str) -> tuple[str, str]:
    """A `--methods` entry of a report without a grid: a name or slug of a registered method, or the name
    of one no longer registered, whose finished runs still report."""
    from bench.config.spec import parse_method, split_method

    try:
        return parse_method(entry)
    except BenchError:
        return split_method(entry)


def default_backbone(backbones: Sequence[str] | None, grid: Any) -> str:
    """The backbone whose rows need no backbone in their label: the first selected, else the grid's first."""
    return (backbones or grid.backbones)[0]


# -- the Python API's selection arguments, checked at its edge (the command line's are parsed by argparse) --

def names_of(value: Any, what: str) -> list[str] | None:
    """A selection as the API takes it: None (the grid's), one name, or a list of names; anything else is
    refused in one line (a string is one name, never its characters)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise BenchError(f"bad {what}={value!r}: a name or a list of names (strings), e.g. {what}=['baseline', 'k-means']")


def seeds_of(value: Any) -> list[int] | None:
    """None (the grid's seeds), one integer or a list of integers; `1.5`, `True` or `"0"` are refused, not coerced
    (two of them would name the run of seed 1)."""
    if value is None:
        return None
    values = [value] if isinstance(value, numbers.Integral) else value
    if isinstance(values, (list, tuple)) and all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                                 for v in values):
        return [int(v) for v in values]
    raise BenchError(f"bad seeds={value!r}: an integer or a list of integers, e.g. seeds=[0, 1, 2]")


def path_of(value: Any, what: str) -> Path:
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise BenchError(f"bad {what}={value!r}: a path (a str or a pathlib.Path)")


def options_of(options: Mapping[str, Any] | Sequence[str] | None, option: str = "--cfg-options") -> dict[str, Any]:
    """`--cfg-options`-like settings as the API takes them: a dict, or a list of key=value strings."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    if isinstance(options, str):
        raise BenchError(f"{option}: give a dict or a list of key=value strings, not the string {options!r}")
    return parse_options(options)

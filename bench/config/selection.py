"""Which runs a command or an API call means, as one value: `Selection`, a grid narrowed by methods, datasets,
splits, seeds and backbones, with `--cfg-options` and where the results, data and cache are.

`bench run`, `bench report`, `bench status` … build it from their options (`bench.cli.common.selection`),
`bench.run`, `bench.report` and `bench.results` from their keyword arguments; both check what they are given
here, in one `BenchError` each, so that the command line and the Python API refuse the same input alike.
`bench.execution.selection` expands a selection into run specs; `Selected` is what it gives back for a report.
"""
from __future__ import annotations

import ast
import numbers
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from bench.core.numerics import check_seed
from bench.errors import BenchError

if TYPE_CHECKING:
    from bench.config.grids import Grid
    from bench.config.spec import RunSpec

DEFAULT_RESULTS = Path("results")
PathLike = str | os.PathLike[str]
Options = Mapping[str, Any] | Sequence[str]  # {"method.epochs": 3} or ["method.epochs=3"], as on the command line


@dataclass(frozen=True)
class Selection:
    """A grid's runs as a command names them. Given as the API takes them (one name or a list, one seed or a
    list, a dict or `key=value` strings), kept normalized: tuples of names and seeds, a `Path` of results, the
    `--cfg-options` parsed. `grid=None` means every finished run under `results` (for a report alone)."""

    grid: str | None = None
    methods: tuple[str, ...] | None = None
    datasets: tuple[str, ...] | None = None
    splits: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    backbones: tuple[str, ...] | None = None
    results: Path = DEFAULT_RESULTS
    data_root: str | None = None
    cache_dir: str | None = None
    cfg_options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # a frozen dataclass: the normalized values are set once, here, and never again
        for name in ("methods", "datasets", "splits", "backbones"):
            object.__setattr__(self, name, names_of(getattr(self, name), name))
        object.__setattr__(self, "seeds", seeds_of(self.seeds))
        object.__setattr__(self, "results", path_of(self.results, "results"))
        for name in ("data_root", "cache_dir"):  # kept as text: an empty one means "not given", as on the command line
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                object.__setattr__(self, name, os.fspath(path_of(value, name)))
        object.__setattr__(self, "cfg_options", options_of(self.cfg_options))

    @classmethod
    def of(cls, grid: str | Selection | None, **given: Any) -> Selection:
        """`grid` itself when it is a Selection (then no other selection option may be given: one of the two
        would be dropped), else the Selection of `grid` and `given`."""
        if not isinstance(grid, Selection):
            return cls(grid, **given)
        plain, asked = cls(), cls(**given)  # a keyword left at its default was not given
        extra = [f.name for f in fields(cls) if getattr(asked, f.name) != getattr(plain, f.name)]
        if extra:
            raise BenchError(f"{', '.join(extra)} given beside a Selection: give them in the Selection instead")
        return grid

    def label(self, grid: str) -> str:
        """What a command runs, as it says so: `grid demo`, or `grid demo, narrowed by --methods --datasets` where
        selection options replaced the grid's axes, and `, with --cfg-options` where options changed its runs."""
        flags = (("methods", "--methods"), ("datasets", "--datasets"), ("splits", "--splits"), ("seeds", "--seeds"),
                 ("backbones", "--backbone"))
        given = [flag for name, flag in flags if getattr(self, name) is not None]
        return (f"grid {grid}" + (f", narrowed by {' '.join(given)}" if given else "")
                + (", with --cfg-options" if self.cfg_options else ""))

    def shown_backbone(self, grid: Grid) -> str:
        """The backbone whose rows need no backbone in their label: the first selected, else the grid's first."""
        return (self.backbones or grid.backbones)[0]

    @property
    def axes(self) -> tuple[str, ...]:
        """The axes this selection replaces in a grid (`bench.config.grids.members`): those it names."""
        named = (("methods", self.methods), ("datasets", self.datasets), ("splits", self.splits),
                 ("backbones", self.backbones))
        return tuple(axis for axis, given in named if given)


@dataclass(frozen=True)
class Selected:
    """A selection expanded: its grid (for every finished run, a grid named `all`), the runs it names, sorted,
    and the run directories a report reads (without a grid, also those whose spec.json cannot be read)."""

    selection: Selection
    grid: Grid
    specs: tuple[RunSpec, ...]
    directories: tuple[Path, ...] = ()


def parse_options(pairs: Sequence[str], option: str = "--cfg-options") -> dict[str, Any]:
    """`k=v` pairs; values parsed as Python literals where possible (`3`, `1e-4`, `True`, `[1,2]`); `true` and
    `false` (as JSON and YAML write them) are booleans too."""
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


# -- the Python API's selection arguments, checked at its edge (the command line's are parsed by argparse) --

def names_of(value: Any, what: str, *, empty: bool = False) -> tuple[str, ...] | None:
    """A selection as the API takes it: None (the grid's), one name, or a list of names; anything else is
    refused in one line (a string is one name, never its characters). An empty list selects nothing, which no
    command can say (`--methods` takes one name or more): refused, not read as "all" (`empty`: where an empty
    list means none, as for extra trackers)."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        if not value and not empty:
            raise BenchError(f"{what}=[] selects nothing: name at least one, or leave {what} out (None) for the "
                             f"grid's own")
        return tuple(value)
    raise BenchError(f"bad {what}={value!r}: a name or a list of names (strings), e.g. {what}=['baseline', 'k-means']")


def seeds_of(value: Any) -> tuple[int, ...] | None:
    """None (the grid's seeds), one integer or a list of at least one integer in 0 .. MAX_SEED; `1.5`, `True` or
    `"0"` are refused, not coerced (two of them would name the run of seed 1), and so is a seed the runs could not
    use, before any starts."""
    if value is None:
        return None
    values = [value] if isinstance(value, numbers.Integral) else value
    if isinstance(values, (list, tuple)) and all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                                 for v in values):
        if not values:
            raise BenchError("seeds=[] selects nothing: give at least one seed, or leave seeds out (None) for the "
                             "grid's own")
        for seed in values:
            check_seed(int(seed))
        return tuple(int(v) for v in values)
    raise BenchError(f"bad seeds={value!r}: an integer or a list of integers, e.g. seeds=[0, 1, 2]")


def whole_of(value: Any, what: str) -> int | None:
    """A count option as the API takes it (`workers`, `threads`, `runs_per_gpu`): None (the default) or an integer;
    `1.5`, `"2"` or `True` are refused, not coerced (1.5 threads would be recorded and 1 used). Its range is the
    command's check (`--workers 0` is refused there, in the command's words)."""
    if value is None or isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return None if value is None else int(value)
    raise BenchError(f"bad {what}={value!r}: an integer")


def number_of(value: Any, what: str) -> float:
    """A number option (`pack_hours`): an int or a float, not a string; its range is the command's check."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise BenchError(f"bad {what}={value!r}: a number, e.g. {what}=4")


def flag_of(value: Any, what: str) -> bool:
    """A yes/no option: True or False (a string such as "no" would be true)."""
    if isinstance(value, bool):
        return value
    raise BenchError(f"bad {what}={value!r}: True or False")


def path_of(value: Any, what: str) -> Path:
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise BenchError(f"bad {what}={value!r}: a path (a str or a pathlib.Path)")


def options_of(options: Options | None, option: str = "--cfg-options") -> dict[str, Any]:
    """`--cfg-options`-like settings as the API takes them: a dict, or a list of key=value strings."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    if isinstance(options, str):
        raise BenchError(f"{option}: give a dict or a list of key=value strings, not the string {options!r}")
    return parse_options(options)

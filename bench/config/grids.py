"""Grids and their expansion into run specs.

A grid (an mmengine config file in `registries/grids/`, or a plugin's `grids/`) names methods (optionally with a
preset, `Baseline:equations`), datasets, splits, seeds and a backbone, in one or several blocks (the paper grid
has one per table). Expansion is plain data: a sorted list of frozen `RunSpec`s, each checked before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from bench.config.presets import close_keys, deep_merge, load_preset, resolve_config
from bench.config.spec import (DEFAULT_PRESET, DEFAULT_SECTIONS, EQUATIONS, SECTION_CHOICES, SPLITS, RunSpec,
                               n_steps_of, parse_method, read_config_file)
from bench.core.numerics import check_seed
from bench.core.runs_on import RunsOn
from bench.errors import BenchError, unknown


# where a plugin author reads how a method runs the mixed setting (a refusal of a setting points there)
OPT_IN_DOC = "docs/adding-a-method.md#the-mixed-setting"
# How `bench report` lays out a block's table (bench/reporting/layouts.py builds each); named here so
# that reading a grid checks the name without importing the report's plotting stack.
LAYOUTS: dict[str, str] = {"comparison": "Tab. 5: one row per method", "references": "Tab. 2: references first",
                           "ablation": "Tab. 3: rows (a)-(d), CosNorm and KTRFR marks",
                           "backbones": "Tab. 4: one row per backbone",
                           "baselines_last": "the appendix's CaSSLe table: compared methods, a rule, the baselines"}


@dataclass(frozen=True)
class Block:
    """One product of axes; a grid is the union of its blocks (the paper grid has one per table)."""

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    splits: tuple[str, ...]
    backbones: tuple[str, ...]
    name: str = ""
    layout: str = "comparison"  # of its table in `bench report`: a key of LAYOUTS
    # the block's own settings, over the grid's `cfg` (e.g. `setting=dict(k="silhouette")`: K as an axis)
    cfg: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def _entry(spec: "RunSpec") -> str:
        return spec.method if spec.preset == DEFAULT_PRESET else f"{spec.method}:{spec.preset}"

    def contains(self, spec: "RunSpec", replaced: Sequence[str] = ()) -> bool:
        """Whether `spec` is on the block's axes, but those a selection `replaced` (as `expand` does: `methods`,
        `datasets`, `splits`, `backbones`)."""
        on_axes = {"methods": self._entry(spec) in self.methods, "datasets": spec.dataset in self.datasets,
                   "splits": spec.split in self.splits, "backbones": spec.backbone in self.backbones}
        return all(inside or axis in replaced for axis, inside in on_axes.items())

    def position(self, spec: "RunSpec") -> tuple[int, int]:
        """Where a spec of this block comes in its table: the block lists methods in the paper's order
        (Tab. 2: K-means first), which the grid-wide, name-sorted order of specs loses."""
        entry = self._entry(spec)  # a selection may have replaced an axis: its runs come after the block's own
        return (self.methods.index(entry) if entry in self.methods else len(self.methods),
                self.backbones.index(spec.backbone) if spec.backbone in self.backbones else len(self.backbones))


@dataclass(frozen=True)
class Grid:
    name: str
    blocks: tuple[Block, ...]
    seeds: tuple[int, ...]
    cfg: Mapping[str, Any]
    dataset_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # where `bench run` sends each run's losses and metrics besides its files (`bench.runs.trackers`): not the runs'
    # configuration, so not in their ids
    trackers: tuple[str, ...] = ()

    def _union(self, axis: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for b in self.blocks for v in getattr(b, axis)))

    @property
    def methods(self) -> tuple[str, ...]:
        return self._union("methods")

    @property
    def datasets(self) -> tuple[str, ...]:
        return self._union("datasets")

    @property
    def splits(self) -> tuple[str, ...]:
        return self._union("splits")

    @property
    def backbones(self) -> tuple[str, ...]:
        return self._union("backbones")


def grid_names() -> list[str]:
    """Bench's grids and the plugins' (`bench.registries.plugins`)."""
    from bench.registries.plugins import config_files

    return sorted(config_files("grids"))


def load_grid(name: str) -> Grid:
    from bench.registries.plugins import config_files

    path = config_files("grids").get(name)
    if path is None:
        raise unknown("grid", name, grid_names())
    cfg = read_config_file(str(path), "grid")

    def block(entry: Mapping[str, Any]) -> Block:
        backbones = entry.get("backbones", [entry.get("backbone", cfg.get("backbone", "pixels"))])
        layout = entry.get("layout", "comparison")
        if layout not in LAYOUTS:
            raise BenchError(f"grid {name!r}, block {entry.get('name', '')!r}: {unknown('table layout', layout, LAYOUTS)}")
        return Block(tuple(entry["methods"]), tuple(entry["datasets"]), tuple(entry["splits"]), tuple(backbones),
                     entry.get("name", ""), layout, entry.get("block_cfg", {}))

    # a block's `cfg` is its own (over the grid's), not the grid's passed down like its other keys
    blocks = ([block({**cfg, **{k: v for k, v in b.items() if k != "cfg"}, "block_cfg": b.get("cfg", {})})
               for b in cfg["blocks"]] if "blocks" in cfg else [block(cfg)])
    trackers = cfg.get("trackers", ())
    for seed in cfg["seeds"]:
        check_seed(int(seed), f"grid {name!r}: seed")
    return Grid(name=name, blocks=tuple(blocks), seeds=tuple(int(s) for s in cfg["seeds"]),
                cfg=cfg.get("cfg", {}), dataset_options=cfg.get("dataset_options", {}),
                trackers=(trackers,) if isinstance(trackers, str) else tuple(trackers))


def _check_method_keys(options: Mapping[str, Any], methods: Sequence[tuple[str, str]]) -> None:
    known: set[str] = set()
    for method, preset in methods:
        known.update(load_preset(method, preset)[0])
    for key in options:
        parts = key.split(".")
        if parts[0] == "method" and (len(parts) < 2 or parts[1] not in known):
            valid = [f"method.{k}" for k in sorted(known)]
            raise BenchError(f"bad --cfg-options key {key!r}: no selected method has it; valid keys: {', '.join(valid)}"
                             f"{close_keys(key.partition('.')[2], known, ['method'])}")


def expand(grid: Grid, *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
           splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
           backbones: Sequence[str] | None = None, options: Mapping[str, Any] | None = None,
           location: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """Every (method, dataset, split, backbone, seed) of the grid, filtered by the CLI's selections.

    A selection narrows the grid: an entry the grid holds runs in the blocks that hold it, never in the others
    (`--methods happy` on a grid that runs Happy on CUB alone runs Happy on CUB). An entry outside the grid (e.g.
    `--datasets synthetic` on the demo grid, a method of one's own) is run in every block: it replaces that axis.
    """
    from bench.data import reader_class
    from bench.registries import DATASETS

    options = dict(options or {})
    selected = [parse_method(entry) for entry in methods or grid.methods]  # unknown names refused here
    _check_method_keys(options, selected)
    held = [parse_method(m) for m in grid.methods]
    specs: dict[str, RunSpec] = {}
    for block in grid.blocks:
        own = [parse_method(m) for m in block.methods]
        block_methods = [m for m in selected if m in own or m not in held] if methods else own
        for method, preset in block_methods:
            for dataset in _narrowed(datasets, block.datasets, grid.datasets):
                if reader_class(dataset) is None:
                    raise unknown("dataset", dataset, DATASETS.module_dict)
                for split in _narrowed(splits, block.splits, grid.splits):
                    n_steps = n_steps_of(split)
                    for backbone in _narrowed(backbones, block.backbones, grid.backbones):
                        _check_backbone(backbone)
                        grid_cfg = deep_merge(deep_merge(dict(grid.cfg), block.cfg),
                                              {"dataset": grid.dataset_options.get(dataset, {})})
                        config = resolve_config(method, preset, dataset, split, grid_cfg, options)
                        check_config(method, dataset, config, n_steps)
                        for seed in seeds if seeds is not None else grid.seeds:
                            spec = RunSpec(method, preset, dataset, split, n_steps, backbone, int(seed), config,
                                           dict(location or {}))
                            specs.setdefault(spec.run_id, spec)  # blocks may overlap: each run once
    return sorted(specs.values(), key=lambda s: (s.method, s.preset, s.dataset, s.n_steps, s.backbone, s.seed))


def _narrowed(selected: Sequence[str] | None, block: Sequence[str], grid: Sequence[str]) -> Sequence[str]:
    """A block's entries on one axis under a selection: the block's own, or those selected that the block holds or
    the grid does not (`expand`)."""
    return block if not selected else [v for v in selected if v in block or v not in grid]


def members(grid: Grid, block: Block, specs: Sequence[RunSpec], options: Mapping[str, Any] | None = None,
            replaced: Sequence[str] = ()) -> list[RunSpec]:
    """The runs of `specs` that `block` makes: on its axes (but those a selection `replaced`, as `expand` does:
    `methods`, `datasets`, `splits`, `backbones`), and with the config it resolves (with the same `--cfg-options`),
    so that two blocks on the same axes told apart by their `cfg` (K known, K estimated) hold their own runs; a
    run two blocks make alike is in both."""
    from dataclasses import replace

    out = []
    held: dict[str, set[Any]] = {"methods": {parse_method(m) for m in grid.methods}, "datasets": set(grid.datasets),
                                 "splits": set(grid.splits), "backbones": set(grid.backbones)}
    for spec in specs:
        # a replaced axis admits what the grid does not hold; what it holds stays in its own blocks (`expand`)
        on_axes = {"methods": (spec.method, spec.preset), "datasets": spec.dataset, "splits": spec.split,
                   "backbones": spec.backbone}
        if not block.contains(spec, [axis for axis in replaced if on_axes[axis] not in held[axis]]):
            continue
        grid_cfg = deep_merge(deep_merge(dict(grid.cfg), block.cfg), {"dataset": grid.dataset_options.get(spec.dataset, {})})
        config = resolve_config(spec.method, spec.preset, spec.dataset, spec.split, grid_cfg, dict(options or {}))
        if replace(spec, config=config).run_id == spec.run_id:
            out.append(spec)
    return sorted(out, key=block.position)


def check_config(method: str, dataset: str, config: Mapping[str, Any], n_steps: int) -> None:
    """Every value of a resolved run config, before anything runs (see `bench.config.validate`): the method's
    keys typed by its `equations` dict (every key), the shared sections by `DEFAULT_SECTIONS`, the dataset's by its reader."""
    from bench.data import reader_class
    from bench.config.validate import check_dataset_options, check_method, check_sections
    from bench.registries.catalogue import known_method

    info = known_method(method)
    check_method(config["method"], load_preset(method, EQUATIONS)[0], info.hparam_choices, n_steps)
    check_sections(config, DEFAULT_SECTIONS, SECTION_CHOICES)
    _check_setting(method, config, info.runs_on, dataset)
    _check_arrival(dataset, config)
    check_dataset_options(reader_class(dataset), config["dataset"])


def _check_setting(method: str, config: Mapping[str, Any], runs_on: RunsOn, dataset: str = "") -> None:
    """The setting follows the split (a mixed protocol's split, or a class-iNCD one), and the method
    must declare it (`RunsOn.settings`)."""
    from bench.splits.settings import MIXED_SPLITS, SETTINGS, check_setting

    setting = config.get("setting", {})
    name = setting.get("name", "incd")
    mixed_split = setting.get("protocol") in MIXED_SPLITS
    if name not in SETTINGS:
        raise unknown("setting", name, SETTINGS)
    if (name == "mixed") != mixed_split:
        raise BenchError(f"setting {name!r} does not follow from the split: the split names the setting "
                         f"(mixed protocols: {', '.join(MIXED_SPLITS)}; class-iNCD: {', '.join(SPLITS)})")
    if name not in runs_on.settings:
        # the paper's trained-block methods: each step's new head clusters images of new classes only
        why = ("; it learns each step's new head from images of new classes only (class-iNCD's assumption) and has no "
               "labelled first step, while a mixed step mixes old classes' images in (the mixed setting's trained-block "
               "methods: SimGCD (continual), Happy, PromptCCD)" if name == "mixed" and runs_on.inputs == "tokens" else "")
        raise BenchError(f"method {method!r} cannot run the {name!r} setting ({SETTINGS[name]}){why}; it runs: "
                         f"{', '.join(runs_on.settings)}. {opt_in(runs_on.settings, name)}")
    if name == "mixed":
        check_setting(setting, dataset)


def opt_in(settings: Sequence[str], name: str) -> str:
    """How a method's class comes to run setting `name` besides its `settings`: the sentence a refusal ends with."""
    from bench.splits.settings import SETTINGS

    declared = ", ".join(f'"{s}"' for s in SETTINGS if s in (*settings, name))
    how = ("learning its labelled step from step.labels" if name == "mixed"
           else "learning an unlabelled first step, with task_logits for each step's classes")
    return f"A method opts in by declaring settings=({declared}) in its RunsOn and {how} (see {OPT_IN_DOC})"


def _check_arrival(dataset: str, config: Mapping[str, Any]) -> None:
    """A split that labels a dataset's SSB known classes runs only on a dataset bench has them for; a peer's
    arrival order names the dataset's own classes, so it takes no permuted class order."""
    from bench.splits.peer_splits import SSB_KNOWN

    setting = config.get("setting", {})
    if setting.get("arrival", "canonical") != "canonical" and config.get("split", {}).get("class_order_seed") is not None:
        raise BenchError(f"setting.arrival={setting['arrival']} orders the dataset's own classes as the peer does; "
                         f"leave split.class_order_seed unset with it")
    if setting.get("draw", "bench") == "happy":
        from bench.splits.happy_draw import HAPPY_ORDERED

        if dataset not in HAPPY_ORDERED:
            raise BenchError(f"setting.draw=happy replays Happy's draw over a training set in the order its code "
                             f"reads it: {', '.join(HAPPY_ORDERED)}; bench orders {dataset}'s otherwise")
        if "whole_train" in setting and not setting["whole_train"]:
            raise BenchError(f"setting.draw=happy draws from {dataset}'s whole official training set, as Happy's code; "
                             f"leave setting.whole_train=True with it")
    if setting.get("arrival") == "happy-ssb" and dataset not in SSB_KNOWN:
        raise BenchError(f"split {setting['protocol']} (setting.arrival=happy-ssb) labels a dataset's SSB known "
                         f"classes; bench has them for {', '.join(sorted(SSB_KNOWN))}, not {dataset}")


def _check_backbone(name: str) -> None:
    from bench.registries.catalogue import backbone_names

    if name.split(":", 1)[0] not in backbone_names():
        raise unknown("backbone", name, [*backbone_names(), "timm:<model name>"])

"""Run specs and grids: the unit of work and how a grid expands into it.

A grid (an mmengine config file in `registries/grids/`) names methods (optionally with a preset,
`Baseline:equations`), datasets, splits, seeds and a backbone. Expansion is plain data: a sorted list of
frozen `RunSpec`s whose canonical JSON hashes to the `run_id`.

A run's configuration has four sections, resolved in this order (later wins): the method's preset
(`registries/presets/<slug>.py`: `code`, the default, or a variant such as `equations`, with its
per-dataset/split `overrides`; a preset may also set `features` or `backbone` keys, as every `code`
preset sets `features.policy`), the
grid's `cfg`, then `--cfg-options section.key=value` from the command line. Every value is then
checked (`bench.validate`) before anything runs:

- `method`: the method's hyper-parameters (valid keys: those of its `equations` dict, which lists them all);
- `dataset`: options of the dataset reader (e.g. `num_classes` for `synthetic`);
- `backbone`: `pretrained`, `kwargs` passed to the model factory, `batch_size` for extraction;
- `features`: `mode` (`bank`: V stored augmented views per training image, shared by every run;
  `exact`: fresh views through the backbone every epoch), `views` (V), `bank_seed` (the seed of the
  stored views, shared across run seeds), `batch_size` for extraction and `policy` (`paper`: the
  paper's SimCLR-like views; `code`: the authors' per-dataset policies of docs/methods.md#views);
- `precision`: `tails` (`fp32` or `bf16`: what the trained blocks of tail methods compute in on CUDA).
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from mmengine.config import Config

from bench.errors import BenchError, first_line, unknown
from bench.runs_on import RunsOn

SPLITS: dict[str, int] = {"2-step": 2, "5-step": 5, "10-step": 10}
# How `bench report` lays out a block's table (bench/reporting/layouts.py builds each); named here so
# that reading a grid checks the name without importing the report's plotting stack.
LAYOUTS: dict[str, str] = {"comparison": "Tab. 5: one row per method", "references": "Tab. 2: references first",
                           "ablation": "Tab. 3: rows (a)-(d), CosNorm and KTRFR marks",
                           "backbones": "Tab. 4: one row per backbone",
                           "baselines_last": "the appendix's CaSSLe table: compared methods, a rule, the baselines"}

FEATURE_MODES = ("bank", "exact")  # features.mode
POLICY_PRESETS = ("paper", "code")  # features.policy: the paper's views or the authors' per-dataset ones
TOKEN_SOURCES = ("live", "bank")  # features.tokens: the prefix run on fresh views every epoch, or a token bank
# precision.tails: what the trained blocks compute in on CUDA (`bench.features.autocast_for`): fp32, as the
# authors trained, or bf16 autocast (faster). The frozen prefix and feature extraction run in bf16 on CUDA.
PRECISIONS = ("fp32", "bf16")
SECTION_CHOICES: dict[str, tuple[str, ...]] = {"features.mode": FEATURE_MODES, "features.policy": POLICY_PRESETS,
                                               "features.tokens": TOKEN_SOURCES,
                                               "features.token_dtype": ("float16", "float8"),
                                               "precision.tails": PRECISIONS}
DEFAULT_SECTIONS: dict[str, dict[str, Any]] = {
    "dataset": {},
    "backbone": {"pretrained": True, "kwargs": {}, "batch_size": 256},
    "features": {"mode": "bank", "views": 8, "bank_seed": 0, "batch_size": 512, "policy": "paper",
                 "tokens": "live", "token_dtype": "float16"},
    # None: the dataset's canonical class order (the paper's); N: the classes permuted with seed N
    # before they are cut into tasks (a protocol axis: results over several orders)
    "split": {"class_order_seed": None},
    "precision": {"tails": "fp32"},
    # "incd" (the paper's setting) or "mixed", whose split names its protocol (`bench.settings`): a mixed
    # run's section then holds the protocol's counts, the seed of its draw and how K is known
    "setting": {"name": "incd"},
}
# Keys added after runs were recorded: at these values they are left out of the run id, so that
# the runs finished before them keep their ids (and stay done).
LATER_KEYS: dict[tuple[str, str], Any] = {("features", "tokens"): "live", ("features", "token_dtype"): "float16",
                                          ("split", "class_order_seed"): None,
                                          # on CUDA, tails ran in bf16 before this key (fp32 on the CPU)
                                          ("precision", "tails"): "fp32", ("setting", "name"): "incd",
                                          ("setting", "val_fraction"): 0.1, ("setting", "manifest_sha256"): ""}


# Sections a preset may set besides the method's own keys (a `code` preset sets `features.policy`).
PRESET_SECTIONS = ("features", "backbone")
# The paper's tables were produced by the authors' code, so the configuration that reproduces them is
# the default: `code`. `equations` is the variant that follows the paper's text (its Eq. 1 summed over
# the two views, its stated λ and weight decay); every other preset (`no_cosnorm`, `sinkhorn`) is a
# change to `code`. A preset file writes `equations` in full (it names every key) and the others as
# changes: `code` over `equations`, a variant over `code`.
DEFAULT_PRESET, EQUATIONS = "code", "equations"


def method_label(method: str, preset: str) -> str:
    """How a run's method is shown: the method, with its preset in brackets unless it is the default."""
    return method if preset == DEFAULT_PRESET else f"{method} [{preset}]"


def features_protocol(config: Mapping[str, Any], runs_on: RunsOn = RunsOn()) -> str:
    """How a run's training views were computed, as reports state it: `bank V=8` (V stored views per
    training image, drawn from again every epoch), `exact` (fresh views every epoch, the paper's
    protocol), `plain features` (a method that trains on no views, K-means), or for methods that
    train tails `images, fresh views` (with how their head warm-up on frozen features drew its views)."""
    feat = config["features"]
    if not runs_on.trains_on_views:
        return "plain features"
    views = f"bank V={feat['views']}" if feat["mode"] == "bank" else "exact"
    if runs_on.inputs != "tokens":
        return views
    tokens = (f"token bank V={feat['views']}" if feat["mode"] == "bank" and feat.get("tokens") == "bank"
              else "images, fresh views")
    return tokens + (f"; head warm-up {views}" if runs_on.warms_up_on_features else "")


@dataclass(frozen=True)
class RunSpec:
    """One (method, preset, dataset, split, backbone, seed) job with its resolved config.

    `location` holds where things are (data root, device): recorded in `spec.json` but kept out
    of the run id, so moving a dataset or changing GPU does not invalidate finished runs.
    """

    method: str
    preset: str
    dataset: str
    split: str
    n_steps: int
    backbone: str
    seed: int
    config: Mapping[str, Any]
    location: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        return method_label(self.method, self.preset)

    def identity(self) -> dict[str, Any]:
        """What the run id hashes: everything but where things are (location, dataset.root)."""
        ident = asdict(self)
        ident.pop("location")
        ident["config"] = {**ident["config"], "dataset": {k: v for k, v in ident["config"]["dataset"].items()
                                                          if k != "root"}}
        if "setting" in ident["config"]:  # a manifest file is known by its sha256, wherever it lies
            ident["config"]["setting"] = {k: v for k, v in ident["config"]["setting"].items() if k != "manifest_file"}
        for (section, key), value in LATER_KEYS.items():
            if section in ident["config"] and ident["config"][section].get(key, value) == value:
                ident["config"][section] = {k: v for k, v in ident["config"][section].items() if k != key}
                if not ident["config"][section]:  # a section that did not exist then
                    del ident["config"][section]
        return ident

    @property
    def run_id(self) -> str:
        canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "run_id": self.run_id, "label": self.label}, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunSpec":
        data = json.loads(text)
        data.pop("run_id", None)
        data.pop("label", None)
        return cls(**data)

    @property
    def split_label(self) -> str:
        """The split as results show it: `5-step`, or `5-step · order 3` for a permuted class order."""
        order = self.config.get("split", {}).get("class_order_seed")
        split = self.split
        if self.config.get("setting", {}).get("name", "incd") != "incd":
            from bench.settings import describe

            split = describe(self.split, self.config)
        return split if order is None else f"{split} · order {order}"

    def describe(self) -> str:
        return f"{self.label} · {self.dataset} · {self.split_label} · {self.backbone} · seed {self.seed}"


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

    def contains(self, spec: "RunSpec") -> bool:
        return (self._entry(spec) in self.methods and spec.dataset in self.datasets and spec.split in self.splits
                and spec.backbone in self.backbones)

    def position(self, spec: "RunSpec") -> tuple[int, int]:
        """Where a spec of this block comes in its table: the block lists methods in the paper's order
        (Tab. 2: K-means first), which the grid-wide, name-sorted order of specs loses."""
        return self.methods.index(self._entry(spec)), self.backbones.index(spec.backbone)


@dataclass(frozen=True)
class Grid:
    name: str
    blocks: tuple[Block, ...]
    seeds: tuple[int, ...]
    cfg: Mapping[str, Any]
    dataset_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

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


def n_steps_of(split: str) -> int:
    """A split's steps: a class-iNCD split's, or a mixed protocol's labelled stage and its unlabelled ones."""
    from bench.settings import MIXED_SPLITS

    if split in MIXED_SPLITS:
        return MIXED_SPLITS[split].stages + 1
    if split not in SPLITS:
        raise unknown("split", split, [*SPLITS, *MIXED_SPLITS])
    return SPLITS[split]


def grid_names() -> list[str]:
    """Bench's grids and the plugins' (`bench.plugins`)."""
    from bench.plugins import config_files

    return sorted(config_files("grids"))


def load_grid(name: str) -> Grid:
    from bench.plugins import config_files

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
    return Grid(name=name, blocks=tuple(blocks), seeds=tuple(int(s) for s in cfg["seeds"]),
                cfg=cfg.get("cfg", {}), dataset_options=cfg.get("dataset_options", {}))


def split_method(entry: str) -> tuple[str, str]:
    """`Baseline` → (Baseline, code); `Baseline:equations` → (Baseline, equations), the name as written."""
    name, _, preset = entry.partition(":")
    return name, preset or DEFAULT_PRESET


def parse_method(entry: str) -> tuple[str, str]:
    """`Baseline:equations` → (Baseline, equations), `baseline-pp` → (Baseline++, code): the registered
    name (from a name or a slug, `resolve_method`) and the preset, checked against the method's preset
    file by `load_preset`."""
    name, preset = split_method(entry)
    return resolve_method(name), preset


def method_slug(name: str) -> str:
    """A method's name as a shell takes it unquoted: `Joint (frozen)` → `joint-frozen`, `Baseline++` →
    `baseline-pp`, `K-means` → `k-means`. One rule for bench's methods and plugins' alike: lowercase,
    `++` → `-pp`, every other run of characters that are not letters or digits → `-`, none at either end."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("++", "-pp")).strip("-")


def method_slugs() -> dict[str, str]:
    """slug → name of every registered method (the catalogue's and any registered since, e.g. by a
    plugin). Two methods with one slug could not both be selected by it: an error naming both."""
    from bench.registries import METHODS
    from bench.registries.catalogue import method_names

    slugs: dict[str, str] = {}
    for name in dict.fromkeys([*method_names(), *METHODS.module_dict]):
        slug = method_slug(name)
        if slugs.setdefault(slug, name) != name:
            raise BenchError(f"methods {slugs[slug]!r} and {name!r} have the same slug {slug!r} "
                             f"(bench.spec.method_slug); rename one of them")
    return slugs


def resolve_method(name: str) -> str:
    """The registered method `name` means: itself, or the method whose slug it is (any spelling with
    the same slug: `joint-frozen`, `Joint-Frozen`). The one place names and slugs are resolved."""
    slugs = method_slugs()
    if name in slugs.values():
        return name
    if method_slug(name) in slugs:
        return slugs[method_slug(name)]
    raise unknown_method(name, slugs)


def unknown_method(name: str, slugs: Mapping[str, str] | None = None) -> BenchError:
    """`unknown method 'basline'; known: Baseline, …; slugs: baseline, …`."""
    slugs = method_slugs() if slugs is None else slugs
    return BenchError(f"{unknown('method', name, slugs.values())}; slugs: {', '.join(sorted(slugs))}")


def preset_names(cfg: Mapping[str, Any]) -> list[str]:
    """Every top-level dict of a preset file except `overrides` is a preset (`equations` and `code` are
    required), the default first."""
    names = [k for k, v in cfg.items() if isinstance(v, Mapping) and k != "overrides" and not k.startswith("_")]
    return sorted(names, key=lambda k: (k != DEFAULT_PRESET, k != EQUATIONS, k))


def read_config_file(path: str, what: str) -> dict[str, Any]:
    """An mmengine config file (a grid, a preset file, a SLURM profile) as a dict; one that does not
    parse, or whose `_base_` is missing, is a one-line error naming the file."""
    try:
        return Config.fromfile(path).to_dict()
    except Exception as err:  # mmengine raises many types: a syntax error, a missing base, a bad key
        raise BenchError(f"{what} {path}: {type(err).__name__}: {first_line(err)}") from None


@functools.lru_cache(maxsize=None)
def _read_config(path: str) -> dict[str, Any]:
    return read_config_file(path, "preset file")


def _preset(method: str, preset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The preset's dict and its per-dataset/split overrides: `equations` as written; `code` as its
    changes to `equations`; any other preset as its changes to `code`, its overrides merged over
    `code`'s (a variant of the authors' runs keeps their per-dataset schedules)."""
    from bench.registries.catalogue import method_info

    info = method_info(method)
    if info is None:
        raise unknown_method(method)
    cfg = copy.deepcopy(_read_config(str(info.preset_path())))
    if preset not in preset_names(cfg):
        raise unknown(f"preset of {method}", preset, preset_names(cfg))
    layers = {EQUATIONS: [EQUATIONS], DEFAULT_PRESET: [EQUATIONS, DEFAULT_PRESET]}.get(
        preset, [EQUATIONS, DEFAULT_PRESET, preset])
    params: dict[str, Any] = {}
    for layer in layers:
        params.update(cfg[layer])
    overrides = cfg.get("overrides", {})
    merged: dict[str, Any] = {}
    for layer in layers[1:] if preset != EQUATIONS else layers:  # `equations` has its own, from no other
        merged = deep_merge(merged, overrides.get(layer, {}))
    return params, merged


def load_preset(method: str, preset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The method's hyper-parameters for a preset and its per-dataset/split overrides (without the
    other sections a preset may set: `preset_sections`)."""
    params, overrides = _preset(method, preset)
    return {k: v for k, v in params.items() if k not in PRESET_SECTIONS}, overrides


def preset_sections(method: str, preset: str) -> dict[str, dict[str, Any]]:
    """The run-config sections other than `method` that a preset sets, e.g. the `code` presets'
    `features=dict(policy="code")`: what the authors ran is more than the method's keys."""
    params, _ = _preset(method, preset)
    return {k: dict(v) for k, v in params.items() if k in PRESET_SECTIONS}


def deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_options(config: dict[str, Any], options: Mapping[str, Any], *, allow_new: Sequence[str] = ()) -> dict[str, Any]:
    """Apply dotted `section.key=value` options, refusing keys the section does not know.

    Sections named in `allow_new` take any key (dataset reader options are checked by the reader).
    """
    out = copy.deepcopy(config)
    for dotted, value in options.items():
        parts = dotted.split(".")
        section = parts[0]
        if section not in out:
            raise BenchError(f"bad --cfg-options key {dotted!r}: unknown section {section!r}; valid sections: {', '.join(sorted(out))}")
        if len(parts) < 2:
            raise BenchError(f"bad --cfg-options key {dotted!r}: use section.key=value, e.g. method.epochs=10")
        node = out[section]
        for i, part in enumerate(parts[1:], start=1):
            last = i == len(parts) - 1
            free = section in allow_new or (section == "backbone" and parts[1] == "kwargs")
            if part not in node and not free:
                valid = ", ".join(f"{'.'.join(parts[:i])}.{k}" for k in sorted(node))
                raise BenchError(f"bad --cfg-options key {dotted!r}: {part!r} is not a known key; valid keys: {valid}")
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise BenchError(f"bad --cfg-options key {dotted!r}: {'.'.join(parts[:i + 1])} is not a section")
    return out


def _matching_overrides(overrides: Mapping[str, Any], dataset: str, split: str) -> dict[str, Any]:
    """Preset overrides keyed `dataset`, `dataset/split` or `*/split` (most specific last)."""
    merged: dict[str, Any] = {}
    for key in (f"*/{split}", dataset, f"{dataset}/{split}"):
        merged.update(overrides.get(key, {}))
    return merged


def resolve_config(method: str, preset: str, dataset: str, split: str,
                   grid_cfg: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The run's config. A `method.<key>` setting (from the grid or the command line) applies to
    every method whose preset has that key and is skipped by the others, so `method.epochs=5`
    shortens every trained method of a grid and leaves K-means alone; `expand` refuses a key that
    no selected method knows."""
    params, overrides = load_preset(method, preset)
    params.update(_matching_overrides(overrides, dataset, split))
    config = {"method": params, **copy.deepcopy(DEFAULT_SECTIONS)}
    from bench.settings import MIXED_SPLITS, mixed_setting

    if split in MIXED_SPLITS:  # the split names the setting: its section starts from the protocol's defaults
        config["setting"] = mixed_setting(split)
    sections = _flatten(preset_sections(method, preset))
    for source in (sections, _flatten(grid_cfg), options):
        relevant = {k: v for k, v in source.items()
                    if not (k.startswith("method.") and k.split(".")[1] not in params)}
        config = apply_options(config, relevant, allow_new=("dataset",))
    if split in MIXED_SPLITS:
        from bench.settings import with_manifest_file

        config["setting"] = with_manifest_file(config["setting"])
    return config


def _check_method_keys(options: Mapping[str, Any], methods: Sequence[tuple[str, str]]) -> None:
    known: set[str] = set()
    for method, preset in methods:
        known.update(load_preset(method, preset)[0])
    for key in options:
        parts = key.split(".")
        if parts[0] == "method" and (len(parts) < 2 or parts[1] not in known):
            valid = ", ".join(f"method.{k}" for k in sorted(known))
            raise BenchError(f"bad --cfg-options key {key!r}: no selected method has it; valid keys: {valid}")


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and not dotted.startswith("backbone.kwargs."):
            flat.update(_flatten(value, dotted + "."))  # an empty section sets nothing
        else:
            flat[dotted] = value
    return flat


_SPLIT_RE = re.compile(r"^\d+-step$")


def expand(grid: Grid, *, methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
           splits: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
           backbones: Sequence[str] | None = None, options: Mapping[str, Any] | None = None,
           location: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """Every (method, dataset, split, backbone, seed) of the grid, filtered by the CLI's selections.

    A selection may name entries outside the grid (e.g. `--datasets synthetic` on the demo grid):
    the selection replaces that axis.
    """
    from bench.data import reader_class
    from bench.registries import DATASETS

    options = dict(options or {})
    selected = [parse_method(entry) for entry in methods or grid.methods]  # unknown names refused here
    _check_method_keys(options, selected)
    specs: dict[str, RunSpec] = {}
    for block in grid.blocks:
        block_methods = selected if methods else [parse_method(m) for m in block.methods]
        for method, preset in block_methods:
            for dataset in datasets or block.datasets:
                if reader_class(dataset) is None:
                    raise unknown("dataset", dataset, DATASETS.module_dict)
                for split in splits or block.splits:
                    n_steps = n_steps_of(split)
                    for backbone in backbones or block.backbones:
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


def check_config(method: str, dataset: str, config: Mapping[str, Any], n_steps: int) -> None:
    """Every value of a resolved run config, before anything runs (see `bench.validate`): the method's
    keys typed by its `equations` dict (every key), the shared sections by `DEFAULT_SECTIONS`, the dataset's by its reader."""
    from bench.data import reader_class
    from bench.validate import check_dataset_options, check_method, check_sections
    from bench.registries.catalogue import method_info

    info = method_info(method)
    check_method(config["method"], load_preset(method, EQUATIONS)[0], info.hparam_choices, n_steps)
    check_sections(config, DEFAULT_SECTIONS, SECTION_CHOICES)
    _check_setting(method, config, info.runs_on)
    check_dataset_options(reader_class(dataset), config["dataset"])


def _check_setting(method: str, config: Mapping[str, Any], runs_on: RunsOn) -> None:
    """The setting follows the split (a mixed protocol's split, or a class-iNCD one), and the method
    must declare it (`RunsOn.settings`)."""
    from bench.settings import MIXED_SPLITS, SETTINGS, check_setting

    setting = config.get("setting", {})
    name = setting.get("name", "incd")
    mixed_split = setting.get("protocol") in MIXED_SPLITS
    if name not in SETTINGS:
        raise unknown("setting", name, SETTINGS)
    if (name == "mixed") != mixed_split:
        raise BenchError(f"setting {name!r} does not follow from the split: the split names the setting "
                         f"(mixed protocols: {', '.join(MIXED_SPLITS)}; class-iNCD: {', '.join(SPLITS)})")
    if name not in runs_on.settings:
        raise BenchError(f"method {method!r} cannot run the {name!r} setting ({SETTINGS[name]}); it runs: "
                         f"{', '.join(runs_on.settings)}")
    if name == "mixed":
        check_setting(setting)


def _check_backbone(name: str) -> None:
    from bench.registries.catalogue import backbone_names

    if name.split(":", 1)[0] not in backbone_names():
        raise unknown("backbone", name, [*backbone_names(), "timm:<model name>"])


def first_trainable_block(depth: int, trainable: int | str) -> int:
    """Index of the first trainable block of a `depth`-block ViT, from a count of last blocks or a
    block name ("blocks.11")."""
    names = [f"blocks.{i}" for i in range(depth)]
    if isinstance(trainable, str):
        if trainable not in names:
            raise ValueError(f"unknown block {trainable!r} to unfreeze from; this backbone has {names[0]} .. "
                             f"{names[-1]}")
        return names.index(trainable)
    if not 1 <= int(trainable) <= depth:
        raise ValueError(f"cannot unfreeze the last {trainable} blocks of a {depth}-block backbone; choose 1..{depth} "
                         f"or a block name ({names[0]} .. {names[-1]})")
    return depth - int(trainable)

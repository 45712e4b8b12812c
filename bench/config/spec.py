"""The unit of work: `RunSpec`, one (method, preset, dataset, split, backbone, seed) run with its resolved config,
whose canonical JSON hashes to the `run_id`; the config's sections and their defaults; how methods are named
(names, slugs, labels).

A run's configuration has these sections (resolved by `bench.config.presets`, checked by `bench.config.validate`):

- `method`: the method's hyper-parameters (valid keys: those of its `equations` dict, which lists them all);
- `dataset`: options of the dataset reader (e.g. `num_classes` for `synthetic`);
- `backbone`: `pretrained`, `kwargs` passed to the model factory, `batch_size` for extraction;
- `features`: `mode` (`bank`: V stored augmented views per training image, shared by every run;
  `exact`: fresh views through the backbone every epoch), `views` (V), `bank_seed` (the seed of the
  stored views, shared across run seeds), `batch_size` for extraction and `policy` (`paper`: the
  paper's SimCLR-like views; `code`: the authors' per-dataset policies of docs/methods.md#views);
- `precision`: `tails` (`fp32` or `bf16`: what the trained blocks of tail methods compute in on CUDA);
- `split` (`class_order_seed`) and `setting` (class-iNCD or the mixed setting, `bench.splits.settings`).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from mmengine.config import Config

from bench.core.runs_on import RunsOn
from bench.errors import BenchError, first_line, unknown


SPLITS: dict[str, int] = {"2-step": 2, "5-step": 5, "10-step": 10}


FEATURE_MODES = ("bank", "exact")  # features.mode


POLICY_PRESETS = ("paper", "code")  # features.policy: the paper's views or the authors' per-dataset ones


TOKEN_SOURCES = ("live", "bank")  # features.tokens: the prefix run on fresh views every epoch, or a token bank


# precision.tails: what the trained blocks compute in on CUDA (`bench.features.precision.autocast_for`): fp32, as the
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
    # "incd" (the paper's setting) or "mixed", whose split names its protocol (`bench.splits.settings`): a mixed
    # run's section then holds the protocol's counts, the seed of its draw and how K is known
    "setting": {"name": "incd"},
    # the tuning protocol (docs/settings.md#tuning): `holdout` > 0 holds that fraction of each class's training images
    # out (seeded with `holdout_seed`) and scores them in place of the test set, which the run then never reads
    # `study` names the `bench tune` study whose best values the run holds (its protocol and trial budget beside):
    # a run tuned by bench, shown apart from the runs of the preset's values (`split_label`)
    "tuning": {"holdout": 0.0, "holdout_seed": 0, "study": "", "study_protocol": "", "study_trials": 0},
}


# Keys added after runs were recorded: at these values they are left out of the run id, so that
# the runs finished before them keep their ids (and stay done).
LATER_KEYS: dict[tuple[str, str], Any] = {("features", "tokens"): "live", ("features", "token_dtype"): "float16",
                                          ("split", "class_order_seed"): None,
                                          # on CUDA, tails ran in bf16 before this key (fp32 on the CPU)
                                          ("precision", "tails"): "fp32", ("setting", "name"): "incd",
                                          ("setting", "val_fraction"): 0.1, ("setting", "manifest_sha256"): "",
                                          ("setting", "arrival"): "canonical", ("setting", "evaluation"): "inductive", ("setting", "draw"): "bench",
                                          # a mixed run on CUB or Herbarium held their val partition out before
                                          ("setting", "whole_train"): False,
                                          # a domain-shifted stream: every run before it had none
                                          ("setting", "domains"): [],
                                          # continual SimGCD's and Happy's labelled step took ε before this key
                                          ("method", "labelled_memax_weight"): None,
                                          # Happy++'s LoRA switch (its code preset's False: those runs keep their ids)
                                          ("method", "lora_applied"): False,
                                          # the tuning protocol: every run before it scored the test set
                                          ("tuning", "holdout"): 0.0, ("tuning", "holdout_seed"): 0,
                                          # a run tuned by a bench study: every run before it held the preset's values
                                          ("tuning", "study"): "", ("tuning", "study_protocol"): "",
                                          ("tuning", "study_trials"): 0}


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


DEFAULT_RUNS_ON = RunsOn()  # what a method that declares nothing runs on (frozen: one shared default)


def features_protocol(config: Mapping[str, Any], runs_on: RunsOn = DEFAULT_RUNS_ON) -> str:
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
        """The split as results show it: `5-step`, or `5-step · order 3` for a permuted class order, `5-step ·
        validation 0.2` for the tuning protocol's held-out training images in place of the test set, `5-step · tuned
        (validation 0.2, 20 trials)` for a run holding a bench study's best values."""
        order = self.config.get("split", {}).get("class_order_seed")
        split = self.split
        if self.config.get("setting", {}).get("name", "incd") != "incd":
            from bench.splits.settings import describe

            split = describe(self.split, self.config)
        holdout = self.config.get("tuning", {}).get("holdout")
        if holdout:  # scored on held-out training images (the tuning protocol): never beside test-set numbers
            split = f"{split} · validation {holdout:g}"
        study = self.config.get("tuning", {})
        if study.get("study"):  # tuned by a bench study: never averaged with runs tuned otherwise
            split = f"{split} · tuned ({study.get('study_protocol')}, {study.get('study_trials')} trials)"
        return split if order is None else f"{split} · order {order}"

    def describe(self) -> str:
        return f"{self.label} · {self.dataset} · {self.split_label} · {self.backbone} · seed {self.seed}"


def n_steps_of(split: str) -> int:
    """A split's steps: a class-iNCD split's, or a mixed protocol's labelled step and its unlabelled ones."""
    from bench.splits.settings import MIXED_SPLITS

    if split in MIXED_SPLITS:
        return MIXED_SPLITS[split].steps + 1
    if split not in SPLITS:
        raise unknown("split", split, [*SPLITS, *MIXED_SPLITS])
    return SPLITS[split]


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
                             f"(bench.config.spec.method_slug); rename one of them")
    return slugs


def resolve_method(name: str) -> str:
    """The registered method `name` means: itself, or the method whose slug it is, in any case (`joint-frozen`,
    `Joint-Frozen`). Nothing else: `Baseline+` is not Baseline, though a slug rule would map both to one slug.
    The one place names and slugs are resolved."""
    slugs = method_slugs()
    if name in slugs.values():
        return name
    if name.lower() in slugs:
        return slugs[name.lower()]
    raise unknown_method(name, slugs)


def unknown_method(name: str, slugs: Mapping[str, str] | None = None) -> BenchError:
    """`unknown method 'basline'; known: Baseline, …; slugs: baseline, …`."""
    slugs = method_slugs() if slugs is None else slugs
    return BenchError(f"{unknown('method', name, slugs.values(), aliases=slugs)}; slugs: {', '.join(sorted(slugs))}")


def read_config_file(path: str, what: str) -> dict[str, Any]:
    """An mmengine config file (a grid, a preset file, a SLURM profile) as a dict; one that does not
    parse, or whose `_base_` is missing, is a one-line error naming the file."""
    try:
        return Config.fromfile(path).to_dict()
    except Exception as err:  # mmengine raises many types: a syntax error, a missing base, a bad key
        raise BenchError(f"{what} {path}: {type(err).__name__}: {first_line(err)}") from None


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

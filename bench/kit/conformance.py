"""The conformance kit: what `bench check method NAME` runs, and what bench's own methods pass.

A method is a fair entry in the benchmark only if it plays by the protocol, and most ways of breaking
the protocol change no error message, only the numbers. So the kit runs the method through bench's
real runner on tiny data (the smoke grid's synthetic images and tiny ViT, one epoch) and checks, one
line each:

- `presets validate`: every preset of its preset file (`equations` and `code` required) resolves and
  passes bench's config validation (`bench.config.grids.check_config`), as `bench run` would check it: with
  its own values, with each per-dataset/split override (for the datasets registered now) and as the
  kit's tiny run;
- `runs on the smoke grid (features|tokens)`: a run finishes on what the method declares it reads;
- `no labels reach it`: no Step it is given carries a label (a `labels` field with a class in it);
- `no earlier step's data reach it`: `past` and `past_tokens` are empty, unless the method declares
  itself a reference (`runs_on.sees_past_steps`);
- `its outputs ignore the training labels`: a run with the training labels permuted within each
  step's classes (same images, same order) gives exactly the same predictions;
- `state_dict round-trips`: after every step, a fresh instance given `load_state_dict(state_dict())`
  answers `logits` and every `task_logits` exactly as the trained one;
- `earlier task heads answer as at their own step`: for a method that declares `runs_on.frozen_task_heads`
  (class-iNCD's evaluation then reuses each task head's answer from its own step), after every step each
  earlier task's head answers the probe it was asked after its own step exactly as then; a method that does
  not declare it passes (its heads are read again at every step);
- `a killed run resumes to identical metrics`: killed as step 2 starts, resumed from the runner's
  checkpoint, the run's metrics equal the uninterrupted run's;
- `the same seed gives the same numbers`: a second run from scratch gives identical metrics and predictions.

Every check after `presets validate` is made once per setting the method declares (`runs_on.settings`), each line
labelled with it (`[incd]`, `[mixed]`): a method that runs both is run in both, so that a branch only one setting
takes (the mixed setting's labelled step, `step.labels`) is exercised. class-iNCD's runs are on `SPLIT`; the mixed
setting's on `MIXED_SPLIT`, where the first step's labels are the protocol's input, so `no labels reach it` means
none after that step, the permuted-labels run is not applicable (permuting labels would move images between the
protocol's steps), and no task's own head is asked for (the setting reads `logits` alone).

Each run happens in its own results directory under the kit's work directory; the feature bank is
shared by all of them (built once).
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from bench.errors import BenchError, first_line
from bench.config.spec import RunSpec
from bench.protocol.hooks import MethodHooks
from bench.kit.probes import Killed, StepSpy, patched, relabelled

# The run the kit makes: the smoke grid on even less data, two steps, one epoch of everything.
GRID, DATASET, SPLIT, SEED = "smoke", "synthetic", "2-step", 0
TINY_OPTIONS: dict[str, Any] = {"features.views": 2, "dataset.num_classes": 4, "dataset.image_size": 8,
                                "dataset.train_per_class": 8, "dataset.test_per_class": 4}
# every count of epochs (or steps: VB-CGCD's; meta-training rounds and outer steps: MetaGCD's) a built-in preset
# has: 1 is the least a run validates
SHORT_KEYS = ("epochs", "ktrfr_epochs", "joint_epochs", "stage1_epochs", "stage2_epochs", "warmup_epochs",
              "ssl_epochs", "labelled_epochs", "svi_iters", "offline_epochs", "inner_epochs", "meta_tasks", "outer_steps")
# widths the kit narrows where a preset has them: DINO's 65,536-way head (PromptCCD's, MetaGCD's) is most of a tiny
# run's time and none of what the kit checks
NARROW: dict[str, int] = {"head_dim": 64}
# the mixed setting's run: PromptCCD's protocol (a labelled step, then 3 steps: the fewest of bench's mixed
# protocols) on 10 classes
MIXED_SPLIT, MIXED_OPTIONS = "promptccd-3-stage", {"dataset.num_classes": 10, "dataset.train_per_class": 6}
SETTING_SPLITS = {"incd": SPLIT, "mixed": MIXED_SPLIT}  # the split the kit runs each setting on
KILLED_AT = 1  # the kit kills its run as this step (0-based) starts: one step done, one to resume


@dataclass(frozen=True)
class Check:
    """The outcome of one check: `PASS title` or `FAIL title: reason` (one line), the title naming the setting it
    was made in (`[mixed] no labels reach it ...`) for a check that runs once per setting."""

    name: str
    ok: bool
    reason: str = ""
    setting: str = ""  # "" for a check made once (presets validate)

    @property
    def title(self) -> str:
        return f"[{self.setting}] {self.name}" if self.setting else self.name

    def line(self) -> str:
        return f"PASS {self.title}" if self.ok else f"FAIL {self.title}: {self.reason}"


# -- the pieces of the runner the kit hooks into: the run itself, and where its dataset is read --

def _runner() -> Any:
    import bench.protocol.runner

    return bench.protocol.runner


def _planning() -> Any:
    import bench.protocol.planning

    return bench.protocol.planning


# -- the kit --

def short_options(method: str, split: str = SPLIT) -> dict[str, Any]:
    """The kit's tiny run for `method` on `split`: tiny data, and one epoch for every epoch count its preset has
    (a key the preset lacks is left out: `bench.config.grids.expand` refuses keys no method has)."""
    from bench.config.spec import EQUATIONS
    from bench.config.presets import load_preset

    params, _ = load_preset(method, EQUATIONS)
    mixed = MIXED_OPTIONS if split == MIXED_SPLIT else {}
    return {**TINY_OPTIONS, **mixed, **{f"method.{key}": 1 for key in SHORT_KEYS if key in params},
            **{f"method.{key}": width for key, width in NARROW.items() if key in params}}


def settings_of(method: str) -> list[str]:
    """The settings the kit runs `method` in: every one it declares (`runs_on.settings`), in bench's order."""
    from bench.registries.catalogue import known_method

    declared = known_method(method).runs_on.settings
    return [setting for setting in SETTING_SPLITS if setting in declared]


def _specs(method: str, preset: str | None = None, options: Mapping[str, Any] | None = None,
           location: Mapping[str, Any] | None = None, dataset: str = DATASET, split: str = SPLIT) -> list[Any]:
    from bench.config.grids import expand, load_grid

    entry = method if preset is None else f"{method}:{preset}"
    return expand(load_grid(GRID), methods=[entry], datasets=[dataset], splits=[split], seeds=[SEED],
                  options=dict(options or {}), location=dict(location or {}))


def _override_targets(cfg: Mapping[str, Any], presets: list[str], default: str = SPLIT) -> list[tuple[str, str, str]]:
    """(preset, dataset, split) of every per-dataset/split override a preset file has (keys `dataset`,
    `dataset/split` or `*/split`), for the datasets registered now (another's reader may not be loaded)."""
    from bench.data import reader_class
    from bench.splits.settings import MIXED_SPLITS
    from bench.config.spec import SPLITS

    targets = []
    for preset, by_key in cfg.get("overrides", {}).items():
        for key in by_key if preset in presets else ():
            dataset, _, split = key.partition("/")
            dataset = DATASET if dataset == "*" else dataset
            if reader_class(dataset) is not None and (split or default) in (*SPLITS, *MIXED_SPLITS):
                targets.append((preset, dataset, split or default))
    return targets


def check_presets(method: str) -> Check:
    """Every preset of the method's file resolves and validates on the kit's run."""
    from bench.registries.catalogue import known_method
    from bench.config.grids import check_config
    from bench.config.presets import _read_config, preset_names, resolve_config
    from bench.config.spec import DEFAULT_PRESET, EQUATIONS, n_steps_of

    name = "presets validate"
    try:
        info = known_method(method)
        path = info.preset_path()
        if not path.is_file():
            return Check(name, False, f"no preset file {path}")
        presets = preset_names(_read_config(str(path)))
        missing = [p for p in (EQUATIONS, DEFAULT_PRESET) if p not in presets]
        if missing:
            return Check(name, False, f"{path.name} lacks {' and '.join(missing)} (required); it has: "
                                      f"{', '.join(presets) or 'no preset'}")
        own = [SETTING_SPLITS[setting] for setting in settings_of(method)]  # the kit's run in every setting
        targets = [(preset, DATASET, split) for preset in presets for split in own]
        # a per-dataset/split override is validated where it applies
        for split in own:
            targets += _override_targets(_read_config(str(path)), presets, split)
        for preset, dataset, split in dict.fromkeys(targets):
            try:  # the preset's own values (a grid's `cfg` would hide them), then as the kit runs it
                config = resolve_config(method, preset, dataset, split, {}, {})
                check_config(method, dataset, config, n_steps_of(split))
                _specs(method, preset, short_options(method, split) if dataset == DATASET else {}, dataset=dataset,
                       split=split)
            except BenchError as err:
                where = "" if (dataset, split) == (DATASET, own[0]) and len(own) == 1 else f" on {dataset} {split}"
                return Check(name, False, f"preset {preset!r}{where}: {err}")
        return Check(name, True)
    except Exception as err:
        return Check(name, False, first_line(err))


@dataclass
class _Run:
    """One run of the kit: its directory, what the spy saw, and its error if it failed."""

    out: Path | None
    spy: StepSpy
    error: str = ""


def _run(spec: RunSpec, results: Path, cls: type[MethodHooks], setting: str, *, kill_at: int | None = None,
         relabel: bool = False) -> _Run:
    planning = _planning()
    spy = StepSpy(cls, setting, kill_at=kill_at)
    build = planning.build_dataset
    try:
        with spy.installed(), patched(planning, "build_dataset", relabelled(build, spec.n_steps) if relabel else build):
            return _Run(_runner().execute(spec, results), spy)
    except Killed:
        return _Run(None, spy, "killed")
    except Exception as err:
        return _Run(None, spy, first_line(err))


def _metrics(out: Path) -> Any:
    import pandas as pd

    from bench.runs.rundir import METRICS

    frame = pd.read_parquet(out / METRICS)
    return frame[["step", "group", "flavour", "metric", "value"]].reset_index(drop=True)


def _same_metrics(a: Path, b: Path) -> str:
    """"" when the two runs' metric rows are identical, else the first difference."""
    fa, fb = _metrics(a), _metrics(b)
    if len(fa) != len(fb) or not fa.drop(columns="value").equals(fb.drop(columns="value")):
        return f"different metric rows ({len(fa)} vs {len(fb)})"
    va, vb = fa["value"].to_numpy(), fb["value"].to_numpy()
    differ = ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
    if differ.any():
        row = fa[differ].iloc[0]
        return (f"step {row['step'] + 1} {row['group']} {row['flavour']} {row['metric']}: {va[differ][0]!r} vs "
                f"{vb[differ][0]!r} ({int(differ.sum())} value(s) differ)")
    return ""


def _same_predictions(a: Path, b: Path, how: str = "with the labels permuted") -> str:
    """"" when the two runs' stored predictions (what the method answered, not the labels) match; else which
    differ, `how` saying what the second run changed."""
    from bench.runs.predictions import PREDICTIONS, Keys, opened

    answers = (Keys.val_pred, Keys.unified, Keys.task_pred, Keys.refit_pred)  # the heads' argmax, not the labels
    with opened(a / PREDICTIONS) as pa, opened(b / PREDICTIONS) as pb:
        keys = sorted(k for k in pa if any(family.indices(k) is not None for family in answers))
        for key in keys:
            if key not in pb or not np.array_equal(pa[key], pb[key]):
                return f"its predictions {key} differ {how}"
    return ""


def _same_numbers(a: Path, b: Path) -> str:
    """"" when a second run gives the first's metrics and, where both stored them, its predictions: on the kit's few
    test images, answers drawn without the seed can match the first run's accuracies by chance, not its answers."""
    from bench.runs.predictions import PREDICTIONS

    reason = _same_metrics(a, b)
    if reason or not ((a / PREDICTIONS).exists() and (b / PREDICTIONS).exists()):
        return reason
    return _same_predictions(a, b, "on a second run")


# the checks made once per setting, after `runs on the smoke grid`, in the order they are printed
DEPENDENT = ["no labels reach it", "no earlier step's data reach it", "its outputs ignore the training labels",
             "state_dict round-trips", "earlier task heads answer as at their own step",
             "a killed run resumes to identical metrics", "the same seed gives the same numbers"]


def run_checks(method: str, workdir: Path | None = None, cache: Path | None = None) -> Iterator[Check]:
    """The kit on a registered method: one `Check` at a time, as each is decided, those after `presets validate`
    once per setting it declares. Its runs go under `workdir` (default: a temporary directory, removed after),
    the feature bank under `cache` (default: in `workdir`; a suite that checks many methods shares one)."""
    from bench.registries import METHODS, load_all
    from bench.config.spec import resolve_method

    load_all()
    method = resolve_method(method)  # a name or a slug; unknown: the error lists both
    cls = METHODS.get(method)
    presets = check_presets(method)
    yield presets
    settings = settings_of(method)
    smoke = f"runs on the smoke grid ({cls.runs_on.inputs})"
    if not presets.ok:
        for setting in settings:
            yield Check(smoke, False, "its presets do not validate", setting)
            yield from (Check(name, False, "not run: its presets do not validate", setting) for name in DEPENDENT)
        return
    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bench-check-")) if workdir is None else Path(workdir)
    try:
        for setting in settings:  # each setting's runs in their own folder; one feature bank for all of them
            yield from _setting_checks(method, cls, setting, work / setting, Path(cache or work / "cache"))
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _setting_checks(method: str, cls: type[MethodHooks], setting: str, work: Path, cache: Path) -> Iterator[Check]:
    """The checks of one setting, each labelled with it: its smoke run, then what that run and its reruns show."""
    def check(name: str, ok: bool, reason: str = "") -> Check:
        return Check(name, ok, reason, setting)

    mixed, split = setting == "mixed", SETTING_SPLITS[setting]
    # `cache_dir` is a location: the run ids stay the same
    (spec,) = _specs(method, options=short_options(method, split), location={"cache_dir": str(cache), "device": "cpu"},
                     split=split)
    first = _run(spec, work / "first", cls, setting)
    yield check(f"runs on the smoke grid ({cls.runs_on.inputs})", first.out is not None, first.error)
    if first.out is None:
        yield from (check(name, False, "not run: the smoke run failed") for name in DEPENDENT)
        return
    spy = first.spy
    if mixed:  # the labelled step's own labels are the protocol's
        given = [f for f in spy.label_fields if f != "step 1.labels"]
        yield check(DEPENDENT[0] + " after the labelled step", not given, f"labels in {', '.join(given)}")
    else:
        yield check(DEPENDENT[0], not spy.label_fields, f"labels in {', '.join(spy.label_fields)}")
    if cls.runs_on.sees_past_steps:
        yield check(DEPENDENT[1] + " (it declares itself a reference: it may)", True)
    else:
        yield check(DEPENDENT[1], not spy.past_fields, "; ".join(spy.past_fields))
    if mixed:
        yield check(DEPENDENT[2] + " (not applicable: the mixed setting labels its first step)", True)
    else:
        relabelled = _run(spec, work / "relabelled", cls, setting, relabel=True)
        reason = (f"the run with permuted labels failed: {relabelled.error}" if relabelled.out is None
                  else _same_predictions(first.out, relabelled.out))
        yield check(DEPENDENT[2], not reason, reason)
    yield check(DEPENDENT[3], not spy.roundtrip_errors, "; ".join(spy.roundtrip_errors[:1]))
    if mixed:
        yield check(DEPENDENT[4] + " (not applicable: the mixed setting asks for no task's own head)", True)
    elif cls.runs_on.frozen_task_heads:
        yield check(DEPENDENT[4], not spy.moved_heads, "; ".join(spy.moved_heads[:1]))
    else:
        yield check(DEPENDENT[4] + " (not declared: they are read again at every step)", True)
    yield check(DEPENDENT[5], *_resumes(spec, work / "killed", cls, setting, first.out))
    again = _run(spec, work / "again", cls, setting)
    reason = f"the second run failed: {again.error}" if again.out is None else _same_numbers(first.out, again.out)
    yield check(DEPENDENT[6], not reason, reason)


def _resumes(spec: RunSpec, results: Path, cls: type[MethodHooks], setting: str, first: Path) -> tuple[bool, str]:
    """Killed as step `KILLED_AT` starts and resumed, does the run end with the uninterrupted run's metrics?"""
    killed = _run(spec, results, cls, setting, kill_at=KILLED_AT)
    if killed.error != "killed":
        return False, f"the run to kill {killed.error and 'failed: ' + killed.error or 'finished'} before step {KILLED_AT + 1}"
    resumed = _run(spec, results, cls, setting)
    if resumed.out is None:
        reason = f"the resumed run failed: {resumed.error}"
    elif not any(f"resuming after step {KILLED_AT - 1}" in p.read_text() for p in (results / "runs").glob("*/log.txt")):
        reason = "it did not resume from the checkpoint"
    else:
        reason = _same_metrics(first, resumed.out)
    return not reason, reason


def check_method(method: str, workdir: Path | None = None, echo: Callable[[str], None] | None = None,
                 cache: Path | None = None) -> bool:
    """Run the kit, passing each check's line to `echo` as it is decided; whether every check passed."""
    ok = True
    for check in run_checks(method, workdir, cache):
        ok = ok and check.ok
        if echo:
            echo(check.line())
    return ok

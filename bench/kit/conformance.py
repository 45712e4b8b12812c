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

A method that runs only the mixed setting (continual category discovery: a labelled first step) is checked on a mixed
split (`MIXED_SPLIT`): there its first step's labels are the protocol's input, so `no labels reach it` means none
after that step, and the permuted-labels run is not applicable (permuting labels would move images between the
protocol's steps).

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
SHORT_KEYS = ("epochs", "ktrfr_epochs", "joint_epochs", "stage1_epochs", "stage2_epochs", "warmup_epochs",
              "ssl_epochs", "labelled_epochs", "svi_iters")  # every count of epochs (or steps: VB-CGCD's) a built-in
# preset has: 1 is the least a run validates
# a mixed-only method's run: PromptCCD's protocol (a labelled step, then 3 steps: the fewest of bench's mixed
# protocols) on 10 classes
MIXED_SPLIT, MIXED_OPTIONS = "promptccd-3-stage", {"dataset.num_classes": 10, "dataset.train_per_class": 6}
KILLED_AT = 1  # the kit kills its run as this step (0-based) starts: one step done, one to resume


@dataclass(frozen=True)
class Check:
    """The outcome of one check: `PASS name` or `FAIL name: reason` (one line)."""

    name: str
    ok: bool
    reason: str = ""

    def line(self) -> str:
        return f"PASS {self.name}" if self.ok else f"FAIL {self.name}: {self.reason}"


# -- the pieces of the runner the kit hooks into: the run itself, and where its dataset is read --

def _runner() -> Any:
    import bench.protocol.runner

    return bench.protocol.runner


def _planning() -> Any:
    import bench.protocol.planning

    return bench.protocol.planning


# -- the kit --

def short_options(method: str) -> dict[str, Any]:
    """The kit's tiny run for `method`: tiny data, and one epoch for every epoch count its preset has
    (a key the preset lacks is left out: `bench.config.grids.expand` refuses keys no method has)."""
    from bench.config.spec import EQUATIONS
    from bench.config.presets import load_preset

    params, _ = load_preset(method, EQUATIONS)
    mixed = MIXED_OPTIONS if split_of(method) == MIXED_SPLIT else {}
    return {**TINY_OPTIONS, **mixed, **{f"method.{key}": 1 for key in SHORT_KEYS if key in params}}


def split_of(method: str) -> str:
    """The split the kit runs `method` on: class-iNCD's, or a mixed one for a method that runs only that setting."""
    from bench.registries.catalogue import known_method

    return SPLIT if "incd" in known_method(method).runs_on.settings else MIXED_SPLIT


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
        own = split_of(method)
        targets = [(preset, DATASET, own) for preset in presets]
        # a per-dataset/split override is validated where it applies
        targets += _override_targets(_read_config(str(path)), presets, own)
        for preset, dataset, split in targets:
            try:  # the preset's own values (a grid's `cfg` would hide them), then as the kit runs it
                config = resolve_config(method, preset, dataset, split, {}, {})
                check_config(method, dataset, config, n_steps_of(split))
                _specs(method, preset, short_options(method) if dataset == DATASET else {}, dataset=dataset,
                       split=split)
            except BenchError as err:
                where = "" if (dataset, split) == (DATASET, own) else f" on {dataset} {split}"
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


def _run(spec: RunSpec, results: Path, cls: type[MethodHooks], *, kill_at: int | None = None,
         relabel: bool = False) -> _Run:
    planning = _planning()
    spy = StepSpy(cls, kill_at=kill_at)
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


def run_checks(method: str, workdir: Path | None = None, cache: Path | None = None) -> Iterator[Check]:
    """The kit on a registered method: one `Check` at a time, as each is decided. Its runs go under
    `workdir` (default: a temporary directory, removed after), the feature bank under `cache`
    (default: in `workdir`; a suite that checks many methods shares one)."""
    from bench.registries import METHODS, load_all
    from bench.config.spec import resolve_method

    load_all()
    method = resolve_method(method)  # a name or a slug; unknown: the error lists both
    cls = METHODS.get(method)
    presets = check_presets(method)
    yield presets
    inputs = cls.runs_on.inputs
    smoke = f"runs on the smoke grid ({inputs})"
    dependent = ["no labels reach it", "no earlier step's data reach it", "its outputs ignore the training labels",
                 "state_dict round-trips", "earlier task heads answer as at their own step",
                 "a killed run resumes to identical metrics",
                 "the same seed gives the same numbers"]
    if not presets.ok:
        yield Check(smoke, False, "its presets do not validate")
        yield from (Check(name, False, "not run: its presets do not validate") for name in dependent)
        return
    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bench-check-")) if workdir is None else Path(workdir)
    try:
        # one feature bank for every run of the kit (`cache_dir` is a location: the run ids stay the same)
        mixed = split_of(method) == MIXED_SPLIT
        (spec,) = _specs(method, options=short_options(method), location={"cache_dir": str(cache or work / "cache"),
                                                                        "device": "cpu"}, split=split_of(method))
        first = _run(spec, work / "first", cls)
        yield Check(smoke, first.out is not None, first.error)
        if first.out is None:
            yield from (Check(name, False, "not run: the smoke run failed") for name in dependent)
            return
        spy = first.spy
        if mixed:  # the labelled step's own labels are the protocol's
            given = [f for f in spy.label_fields if f != "step 1.labels"]
            yield Check(dependent[0] + " after the labelled step", not given, f"labels in {', '.join(given)}")
        else:
            yield Check(dependent[0], not spy.label_fields, f"labels in {', '.join(spy.label_fields)}")
        if cls.runs_on.sees_past_steps:
            yield Check(dependent[1] + " (it declares itself a reference: it may)", True)
        else:
            yield Check(dependent[1], not spy.past_fields, "; ".join(spy.past_fields))
        if mixed:
            yield Check(dependent[2] + " (not applicable: the mixed setting labels its first step)", True)
        else:
            relabelled = _run(spec, work / "relabelled", cls, relabel=True)
            reason = (f"the run with permuted labels failed: {relabelled.error}" if relabelled.out is None
                      else _same_predictions(first.out, relabelled.out))
            yield Check(dependent[2], not reason, reason)
        yield Check(dependent[3], not spy.roundtrip_errors, "; ".join(spy.roundtrip_errors[:1]))
        if mixed:
            yield Check(dependent[4] + " (not applicable: the mixed setting asks for no task's own head)", True)
        elif cls.runs_on.frozen_task_heads:
            yield Check(dependent[4], not spy.moved_heads, "; ".join(spy.moved_heads[:1]))
        else:
            yield Check(dependent[4] + " (not declared: they are read again at every step)", True)
        killed = _run(spec, work / "killed", cls, kill_at=KILLED_AT)
        if killed.error != "killed":
            yield Check(dependent[5], False, f"the run to kill {killed.error and 'failed: ' + killed.error or 'finished'}"
                                             f" before step {KILLED_AT + 1}")
        else:
            resumed = _run(spec, work / "killed", cls)
            logs = (work / "killed" / "runs").glob("*/log.txt")
            if resumed.out is None:
                reason = f"the resumed run failed: {resumed.error}"
            elif not any(f"resuming after step {KILLED_AT - 1}" in p.read_text() for p in logs):
                reason = "it did not resume from the checkpoint"
            else:
                reason = _same_metrics(first.out, resumed.out)
            yield Check(dependent[5], not reason, reason)
        again = _run(spec, work / "again", cls)
        reason = f"the second run failed: {again.error}" if again.out is None else _same_numbers(first.out, again.out)
        yield Check(dependent[6], not reason, reason)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def check_method(method: str, workdir: Path | None = None, echo: Callable[[str], None] | None = None,
                 cache: Path | None = None) -> bool:
    """Run the kit, passing each check's line to `echo` as it is decided; whether every check passed."""
    ok = True
    for check in run_checks(method, workdir, cache):
        ok = ok and check.ok
        if echo:
            echo(check.line())
    return ok

"""`bench tune`: an Optuna study of one method's hyper-parameters on a tuning protocol that never reads the test
images, each trial the selection's runs with the trial's values (`--cfg-options`) and the protocol's keys, run by
`bench run`'s own launcher (the local pool, SLURM arrays, packed tasks: `run_options`).

The study lives in Optuna's journal file (`<results>/tuning/<study>.journal`, which several processes and nodes on
one file system share) or in an RDB given by URL. A tuner killed mid-trial resumes the study: its unfinished trials
run again (their runs resume from their checkpoints, done ones are skipped), then new ones until the budget. A
trial whose runs fail is recorded as failed, with why, and the study goes on. The objective is the mean reported A
of the trial's runs (their `reported_A` rows, over datasets, splits and seeds), maximised.
"""
from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from bench.config.selection import Selection
from bench.errors import BenchError, first_line, unknown
from bench.tuning.space import Param, canonical, sample

Say = Callable[[str], None]
# what each tuning protocol holds out, and why (docs/settings.md#tuning)
PROTOCOLS = {"validation": "part of each class's training images held out and scored in place of the test set "
                           "(tuning.holdout); the test images are never read",
             "transfer": "the trials run on another dataset (scored on its own test set) or on another class order of "
                         "the same one (scored on held-out training images); the reported runs read none of it"}


@dataclass(frozen=True)
class TuneOptions:
    trials: int  # the budget: trials finished (or failed) in the study when the tuner stops
    protocol: str = "validation"
    holdout: float = 0.2
    storage: str | None = None  # an RDB URL; None: the study's journal file under <results>/tuning/
    study: str | None = None  # its name; None: from the method, datasets, splits and protocol
    seed: int = 0  # the sampler's
    batch: int = 1  # trials asked for at once and run together in one process, where the method batches
    source: str | None = None  # transfer: a dataset's name, or `order:N` (class order N of the selection's datasets)
    final: bool = True  # after the study, run the selection (the reported protocol) once with the best values


@dataclass
class TuneOutcome:
    study: str
    storage: str
    trials: list[dict[str, Any]] = field(default_factory=list)  # number, values, state, value, why
    best: dict[str, Any] | None = None
    best_value: float | None = None
    final: float | None = None  # the reported runs' mean A with the best values (`TuneOptions.final`)


def _name(selection: Selection, method: str, options: TuneOptions) -> str:
    parts = [selection.grid or "all", method, *(selection.datasets or ()), *(selection.splits or ()), options.protocol,
             *([f"from-{options.source}"] if options.source else [])]
    return options.study or re.sub(r"[^A-Za-z0-9_.+-]+", "-", "-".join(parts)).strip("-")


def _storage(options: TuneOptions, results: Path, name: str) -> tuple[Any, str]:
    from optuna.storages import RDBStorage
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    if options.storage:
        return RDBStorage(options.storage), options.storage
    path = Path(results) / "tuning" / f"{name}.journal"
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path))), str(path)


OWNER = "owner"  # a trial's user attribute: the tuner running it, host:pid
ME = f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str | None) -> bool:
    """Whether the tuner `owner` (host:pid) may still be running its trial: a process of this host that is gone, or
    this very process (a dead tuner's pid, reused), is not; one of another host is assumed to be (its tuner ends it,
    or a tuner on that host takes it over). A trial without an owner is a killed tuner's of before owners were kept."""
    if not owner:
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def trial_selection(selection: Selection, values: Mapping[str, Any], options: TuneOptions) -> Selection:
    """The runs of one trial: the selection with the trial's values and the protocol's keys as `--cfg-options`
    (transfer: on its source dataset, scored on that dataset's test set; or on its source class order, scored on
    held-out training images)."""
    cfg: dict[str, Any] = {**selection.cfg_options, **values}
    if options.protocol == "transfer" and not str(options.source).startswith("order:"):
        return replace(selection, datasets=(str(options.source),), cfg_options=cfg)
    if options.protocol == "transfer":
        cfg["split.class_order_seed"] = int(str(options.source).split(":", 1)[1])
    return replace(selection, cfg_options={**cfg, "tuning.holdout": options.holdout})


def tuned_on(options: TuneOptions) -> str:
    """What a study tuned on, as the runs holding its values say it (`tuning.study_protocol`)."""
    if options.protocol != "transfer":
        return f"validation {options.holdout:g}"
    source = str(options.source)
    if source.startswith("order:"):
        return f"transfer from class order {source.split(':', 1)[1]}, validation {options.holdout:g}"
    return f"transfer from {source}"


def check_source(selection: Selection, options: TuneOptions) -> None:
    """The transfer protocol's source, before anything runs: given, and never what the reported runs read."""
    if options.protocol != "transfer":
        if options.source:
            raise BenchError(f"--transfer-from {options.source}: only the transfer protocol tunes elsewhere; give "
                             f"--protocol transfer")
        return
    source = options.source
    if not source:
        raise BenchError("the transfer protocol tunes on another dataset or class order: give --transfer-from DATASET "
                         "or --transfer-from order:N")
    if source.startswith("order:"):
        seed = source.split(":", 1)[1]
        if not seed.isdigit():
            raise BenchError(f"--transfer-from {source}: order:N with N a class-order seed >= 0")
        if selection.cfg_options.get("split.class_order_seed") == int(seed):
            raise BenchError(f"--transfer-from {source}: the reported runs take that class order themselves; tune on "
                             f"another one")
        return
    if source in (selection.datasets or ()):
        raise BenchError(f"--transfer-from {source}: the reported runs are on {source}, whose test images the trials "
                         f"would read; transfer from another dataset, or use --protocol validation")


def final_selection(selection: Selection, name: str, values: Mapping[str, Any], options: TuneOptions) -> Selection:
    """The reported runs with the study's best values, marked with the study (`tuning.study`: their own split label,
    never averaged with runs tuned otherwise; the report's tuning block sets them beside the authors' tuning)."""
    return replace(selection, cfg_options={**selection.cfg_options, **values, "tuning.study": name,
                                           "tuning.study_protocol": tuned_on(options),
                                           "tuning.study_trials": options.trials})


def objective(directories: tuple[Path, ...]) -> tuple[float | None, str]:
    """The mean reported A of finished runs, or None and why when one did not finish."""
    values = []
    for run in directories:
        if not (run / "DONE").exists():
            return None, f"run {run.name} did not finish (its error.txt says why)"
        frame = pd.read_parquet(run / "metrics.parquet")
        flavour, metric = str(frame["reported_A"].iloc[0]).split("/")
        row = frame[(frame["group"] == "summary") & (frame["flavour"] == flavour) & (frame["metric"] == metric)]
        values.append(float(row["value"].iloc[0]))
    return (sum(values) / len(values), "") if values else (None, "no run")


def tune(selection: Selection, params: tuple[Param, ...], options: TuneOptions, run: Callable[[Selection], Any],
         say: Say = print, run_batch: Callable[[list[Selection]], Any] | None = None) -> TuneOutcome:
    """Run the study (module docstring). `run(selection)` runs a trial's runs (`bench.execution.launch`);
    `run_batch(selections)` runs several trials' runs at once (`bench.execution.launch.launch_batched`), used with
    `options.batch` > 1 for a method that learns trials together (`bench.protocol.batched`)."""
    import optuna
    from optuna.samplers import TPESampler
    from optuna.trial import TrialState

    from bench.execution.selection import expand_selection, runs_to_report

    from bench.protocol.batched import batch_keys

    if options.trials < 1:
        raise BenchError(f"a budget of {options.trials} trials: give --trials N with N >= 1")
    if options.batch < 1:
        raise BenchError(f"--batch {options.batch}: give --batch N with N >= 1 (1: one trial at a time, the default; "
                         f"N: N trials at once, in one process where the method learns them together)")
    if options.protocol not in PROTOCOLS:
        raise unknown("tuning protocol", options.protocol, PROTOCOLS)
    if not 0 < options.holdout < 1:
        raise BenchError(f"--holdout {options.holdout}: the validation protocol holds out a fraction in (0, 1) of "
                         f"each class's training images")
    check_source(selection, options)
    # every value is checked before anything runs: the first trial's, at each range's low end
    probe = {p.key: p.choices[0] if p.choices else p.low for p in params}
    _, specs = expand_selection(trial_selection(selection, probe, options))
    methods = sorted({s.label for s in specs})
    if len(methods) != 1:
        raise BenchError(f"bench tune tunes one method; the selection holds {', '.join(methods)}: name one with "
                         f"--methods")
    name = _name(selection, specs[0].method, options)
    storage, where = _storage(options, selection.results, name)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True,
                                sampler=TPESampler(seed=options.seed, constant_liar=options.batch > 1))
    # what a study is of: a second tuner of other runs, space or protocol on the same study is refused
    held = {"method": methods[0], "space": canonical(params), "protocol": tuned_on(options), "holdout": options.holdout,
            "selection": json.dumps({k: getattr(selection, k) for k in ("grid", "datasets", "splits", "seeds",
                                                                         "backbones")}
                                    | {"cfg_options": dict(selection.cfg_options)}, sort_keys=True, default=str)}
    recorded = study.user_attrs
    if recorded and any(recorded.get(k) != v for k, v in held.items()):
        differs = [k for k, v in held.items() if recorded.get(k) != v]
        raise BenchError(f"study {name} ({where}) was made for another {', '.join(differs)} ("
                         + "; ".join(f"{k} {recorded.get(k)!r}" for k in differs)
                         + "): give another --study name, or the same method and space")
    for key, value in held.items():
        study.set_user_attr(key, value)
    outcome = TuneOutcome(name, where)
    say(f"study {name} ({where}): {tuned_on(options)} ({PROTOCOLS[options.protocol]}), budget {options.trials} "
        f"trials, {len(study.trials)} in it already")

    batch = options.batch
    if batch > 1 and (run_batch is None or not batch_keys(specs[0].method)):
        say(f"{specs[0].method} does not learn trials together (no `batchable` hyper-parameters): its trials run one "
            f"at a time")
        batch = 1

    def evaluate(numbered: list[tuple[int, Mapping[str, Any]]]) -> list[tuple[float | None, str]]:
        """Each trial's value (or None and why) after its runs ran: one trial through `run`, or with `--batch`
        several at once through `run_batch` (a failure of the batch is each of its trials')."""
        trials_runs = [trial_selection(selection, values, options) for _, values in numbered]
        failure = ""
        try:
            if batch == 1:
                run(trials_runs[0])
            else:  # a batch, or what is left of the budget after the last full one: in this process too
                run_batch(trials_runs)  # type: ignore[misc]
        except BenchError as err:
            failure = str(err)
        except Exception as err:  # a trial's failure is the trial's: the study goes on
            failure = first_line(err)
        got = []
        for (number, values), trial_runs in zip(numbered, trials_runs):
            value, why = None, failure
            try:
                if not failure:
                    value, why = objective(runs_to_report(trial_runs).directories)
            except BenchError as err:
                why = str(err)
            except Exception as err:
                why = first_line(err)
            shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
            say(f"trial {number}: {shown} -> " + (f"A {value:.2f} ({tuned_on(options)})" if value is not None
                                                   else f"failed: {why}"))
            outcome.trials.append({"number": number, "values": dict(values), "value": value, "why": why})
            got.append((value, why))
        return got

    def tell(number: int, value: float | None) -> None:
        try:
            study.tell(number, value, state=TrialState.COMPLETE if value is not None else TrialState.FAIL)
        except (RuntimeError, ValueError) as err:  # another tuner of the study told it first (both took it over)
            say(f"trial {number} was already told by another tuner ({first_line(err)})")

    # a killed tuner's trials (their owner's process is gone): this tuner takes them over; a live tuner's are its own
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    left = [t for t in running if not owner_alive(t.user_attrs.get(OWNER))]
    for held_trial in left:
        study._storage.set_trial_user_attr(held_trial._trial_id, OWNER, ME)
    for start in range(0, len(left), batch):
        chunk = left[start:start + batch]
        for held_trial, (value, _) in zip(chunk, evaluate([(t.number, t.params) for t in chunk])):
            tell(held_trial.number, value)

    def taken() -> int:
        """Trials ended, and those another live tuner is running (theirs to end): what the budget counts."""
        trials = study.get_trials(deepcopy=False)
        return sum(t.state in (TrialState.COMPLETE, TrialState.FAIL)
                   or (t.state == TrialState.RUNNING and owner_alive(t.user_attrs.get(OWNER))) for t in trials)

    while (ended := taken()) < options.trials:
        asked = [study.ask() for _ in range(min(batch, options.trials - ended))]
        for trial in asked:
            trial.set_user_attr(OWNER, ME)
        values = [sample(trial, params) for trial in asked]
        for trial, (value, why) in zip(asked, evaluate([(t.number, v) for t, v in zip(asked, values)])):
            if value is None:
                trial.set_user_attr("why", why)
            tell(trial.number, value)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    if complete:
        best = max(complete, key=lambda t: t.value if t.value is not None else float("-inf"))
        outcome.best, outcome.best_value = dict(best.params), best.value
        shown = " ".join(f"{k}={json.dumps(v)}" for k, v in best.params.items())
        say(f"best of {len(complete)} finished trial(s): trial {best.number}, A {best.value:.2f} ({tuned_on(options)}), "
            f"with {shown}")
        if options.final:  # the reported protocol, once, with them: the honest number
            final = final_selection(selection, name, best.params, options)
            try:
                run(final)
                value, why = objective(runs_to_report(final).directories)
            except BenchError as err:
                value, why = None, str(err)
            outcome.final = value
            say(f"the reported runs with them: A {value:.2f} (marked tuned, its own split label; `bench report` sets "
                f"it beside the preset's runs)" if value is not None else f"the reported runs with them failed: {why}")
    else:
        say("no trial finished: every one failed (above)")
    return outcome

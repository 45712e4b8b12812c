"""One job = one RunSpec, run as the protocol says, in the one step loop every setting shares
(`run_steps`): for each step, the method learns what the step hands it, is evaluated on everything seen
so far, and the step is recorded (a checkpoint after every step, so that a killed or requeued run resumes
from its last finished step with the same final metrics).

The protocol is enforced here: a method receives `Step`s holding the training data of the current step,
with labels only where its setting gives them (`bench.protocol.steps`: class-iNCD gives none; the mixed
setting's labelled step does), and earlier steps' only if it declares `runs_on.sees_past_steps`; the
labels of evaluation stay with the evaluator. What the run is made of is `bench.protocol.planning`, what
the method is fed `bench.protocol.feeding`, and where it is all kept `bench.runs`.
"""
from __future__ import annotations

import os
import random
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from mmengine.config import Config

from bench.config.spec import RunSpec
from bench.core import numerics
from bench.core.storage import write_atomic
from bench.protocol.feeding import feed_for
from bench.protocol.planning import Parts, assemble, device_of, threads_of
from bench.protocol.recompute import repaired
from bench.protocol.steps import Steps, reported_of, steps_for
from bench.protocol.step import RecordedLoops, Step, epochs_recorded
from bench.runs import checkpoint
from bench.runs.checkpoint import Progress
from bench.runs.metrics_file import metrics_frame
from bench.runs.predictions import LOSS_UNITS, Keys
from bench.runs.rows import MetricRow
from bench.runs.rundir import CHECKPOINT, DONE, ERROR, run_dir, set_aside, unreadable
from bench.runs.runstore import Log, finish, locked
from bench.runs.trackers import Tracking
from bench.protocol.hooks import MethodHooks


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def execute(spec: RunSpec, results: Path, *, echo: bool = False, claim: Callable[[Path], None] | None = None) -> Path:
    """Run `spec` to completion under `results/runs/<run_id>/`, resuming from a checkpoint if one
    exists. On failure the error and traceback go to `error.txt` and the exception propagates.

    An exclusive lock on the run directory keeps two processes from running the same run at once;
    the second raises `RunBusy` and touches nothing. A run already DONE is not run again. `claim(out)`,
    when given, is called under the lock before the run starts (a pull worker's bookkeeping: it may
    raise `RunBusy` to leave the run alone, `bench.execution.pull`)."""
    out = run_dir(results, spec)
    out.mkdir(parents=True, exist_ok=True)
    with locked(out):
        log = Log(out / "log.txt", echo)
        if already_done(out, log):
            return out
        if claim is not None:
            claim(out)
        (out / ERROR).unlink(missing_ok=True)
        try:
            with numerics.restored():  # an in-process caller gets its own threads and kernels back
                _run(spec, out, log)
        except Exception as err:
            failed(out, log, err)
            raise
        except BaseException as err:  # SystemExit from submitit's requeue handler, Ctrl-C: not a failure
            log(f"interrupted ({type(err).__name__}); the next attempt resumes from the last checkpoint")
            raise
    return out


def already_done(out: Path, log: Log) -> bool:
    """Whether the run in `out` is DONE with readable results (repaired where they can be); unreadable ones are
    set aside, to run again."""
    if not (out / DONE).exists():
        return False
    bad = unreadable(out)
    if not bad or repaired(out, bad, log):
        return True
    aside = set_aside(out, bad)
    log(f"results unreadable ({'; '.join(f'{k}: {v}' for k, v in bad.items())}): moved to {aside.name}/, "
        f"running again")
    return False


def failed(out: Path, log: Log, err: Exception) -> None:
    """The run's error and traceback in `error.txt` and its log."""
    try:
        write_atomic(out / ERROR, f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}")
        log(f"FAILED: {type(err).__name__}: {err}")
    except OSError:  # a full disk: the run's own error still reaches the caller
        pass


@dataclass
class Opened:
    """A run made ready to step: its parts, steps, progress (from its checkpoint) and trackers."""

    spec: RunSpec
    out: Path
    log: Log
    parts: Parts
    steps: Steps
    progress: Progress
    tracking: Tracking
    device: torch.device
    clock: float
    threads: int


def open_run(spec: RunSpec, out: Path, log: Log) -> Opened:
    """Run `spec`'s files, numerics, parts, feed and steps, resumed from its checkpoint where it has one."""
    write_atomic(out / "spec.json", spec.to_json())
    Config(dict(spec.config)).dump(str(out / "config.py"))
    device = device_of(spec)
    clock = time.monotonic()
    state = checkpoint.read_checkpoint(out, log)  # first: the steps it holds ran with its thread count, the rest must too
    threads = threads_of(spec, state, log)
    # the GPUs this process was given (a pool's worker, a SLURM job): which of a node's GPUs it ran on
    given = f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})" if "CUDA_VISIBLE_DEVICES" in os.environ else ""
    log(f"run {spec.run_id}: {spec.describe()} on {device}{given}, process {os.getpid()}, {threads} thread(s)")
    log(f"numerics: {'; '.join(numerics.fix(threads, device))}")

    parts = assemble(spec, out, device, log)
    feed = feed_for(spec, parts.method, parts.data, parts.backbone, device, parts.val_images, parts.layout, log,
                    out.parent.parent, clock)
    steps = steps_for(spec, parts, feed, out, log)
    progress = Progress.of(state)
    if state is not None:
        parts.method.load_state_dict(state["method"])
        steps.load_state_dict(state["evaluator"])
        log(f"resuming after step {state['step']}")
    tracking = Tracking.start(spec, out.parent.parent, log, resumed=state is not None)
    return Opened(spec, out, log, parts, steps, progress, tracking, device, clock, threads)


def _run(spec: RunSpec, out: Path, log: Log) -> None:
    run = open_run(spec, out, log)
    try:
        rows = run_steps(spec, run.parts.method, run.steps, run.progress, out, log, run.clock, run.threads,
                         run.tracking)
        close_run(run, rows)
    except BaseException as err:
        run.tracking.finish("failed" if isinstance(err, Exception) else "interrupted")
        raise
    run.tracking.finish("finished")


def close_run(run: Opened, rows: list[MetricRow]) -> None:
    """The finished run's files (`_record`), then its trackers' final numbers (sent once the files are written)."""
    run.tracking.final(_record(run.spec, run.out, run.log, run.parts, rows, run.progress, run.device, run.clock))


def run_steps(spec: RunSpec, method: MethodHooks, steps: Steps, progress: Progress, out: Path, log: Log, clock: float,
               threads: int, tracking: Tracking | None = None) -> list[MetricRow]:
    """The protocol, the same for every setting: from the first step `progress` has not recorded, the method
    learns the step's `Step`, is evaluated on everything seen so far (as that `Step` told it), and the step is
    recorded (its rows, what its evaluation was computed from, a checkpoint). The run's rows, its summary's last.
    Each step's losses and rows go to the run's trackers before its checkpoint: a run killed between the two
    sends the step again when it resumes, the same numbers at the same steps, rather than never."""
    tracking = tracking or Tracking({}, log)
    for t in range(progress.next_step, spec.n_steps):
        seed_everything(spec.seed * 1000 + t)
        step = steps.step(t, progress.stored)
        with epochs_recorded() as losses:
            method.learn(step)
        after_learn(t, step, losses, method, steps, progress, out, log, clock, threads, tracking)
    return progress.rows + steps.summary(progress.rows)


def after_learn(t: int, step: Step, losses: RecordedLoops, method: MethodHooks, steps: Steps, progress: Progress,
                out: Path, log: Log, clock: float, threads: int, tracking: Tracking) -> None:
    """What follows step t's learning in the step loop: its losses kept, its evaluation, its rows to the log and the
    trackers, its checkpoint."""
    for i, (loop, unit) in enumerate(zip(losses, losses.units)):  # each loop's loss per epoch, for the run's page
        progress.stored[Keys.epoch_loss(t, i)] = np.asarray(loop, dtype=np.float32)
        if unit != "epoch":
            progress.stored[Keys.loss_unit(t, i)] = np.asarray(LOSS_UNITS.index(unit), dtype=np.int8)
    rows = steps.evaluate(t, step, method, progress.stored)
    progress.rows.extend(rows)
    log(steps.describe(t, rows))
    tracking.step(t, losses, rows)
    checkpoint.save_checkpoint(out / CHECKPOINT, progress.state(t, method, steps, time.monotonic() - clock, threads))


def _record(spec: RunSpec, out: Path, log: Log, parts: Parts, rows: list[MetricRow], progress: Progress,
            device: torch.device, clock: float) -> Any:
    """The finished run's predictions and metrics, then DONE; its A and F in the log. Its metrics frame."""
    reported = reported_of(spec)
    frame = metrics_frame(spec, rows, device, progress.started_at, progress.spent + time.monotonic() - clock,
                          parts.mapping_images, reported, weights=parts.backbone.weights)
    finish(out, parts.layout, progress.stored, spec.run_id, frame)
    summary = {(r.flavour, r.metric): r.value for r in rows if r.group == "summary"}
    shown = {name: f"{name}={summary[source]:.1f} ({'/'.join(source)})" for name, source in reported.items()}
    log(f"done: {shown['A']} {shown['F']}")
    return frame

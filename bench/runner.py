"""One job = one RunSpec, run as the protocol says: for each step, the method learns from the step's
unlabelled data, is evaluated on every task seen so far, and the step is recorded (a checkpoint after
every step, so that a killed or requeued run resumes from its last finished step with the same final
metrics).

The protocol is enforced here: a method receives `Step`s holding the unlabelled training data of
the current step (and earlier steps only if it declares `runs_on.sees_past_steps`); labels stay with
the evaluator. What the run is made of is `bench.planning`, what the method is fed `bench.feeding`, and
where it is all kept `bench.runstore`, `bench.checkpoint` and `bench.run_metrics`.
"""
from __future__ import annotations

import os
import random
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from mmengine.config import Config

from bench import checkpoint, mixed_run, numerics, predictions
from bench.evaluate import Evaluator, MetricRow
from bench.feeding import Feed, feed_for
from bench.planning import assemble, device_of, threads_of
from bench.run_metrics import metrics_frame
from bench.rundir import (CHECKPOINT, DONE, ERROR, METRICS, RunBusy, check_writable, invalidate,  # noqa: F401
                          is_done, run_dir, set_aside, unreadable)
from bench.runstore import Log, finish, locked, rebuild_metrics, repaired  # noqa: F401  (rebuild_metrics: the commands')
from bench.spec import RunSpec
from bench.storage import write_atomic


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def execute(spec: RunSpec, results: Path, *, echo: bool = False) -> Path:
    """Run `spec` to completion under `results/runs/<run_id>/`, resuming from a checkpoint if one
    exists. On failure the error and traceback go to `error.txt` and the exception propagates.

    An exclusive lock on the run directory keeps two processes from running the same run at once;
    the second raises `RunBusy` and touches nothing. A run already DONE is not run again."""
    out = run_dir(results, spec)
    out.mkdir(parents=True, exist_ok=True)
    with locked(out):
        log = Log(out / "log.txt", echo)
        if (out / DONE).exists():
            bad = unreadable(out)
            if not bad or repaired(out, bad, log):
                return out
            aside = set_aside(out, bad)
            log(f"results unreadable ({'; '.join(f'{k}: {v}' for k, v in bad.items())}): moved to {aside.name}/, "
                f"running again")
        (out / ERROR).unlink(missing_ok=True)
        try:
            with numerics.restored():  # an in-process caller gets its own threads and kernels back
                _run(spec, out, log)
        except Exception as err:
            try:
                write_atomic(out / ERROR, f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}")
                log(f"FAILED: {type(err).__name__}: {err}")
            except OSError:  # a full disk: the run's own error still reaches the caller
                pass
            raise
        except BaseException as err:  # SystemExit from submitit's requeue handler, Ctrl-C: not a failure
            log(f"interrupted ({type(err).__name__}); the next attempt resumes from the last checkpoint")
            raise
    return out


def _run(spec: RunSpec, out: Path, log: Log) -> None:
    write_atomic(out / "spec.json", spec.to_json())
    Config(dict(spec.config)).dump(str(out / "config.py"))
    device = device_of(spec)
    clock = time.monotonic()
    state = checkpoint.read_checkpoint(out, log)  # first: the steps it holds ran with its thread count, the rest must too
    threads = threads_of(spec, state, log)
    log(f"run {spec.run_id}: {spec.describe()} on {device}, process {os.getpid()}, {threads} thread(s)")
    log(f"numerics: {'; '.join(numerics.fix(threads, device))}")

    parts = assemble(spec, out, device, log)
    method, layout, data, val_images = parts.method, parts.layout, parts.data, parts.val_images
    feed = feed_for(spec, method, data, parts.backbone, device, val_images, layout, log, out.parent.parent, clock)
    if parts.protocol is not None:  # the mixed setting: its own protocol (bench.mixed_run)
        rows, progress = mixed_run.run_mixed(spec, out, log, parts, feed, state, clock, threads, seed_everything)
        _record(spec, out, log, parts, rows, progress, device, clock)
        return
    evaluator = Evaluator(layout)
    progress = checkpoint.Progress.of(state)
    if state is not None:
        method.load_state_dict(state["method"])
        evaluator.load_state_dict(state["evaluator"])
        log(f"resuming after step {state['step']}")

    val = (val_images.labels, layout.task_of(val_images.labels))
    test = (data.test.labels, layout.task_of(data.test.labels))
    for t in range(progress.next_step, spec.n_steps):
        seed_everything(spec.seed * 1000 + t)
        method.learn(feed.step(t, layout))
        step_rows, given = _evaluate(method, feed, evaluator, t, val, test)
        progress.rows.extend(step_rows)
        predictions.record(progress.stored, t, **given)
        _log_step(log, t, spec.n_steps, step_rows)
        checkpoint.save_checkpoint(out / CHECKPOINT,
                                   progress.state(t, method, evaluator, time.monotonic() - clock, threads))

    _record(spec, out, log, parts, progress.rows + evaluator.summary(progress.rows, spec.n_steps), progress, device,
            clock)


def _record(spec: RunSpec, out: Path, log: Log, parts: Any, rows: list[MetricRow], progress: Any,
            device: torch.device, clock: float) -> None:
    """The finished run's predictions and metrics, then DONE; its A and F in the log."""
    frame = metrics_frame(spec, rows, device, progress.started_at, progress.spent + time.monotonic() - clock,
                          parts.mapping_images, weights=parts.backbone.weights)
    finish(out, parts.layout, progress.stored, spec.run_id, frame)
    summary = {(r.flavour, r.metric): r.value for r in rows if r.group == "summary"}
    reported = mixed_run.REPORTED if parts.protocol is not None else parts.method.reported
    shown = {name: f"{name}={summary[source]:.1f} ({'/'.join(source)})" for name, source in reported.items()}
    log(f"done: {shown['A']} {shown['F']}")


Labelled = tuple[np.ndarray, np.ndarray]  # the labels of a split's images, and the task of each


def _evaluate(method: Any, feed: Feed, evaluator: Evaluator, t: int, val: Labelled,
              test: Labelled) -> tuple[list[MetricRow], dict[str, Any]]:
    """Step `t`'s metric rows, and what the evaluator was given for them (`bench.predictions.record`):
    task t's map is frozen on its val images, the earlier tasks' re-fitted on theirs, and the test
    images of every task seen so far are scored."""
    (val_labels_all, val_task), (test_labels, test_task) = val, test
    val_pred = {s: _task_predictions(method, feed, s, np.flatnonzero(val_task == s)) for s in range(t + 1)}
    val_labels = {s: val_labels_all[val_task == s] for s in range(t + 1)}
    evaluator.freeze_mapping(t, val_labels[t], val_pred[t])
    refit = {s: evaluator.fit_mapping(s, val_labels[s], val_pred[s]) for s in range(t)}
    seen = np.flatnonzero(test_task <= t)
    unified, task_pred = _predict(method, feed.batches("test", seen), t, test_task[seen] == t)
    step_rows = evaluator.evaluate(t, test_labels[seen], unified, task_pred, refit=refit)
    given = dict(val_labels=val_labels[t], val_pred=val_pred[t], test_labels=test_labels[seen], unified=unified,
                 task_pred=task_pred, mapping=evaluator.mappings[t], refit_pred=[val_pred[s] for s in range(t)])
    return step_rows, given


def _log_step(log: Log, t: int, n_steps: int, step_rows: list[MetricRow]) -> None:
    acc = {(r.group, r.flavour): r.value for r in step_rows if r.metric == "acc"}
    log(f"step {t + 1}/{n_steps}: task-specific {acc[(f'task_{t}', 'task')]:.1f}, "
        f"all wo {acc[('all', 'wo')]:.1f}, all w {acc[('all', 'w')]:.1f}")


@torch.no_grad()
def _predict(method: Any, batches: Iterator[torch.Tensor], task: int, current: np.ndarray,
             unified: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Argmax of the unified head on every batch (unless `unified` is False), and of task `task`'s
    head on the rows where `current` holds: both read the same batch, so each image's prefix runs once."""
    unified_pred, task_pred, start = [], [], 0
    for x in batches:
        rows = torch.as_tensor(current[start: start + len(x)], device=x.device)
        if unified:
            unified_pred.append(method.logits(x).argmax(1).cpu())
        if rows.any():
            task_pred.append(method.task_logits(x[rows], task).argmax(1).cpu())
        start += len(x)
    empty = torch.empty(0, dtype=torch.long)
    return torch.cat(unified_pred or [empty]).numpy(), torch.cat(task_pred or [empty]).numpy()


def _task_predictions(method: Any, feed: Feed, task: int, index: np.ndarray) -> np.ndarray:
    """Task `task`'s head, read through the encoder as it is now, on the val images `index` (the same
    head and images that froze its map at its own step: at a later step they re-fit it)."""
    return _predict(method, feed.batches("val", index), task, np.ones(len(index), dtype=bool), unified=False)[1]

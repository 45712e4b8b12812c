"""A run's directory while a process works in it: one process at a time (the lock), its log, and the
finished run's files (predictions, metrics, the DONE marker). A finished run whose only damaged file
is its metrics gets them back from its predictions instead of running again: a re-run costs GPU-hours.

What tells whether a run is done, without torch, is `bench.rundir`; its checkpoint is `bench.checkpoint`.
"""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from bench import predictions
from bench.errors import first_line
from bench.evaluate import TaskLayout
from bench.provenance import VERSION_COLUMNS, utc_now
from bench.run_metrics import metrics_frame, write_metrics
from bench.rundir import CHECKPOINT, DONE, METRICS, RunBusy, set_aside, unreadable
from bench.spec import RunSpec
from bench.storage import write_atomic


class Log:
    """Appends timestamped lines to the run's log.txt (and echoes them for the job's stdout)."""

    def __init__(self, path: Path, echo: bool) -> None:
        self.path, self.echo = path, echo

    def __call__(self, message: str) -> None:
        line = f"{utc_now()} {message}"
        with self.path.open("a") as fh:
            fh.write(line + "\n")
        if self.echo:
            try:
                print(line, flush=True)
            except BrokenPipeError:  # `bench run | head`: the reader left; the run goes on, log.txt has it all
                self.echo = False


@contextmanager
def locked(out: Path) -> Iterator[None]:
    """An exclusive lock on the run directory, or `RunBusy` at once."""
    with (out / ".lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"run {out.name} is being run by another process") from None
        yield


def finish(out: Path, layout: TaskLayout, stored: dict[str, np.ndarray], run_id: str, frame: pd.DataFrame) -> None:
    """Write a finished run's predictions and metrics, then mark it DONE (last: the marker vouches for
    both) and drop its checkpoint."""
    predictions.write(out, layout, stored, run_id)
    write_metrics(out, frame)
    write_atomic(out / DONE, utc_now() + "\n")
    (out / CHECKPOINT).unlink(missing_ok=True)


def rebuild_metrics(out: Path) -> str | None:
    """`metrics.parquet` of the finished run `out` rebuilt from its `predictions.npz` when the metrics
    are its only unreadable file; None when it is readable or cannot be rebuilt (the run must run again)."""
    with locked(out):
        bad = unreadable(out) if (out / DONE).exists() else {}
        log = Log(out / "log.txt", echo=False)
        return bad.get(METRICS) if bad and repaired(out, bad, log) else None


def repaired(out: Path, bad: dict[str, str], log: Log) -> bool:
    """Whether a finished run whose only unreadable file is `metrics.parquet` got it back from what its
    evaluator was given (`predictions.npz`), without running again."""
    if set(bad) != {METRICS} or not (out / predictions.PREDICTIONS).exists():
        return False
    try:
        frame = rebuilt_frame(out)
    except Exception as err:  # damaged predictions too: numpy and zipfile raise many types
        log(f"cannot rebuild {METRICS} from {predictions.PREDICTIONS} ({first_line(err)}); running again")
        return False
    aside = set_aside(out, [METRICS])  # the DONE marker goes with it, and comes back below
    write_metrics(out, frame)
    write_atomic(out / DONE, utc_now() + "\n")
    log(f"{METRICS} unreadable ({bad[METRICS]}): moved to {aside.name}/, rebuilt from {predictions.PREDICTIONS} "
        f"without running again")
    return True


def rebuilt_frame(out: Path) -> pd.DataFrame:
    """The metrics frame of a finished run from its spec.json and predictions.npz. What the damaged
    file alone knew of the training (its host, device, SLURM job, versions, times) is lost: those columns say
    `unknown` (duration NaN, started/ended the rebuild's time) and `rebuilt_from` names the source.
    Predictions that name another run (copied in) raise `ForeignFile`; ones written before predictions
    named their run are accepted as before."""
    spec = RunSpec.from_json((out / "spec.json").read_text())
    predictions.check_owner(out / predictions.PREDICTIONS, spec.run_id)  # another run's: refused, not its metrics
    rows = predictions.replay(out / predictions.PREDICTIONS)
    frame = metrics_frame(spec, rows, torch.device("cpu"), utc_now(), float("nan"), _logged_mapping_images(out))
    # the version columns (the device among them) are the training's, not the rebuild's
    return frame.assign(host="unknown", slurm_job_id="unknown", **dict.fromkeys(VERSION_COLUMNS, "unknown"),
                        rebuilt_from=predictions.PREDICTIONS)


def _logged_mapping_images(out: Path) -> str:
    """Which images froze the task mappings, as the run logged it ("unknown" without its log)."""
    path = out / "log.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    said = [line for line in lines if "task mappings frozen on the " in line]
    return ("val" if "held-out validation" in said[-1] else "train") if said else "unknown"


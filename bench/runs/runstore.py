"""A run's directory while a process works in it: one process at a time (the lock), its log, and the
finished run's files (predictions, metrics, the DONE marker) written in that order.

What tells whether a run is done, without torch, is `bench.runs.rundir`; its checkpoint is `bench.runs.checkpoint`;
metrics rebuilt from stored predictions (they need the protocol's evaluation) are `bench.protocol.recompute`.
"""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from bench.core.provenance import utc_now
from bench.core.storage import write_atomic
from bench.splits.layout import TaskLayout
from bench.runs import predictions
from bench.runs.metrics_file import write_metrics
from bench.runs.provenance_file import provenance_of, write_provenance
from bench.runs.rundir import CHECKPOINT, DONE, RunBusy


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
    write_provenance(out, run_id, provenance_of(frame))
    write_metrics(out, frame)
    write_atomic(out / DONE, utc_now() + "\n")
    (out / CHECKPOINT).unlink(missing_ok=True)

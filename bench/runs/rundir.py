"""A run's directory and what tells whether it is done: the pieces of `bench.protocol.runner` that commands
which run nothing (`--dry-run`, `status`, the "nothing to run" check) need, without torch."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from bench.errors import BenchError, first_line
from bench.config.spec import RunSpec
from bench.core.storage import unwritable

DONE, ERROR, CHECKPOINT, METRICS = "DONE", "error.txt", "checkpoint.pt", "metrics.parquet"


class RunBusy(BenchError):
    """Another process holds this run's lock (two overlapping `bench run`s): this one stands aside."""


def run_dir(results: Path, spec: RunSpec) -> Path:
    return Path(results) / "runs" / spec.run_id


def unreadable(out: Path) -> dict[str, str]:
    """The files of a finished run directory that cannot be read, with why: a truncated
    `metrics.parquet` (its footer is read, not the data) or a `spec.json` that is not this run's JSON."""
    import pyarrow.parquet as pq

    bad: dict[str, str] = {}
    try:
        pq.read_metadata(out / METRICS)
    except Exception as err:  # pyarrow raises several types for damaged files
        bad[METRICS] = first_line(err)
    try:
        if json.loads((out / "spec.json").read_text()).get("run_id") != out.name:
            bad["spec.json"] = "it describes another run"
    except Exception as err:
        bad["spec.json"] = first_line(err)
    return bad


def is_done(results: Path, spec: RunSpec) -> bool:
    """A run is done when its DONE marker exists and its results can be read back."""
    out = run_dir(results, spec)
    return (out / DONE).exists() and not unreadable(out)


def set_aside(out: Path, names: Iterable[str]) -> Path:
    """Move damaged files (and the DONE marker that vouched for them) into `damaged-<time>/` of the
    run directory: kept for inspection, never deleted, and out of the way of the re-run."""
    aside = out / f"damaged-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}"
    aside.mkdir()
    for name in [*names, DONE]:
        if (out / name).exists():
            (out / name).replace(aside / name)
    return aside


def invalidate(results: Path, spec: RunSpec) -> None:
    """Make a finished run pending again (`--force`): its DONE marker and checkpoint go, the rest is
    overwritten when it finishes."""
    out = run_dir(results, spec)
    (out / DONE).unlink(missing_ok=True)
    (out / CHECKPOINT).unlink(missing_ok=True)



def check_writable(results: Path) -> None:
    """Fail early, with one line, when the results directory cannot be written."""
    err = unwritable(Path(results) / "runs")
    if err is not None:
        raise BenchError(f"results directory {results} is not writable ({err.strerror}); "
                         f"choose another with --results DIR")

"""A run's directory and what tells whether it is done: the pieces of `bench.protocol.runner` that commands
which run nothing (`--dry-run`, `status`, the "nothing to run" check) need, without torch."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from bench.errors import BenchError, first_line
from bench.config.spec import RunSpec
from bench.core.storage import unwritable

if TYPE_CHECKING:  # pyarrow is imported where a file is read
    import pyarrow.parquet as pq

DONE, ERROR, CHECKPOINT, METRICS = "DONE", "error.txt", "checkpoint.pt", "metrics.parquet"


class RunBusy(BenchError):
    """Another process holds this run's lock (two overlapping `bench run`s): this one stands aside."""


def run_dir(results: Path, spec: RunSpec) -> Path:
    return Path(results) / "runs" / spec.run_id


def unreadable(out: Path) -> dict[str, str]:
    """The files of a finished run directory that cannot be read, with why: a truncated `metrics.parquet`
    (its footer is read, not the data), one without the columns a run's rows have or holding another run's
    rows (copied in), or a `spec.json` that is not this run's JSON. Each is this run's results lost: it is
    not done (`is_done`), and is rebuilt from its predictions or runs again."""
    import pyarrow.parquet as pq

    bad: dict[str, str] = {}
    try:
        with pq.ParquetFile(out / METRICS) as file:
            foreign = _not_its_metrics(file, out.name)
        if foreign is not None:
            bad[METRICS] = foreign
    except Exception as err:  # pyarrow raises several types for damaged files
        bad[METRICS] = first_line(err)
    try:
        if json.loads((out / "spec.json").read_text()).get("run_id") != out.name:
            bad["spec.json"] = "it describes another run"
    except Exception as err:
        bad["spec.json"] = first_line(err)
    return bad


KEY_COLUMNS = ("run_id", "step", "group", "flavour", "metric", "value")  # what every metrics file has ever had


def _not_its_metrics(file: pq.ParquetFile, run_id: str) -> str | None:
    """Why a metrics file is not the run `run_id`'s rows (columns missing, another run's id), from
    the column statistics its footer keeps; None when it is. Each run's rows name its id: one value."""
    names = file.metadata.schema.names  # a flat file's columns, in the order of its column chunks
    missing = [c for c in KEY_COLUMNS if c not in names]
    if missing:
        return f"it has no column {', '.join(missing)}: not a run's metrics"
    meta, column = file.metadata, names.index("run_id")
    stats = [meta.row_group(g).column(column).statistics for g in range(meta.num_row_groups)]
    if all(s is not None and s.has_min_max for s in stats):
        ids = {str(v) for s in stats for v in (s.min, s.max)}
    else:  # written without statistics: the column itself (a few kB)
        ids = {str(v) for v in file.read(columns=["run_id"]).column(0).to_pylist()}
    others = sorted(ids - {run_id})
    if not others:
        return None
    return f"it holds the rows of run {', '.join(others)}, not of this run {run_id} (copied in?)"


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

"""What the evaluator was given, kept beside a run's metrics, so that its metrics can be recomputed
with the current evaluator without running it again (`bench metrics recompute`).

`predictions.npz` (one per run, written atomically with `metrics.parquet`) holds, for every step t:
`val_labels_t` and `val_pred_t` (the val images of task t, with the labels the run read, and task t's
own head's argmax on them: what froze task t's mapping), `test_labels_t`, `unified_t` (the unified
head's argmax on the test images of tasks 0..t) and `task_pred_t` (task t's head on task t's test
images, in their order); `mapping_t` (the frozen mapping, class → cluster, −1 for a class without a
val image), `refit_pred_t_s` for every earlier task s < t (task s's own head, read through the
encoder as it is after step t, on task s's val images: what re-fits its map, flavour `wo_refit`; for a
method that declares `RunsOn.frozen_task_heads`, the answer of step s, `val_pred_s`, which that is) with
the marker `refit_t`, `offsets`, `sizes` (the task layout) and `run_id` (the run it belongs to: another
run's file copied into a run directory is refused, `check_owner`). Integer arrays of the smallest type
that holds them, compressed: at most about 0.2 MB for a CIFAR-100 5-step run (docs/results.md).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.splits.layout import TaskLayout
from bench.core.storage import atomic_path

PREDICTIONS = "predictions.npz"


def compact(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.int64)
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if values.size == 0 or (values.min() >= info.min and values.max() <= info.max):
            return values.astype(dtype)
    return values


def record(store: dict[str, np.ndarray], step: int, *, val_labels: np.ndarray, val_pred: np.ndarray,
           test_labels: np.ndarray, unified: np.ndarray, task_pred: np.ndarray, mapping: np.ndarray,
           refit_pred: list[np.ndarray] | None = None) -> None:
    """Add step `step`'s inputs of the evaluator to `store` (kept in the run's checkpoint until it ends).
    `refit_pred[s]` is task s's head (s < step), read through the current encoder, on task s's val
    images: what re-fits its map (flavour `wo_refit`)."""
    for name, values in (("val_labels", val_labels), ("val_pred", val_pred), ("test_labels", test_labels),
                         ("unified", unified), ("task_pred", task_pred), ("mapping", mapping)):
        store[f"{name}_{step}"] = compact(values)
    if refit_pred is not None:
        store[f"refit_{step}"] = np.asarray([len(refit_pred)], dtype=np.int16)  # the step re-fitted its maps
        for s, values in enumerate(refit_pred):
            store[f"refit_pred_{step}_{s}"] = compact(values)


class ForeignFile(BenchError):
    """A stored file (predictions, checkpoint) that names another run than the one reading it."""


def foreign(path: Path, owner: str | None, run_id: str) -> str | None:
    """One line saying that `path` belongs to another run than `run_id`; None when it is this run's,
    or names no run (written before files named their run: accepted as before)."""
    if owner is None or owner == run_id:
        return None
    return f"{path} belongs to run {owner}, not to this run {run_id}"


def owner(path: Path) -> str | None:
    """The run id `path` (a predictions.npz) names, None for a file written before files named their run."""
    with np.load(path) as stored:  # allow_pickle=False: a damaged file holding objects raises ValueError
        return str(stored["run_id"]) if "run_id" in stored.files else None


def check_owner(path: Path, run_id: str) -> None:
    """Raise `ForeignFile` when the predictions at `path` are another run's: recomputing them would
    give this run another run's metrics."""
    why = foreign(path, owner(path), run_id)
    if why is not None:
        raise ForeignFile(f"{why} (copied from another run's directory?); remove it, or put back this run's own")


def write(out: Path, layout: TaskLayout, store: dict[str, np.ndarray], run_id: str) -> Path:
    path = Path(out) / PREDICTIONS
    with atomic_path(path) as tmp, tmp.open("wb") as fh:  # a file object: savez adds no `.npz` to it
        np.savez_compressed(fh, offsets=np.asarray(layout.offsets), sizes=np.asarray(layout.sizes),
                            run_id=np.asarray(run_id), **store)  # a string array: loads without pickle
    return path

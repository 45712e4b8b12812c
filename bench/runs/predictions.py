"""What the evaluator was given, kept beside a run's metrics so that they can be recomputed with the current
evaluator without running the run again (`bench metrics recompute`): `predictions.npz`, and its schema.

This module is the schema. Every reader and writer names the file's arrays through `Keys` (`Keys.unified(t)` is
`unified_<t>`), opens the file through `opened` (which checks its version) and reads the layout and setting
through `layout_of` and `is_mixed`; `declared` says whether a key is one the schema knows.

The file: a NumPy archive (`np.load`, no pickle), compressed, written once with `metrics.parquet`
(`bench.runs.runstore.finish`) from what the run kept in its checkpoint while it ran. t is a step (a step of
the mixed setting), 0-based; s < t an earlier step; i a training loop of step t, in the order the method ran them.
"int" means the smallest integer type that holds the values (int8, int16, int32, else int64: `compact`); a
CIFAR-100 5-step run keeps at most about 0.3 MB (docs/results.md says what takes the room).

Every file:

- `schema_version` (int16, scalar): `SCHEMA_VERSION` of the bench that wrote it; a file without it was written
  before the version was kept and is version 1.
- `offsets`, `sizes` (int64, one per step): the task layout; step k's classes are `offsets[k] .. offsets[k] +
  sizes[k] − 1` (`layout_of`).
- `run_id` (str, scalar): the run the file belongs to; another run's file copied into a run directory is refused
  (`check_owner`). Files written before it was kept name none and are read as before.
- `epoch_loss_<t>_<i>` (float32, one per epoch): the mean loss per epoch of training loop i of step t, which the
  run's page draws; none for a step without a trained loop, nor in runs finished before they were kept.
- `loss_unit_<t>_<i>` (int8, scalar): what one value of `epoch_loss_<t>_<i>` is the mean over, where it is not an
  epoch: its index in `LOSS_UNITS` (VB-CGCD's: 1, `SVI step`, one Adam step of its fit); absent: an epoch.
- `test_labels_<t>` (int, one per image): the labels of the test images of the classes of steps 0..t, in the test
  set's order.
- `unified_<t>` (int, one per image): the unified head's argmax (`logits`) on those images: clusters 0 .. (the
  classes the method was told of so far) − 1.

class-iNCD (`bench.protocol.class_incd`, written by `record`):

- `val_labels_<t>` (int, one per image): the labels of the images task t's map was frozen from (the `val`
  partition of CUB and Herbarium, the training images elsewhere: the run's `mapping_images`).
- `val_pred_<t>` (int, one per image): task t's own head's argmax on them (local clusters 0..C_t − 1): what froze
  task t's map.
- `task_pred_<t>` (int, one per image): task t's head's argmax on task t's test images, in the order they appear
  in `test_labels_<t>`.
- `mapping_<t>` (int, one per class of task t): the frozen map: for each class of task t (local index) the
  cluster it is matched to, −1 for a class without a mapping image.
- `refit_<t>` (int16, one value: t, the number of earlier maps re-fitted at step t): marks a step that recorded
  `refit_pred_<t>_<s>`; runs recorded before have none, and no `wo_refit` rows.
- `refit_pred_<t>_<s>` (int, one per image): task s's own head's argmax on task s's mapping images
  (`val_labels_<s>`), read through the encoder as it is after step t: what re-fits task s's map at step t
  (flavour `wo_refit`). For a method that declares `RunsOn.frozen_task_heads`, its answer at step s
  (`val_pred_<s>`), which that is.

The mixed setting (`bench.protocol.mixed`):

- `mixed_setting` (int8, one value: 1): the file is a mixed run's (`is_mixed`); that setting replays its rows.
- `k_given_<t>` (int, one value): the count of new classes step t's method was told: the true count, or the
  estimate of `setting.k` (step 0: its labelled classes).
- `selected_<t>` (int, one per training loop): the epoch (0-based) each training loop of step t kept, where the
  run selects one (`setting.selection` other than `last`).
- `epoch_score_<t>_<i>` (float32, one row per epoch scored): (epoch, score) of every epoch the selection scored in
  training loop i of step t (in the same runs).
- `trans_labels_<t>` (int, one per image): with `setting.evaluation=transductive`, t > 0, the labels of step t's
  training images, in the manifest's order.
- `trans_pred_<t>` (int, one per image): their semi-supervised k-means clusters (`bench.protocol.transductive`),
  which step t's `cgcd` rows score then.

A domain-shifted stream (`setting.domains`, version 2): `test_labels_<t>` and `unified_<t>` then hold the test
images of the classes of steps 0..t in every domain of the stream, and

- `domain_names` (str, one per domain): the stream's domains, in the order its stages first bring them.
- `stage_domains` (int, one per step): each step's domain (an index into `domain_names`).
- `test_domain_<t>` (int, one per image): the domain of each image of `test_labels_<t>`; step t's `cgcd` rows
  score those of the domains of steps 0..t, its `domain` rows each domain's.

Versions: 1, the arrays above but a stream's; 2, a file with a stream's arrays (only those files: the others are
still written as 1). Files written before `schema_version` was kept hold the same arrays and read as version 1. A change that an older bench would misread takes the next number; a file of a version newer than
`SCHEMA_VERSION` is refused in one line (`NewerSchema`) rather than misread.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from bench.core.storage import atomic_path
from bench.errors import BenchError
from bench.splits.layout import TaskLayout

PREDICTIONS = "predictions.npz"
SCHEMA_VERSION = 2  # the newest version this bench writes and reads (module docstring)
STREAM_VERSION = 2  # the version a file with a domain-shifted stream's arrays takes; every other file is still 1


class Pattern:
    """The key of one family of arrays, one per step (or per step and loop): `Pattern("unified_{t}")(3)` is
    `unified_3`. Indices are whole numbers; the names in braces say what each one counts."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.names = re.findall(r"\{(\w+)\}", pattern)
        self._match = re.compile(re.sub(r"\{\w+\}", r"(\\d+)", pattern))

    def __call__(self, *index: int) -> str:
        if len(index) != len(self.names):
            raise TypeError(f"{self.pattern} takes {len(self.names)} index(es), not {len(index)}")
        return self.pattern.format(**{name: int(i) for name, i in zip(self.names, index)})

    def indices(self, key: str) -> tuple[int, ...] | None:
        """The indices of `key` when it is of this family, else None."""
        found = self._match.fullmatch(key)
        return tuple(int(i) for i in found.groups()) if found else None

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


# what one value of a training loop's losses is the mean over (`loss_unit_<t>_<i>` holds the index; a checkpoint
# keeps numeric arrays only)
LOSS_UNITS = ("epoch", "SVI step", "iteration")


class Keys:
    """The name of every array of `predictions.npz` (module docstring): fixed names, and a `Pattern` per family."""

    version = "schema_version"
    offsets = "offsets"
    sizes = "sizes"
    run_id = "run_id"
    epoch_loss = Pattern("epoch_loss_{t}_{i}")
    loss_unit = Pattern("loss_unit_{t}_{i}")
    test_labels = Pattern("test_labels_{t}")
    unified = Pattern("unified_{t}")
    # class-iNCD
    val_labels = Pattern("val_labels_{t}")
    val_pred = Pattern("val_pred_{t}")
    task_pred = Pattern("task_pred_{t}")
    mapping = Pattern("mapping_{t}")
    refit = Pattern("refit_{t}")
    refit_pred = Pattern("refit_pred_{t}_{s}")
    # the mixed setting
    mixed = "mixed_setting"
    k_given = Pattern("k_given_{t}")
    selected = Pattern("selected_{t}")
    epoch_score = Pattern("epoch_score_{t}_{i}")
    trans_labels = Pattern("trans_labels_{t}")
    trans_pred = Pattern("trans_pred_{t}")
    # a domain-shifted stream (version 2)
    domain_names = "domain_names"
    stage_domains = "stage_domains"
    test_domain = Pattern("test_domain_{t}")


SCHEMA: tuple[str | Pattern, ...] = tuple(v for k, v in vars(Keys).items() if not k.startswith("_"))


def declared(key: str) -> bool:
    """Whether `key` is an array the schema declares."""
    return any(key == entry if isinstance(entry, str) else entry.indices(key) is not None for entry in SCHEMA)


class NewerSchema(BenchError):
    """A predictions file written by a newer bench, in a schema this one does not read."""


def version_of(stored: Mapping[str, np.ndarray]) -> int:
    """The schema version of a file's arrays: 1 for a file written before the version was kept."""
    if Keys.version not in stored:
        return 1
    return int(np.asarray(stored[Keys.version]).reshape(-1)[0])


def check_version(stored: Mapping[str, np.ndarray], where: Path | str) -> None:
    """Raise `NewerSchema` when the arrays (read from `where`) are of a version newer than this bench reads."""
    version = version_of(stored)
    if version > SCHEMA_VERSION:
        raise NewerSchema(f"{where} is predictions schema version {version}; this bench reads versions up to "
                          f"{SCHEMA_VERSION}: upgrade bench to read it")


@contextmanager
def opened(path: Path) -> Iterator[Mapping[str, np.ndarray]]:
    """The arrays of the predictions file `path` (each read when asked for), once its version is one this bench
    reads (`NewerSchema` otherwise)."""
    with np.load(path) as stored:  # allow_pickle=False: a damaged file holding objects raises ValueError
        check_version(stored, path)
        yield stored


def layout_of(stored: Mapping[str, np.ndarray]) -> TaskLayout:
    """The task layout the file was written with."""
    return TaskLayout(tuple(int(o) for o in stored[Keys.offsets]), tuple(int(s) for s in stored[Keys.sizes]))


def is_mixed(stored: Mapping[str, np.ndarray]) -> bool:
    """Whether the file is a run's of the mixed setting (else of class-iNCD)."""
    return Keys.mixed in stored


def each(stored: Mapping[str, np.ndarray], family: Pattern) -> dict[tuple[int, ...], np.ndarray]:
    """Every array of `family` in `stored`, by its indices, in their order (e.g. each loop's losses per step)."""
    found = {index: key for key in stored if (index := family.indices(key)) is not None}
    return {index: stored[found[index]] for index in sorted(found)}


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
    """Add class-iNCD step `step`'s inputs of the evaluator to `store` (kept in the run's checkpoint until it
    ends). `refit_pred[s]` is task s's head (s < step), read through the current encoder, on task s's mapping
    images: what re-fits its map (flavour `wo_refit`)."""
    for family, values in ((Keys.val_labels, val_labels), (Keys.val_pred, val_pred), (Keys.test_labels, test_labels),
                           (Keys.unified, unified), (Keys.task_pred, task_pred), (Keys.mapping, mapping)):
        store[family(step)] = compact(values)
    if refit_pred is not None:
        store[Keys.refit(step)] = np.asarray([len(refit_pred)], dtype=np.int16)  # the step re-fitted its maps
        for s, values in enumerate(refit_pred):
            store[Keys.refit_pred(step, s)] = compact(values)


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
    with opened(path) as stored:
        return str(stored[Keys.run_id]) if Keys.run_id in stored else None


def check_owner(path: Path, run_id: str) -> None:
    """Raise `ForeignFile` when the predictions at `path` are another run's: recomputing them would
    give this run another run's metrics (`NewerSchema` when this bench cannot read them)."""
    why = foreign(path, owner(path), run_id)
    if why is not None:
        raise ForeignFile(f"{why} (copied from another run's directory?); remove it, or put back this run's own")


def write(out: Path, layout: TaskLayout, store: dict[str, np.ndarray], run_id: str) -> Path:
    """Write `predictions.npz` in `out`: the arrays the run kept (`store`), its layout, run id and schema version."""
    path = Path(out) / PREDICTIONS
    with atomic_path(path) as tmp, tmp.open("wb") as fh:  # a file object: savez adds no `.npz` to it
        # only a stream's file is of version 2 (an older bench would score its rows over every domain): the rest
        # stay readable by a bench of version 1
        version = STREAM_VERSION if Keys.domain_names in store else 1
        arrays: dict[str, Any] = {Keys.version: np.asarray(version, dtype=np.int16), Keys.offsets: np.asarray(layout.offsets),
                  Keys.sizes: np.asarray(layout.sizes), Keys.run_id: np.asarray(run_id),  # a string array: no pickle
                  **store}
        np.savez_compressed(fh, **arrays)
    return path

"""Train/val partitions of an official train split, drawn once and persisted (docs/methods.md#train-and-val-partitions).

The authors re-draw CUB's 80/20 and Herbarium's 5-per-class partitions with the global numpy RNG at
every loader call, so different methods train on different images and their "val" images overlap
what was trained on. Here the partition is drawn once per class with a fixed seed and stored as
JSON, `<results>/partitions/<dataset>-<hash>.json`, next to the results; every method, seed and run
that reads the same files with the same rule reads that file back.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

import numpy as np

from bench.data.base import DatasetError
from bench.core.storage import write_atomic


def val_count(n: int, val_per_class: float | int) -> int:
    """How many of a class's n images are held out: a fraction (< 1) as the authors' int(f·n), or a
    count (>= 1); at least one image always stays for training."""
    k = int(n * val_per_class) if val_per_class < 1 else int(val_per_class)
    return max(0, min(k, n - 1))


def draw_partition(labels: np.ndarray, val_per_class: float | int, seed: int) -> np.ndarray:
    """Boolean val mask: `val_count` images of every class, drawn per class in label order."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        mask[rng.choice(idx, size=val_count(len(idx), val_per_class), replace=False)] = True
    return mask


def partition_path(name: str, labels: np.ndarray, files: list[str], val_per_class: float | int, seed: int,
                   directory: str | Path) -> Path:
    """The file name carries a hash of the file list, the labels and the rule, so a changed dataset
    or rule gets a new partition, never a stale one."""
    text = "\n".join(f"{f}\t{y}" for f, y in zip(files, labels.tolist())) + f"|{val_per_class}|{seed}"
    return Path(directory) / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"


def persisted_partition(name: str, labels: np.ndarray, files: Iterable[str], val_per_class: float | int,
                        seed: int, directory: str | Path | None) -> np.ndarray:
    """Boolean val mask over a train split (`files`, relative paths, with their `labels`), read back
    from `directory` when it was drawn before, else drawn and stored there (nothing is stored when
    `directory` is None). A stored file that cannot be read or does not fit the files is an error
    naming it, never silently redrawn."""
    files = list(files)
    labels = np.asarray(labels)
    if directory is None:
        return draw_partition(labels, val_per_class, seed)
    path = partition_path(name, labels, files, val_per_class, seed, directory)
    if path.exists():
        return _read(path, files)
    mask = draw_partition(labels, val_per_class, seed)
    record = {"dataset": name, "seed": seed, "val_per_class": val_per_class, "train_images": int((~mask).sum()),
              "val_images": int(mask.sum()), "val": [f for f, m in zip(files, mask) if m]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record, indent=1))  # concurrent jobs write the same content
    except OSError as err:
        raise DatasetError(f"cannot write the {name} train/val partition to {path}: {err}") from None
    return mask


def _read(path: Path, files: list[str]) -> np.ndarray:
    try:
        val = json.loads(path.read_text())["val"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DatasetError(f"corrupt partition file {path}: {type(err).__name__}: {err}; delete it to draw the "
                           f"partition again (every run that used it trained on the images it lists)") from None
    unknown = set(val) - set(files)
    if unknown:
        raise DatasetError(f"partition file {path} lists {len(unknown)} images that are not in the train split, "
                           f"e.g. {sorted(unknown)[0]}")
    chosen = set(val)
    return np.array([f in chosen for f in files], dtype=bool)

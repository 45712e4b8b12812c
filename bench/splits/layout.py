"""How a run's classes are cut into tasks (the class-iNCD steps, or the steps of the mixed setting): task k
owns a contiguous range of the dataset's classes in its class order."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TaskLayout:
    """Task k owns the classes [offsets[k], offsets[k] + sizes[k])."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]

    @classmethod
    def contiguous(cls, num_classes: int, n_steps: int) -> "TaskLayout":
        """The authors' split: interval = ceil(K/T); task t = [t·interval, min((t+1)·interval, K))."""
        if n_steps < 1:
            raise ValueError(f"a split needs at least 1 task, got {n_steps}")
        if n_steps > num_classes:
            raise ValueError(f"{n_steps} tasks need at least {n_steps} classes, the dataset has {num_classes}")
        interval = math.ceil(num_classes / n_steps)
        offsets = tuple(t * interval for t in range(n_steps))
        sizes = tuple(min(o + interval, num_classes) - o for o in offsets)
        if min(sizes) < 1:
            empty = [t for t, size in enumerate(sizes) if size < 1]
            raise ValueError(f"with ceil({num_classes}/{n_steps}) = {interval} classes per task, task(s) {empty} "
                             f"would be empty; choose another number of tasks")
        return cls(offsets, sizes)

    @property
    def n_steps(self) -> int:
        return len(self.offsets)

    @property
    def num_classes(self) -> int:
        return self.offsets[-1] + self.sizes[-1]

    def task_of(self, labels: np.ndarray) -> np.ndarray:
        """Task index of each absolute label (labels outside 0..K-1 are an error, not the last task)."""
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise ValueError(f"labels must lie in 0..{self.num_classes - 1}, got {labels.min()}..{labels.max()}")
        bounds = np.asarray(self.offsets[1:], dtype=np.int64)
        return np.searchsorted(bounds, labels, side="right").astype(np.int64)

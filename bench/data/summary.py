"""`bench data summary`: per task, the class range, class count, and train/test image counts; for a split of the
mixed setting (`happy-5-stage` ...), its labelled step and each later step's old and new classes and images."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from tabulate import tabulate

from bench.splits.layout import TaskLayout


def task_counts(train_per_class: Sequence[int], test_per_class: Sequence[int], n_steps: int) -> list[dict]:
    """The split's tasks with their sizes, from the number of images of each class (canonical order)."""
    layout = TaskLayout.contiguous(len(train_per_class), n_steps)
    rows = []
    for t, (offset, size) in enumerate(zip(layout.offsets, layout.sizes)):
        rows.append({"task": t + 1, "classes": f"{offset}-{offset + size - 1}", "num_classes": size,
                     "train": int(sum(train_per_class[offset: offset + size])),
                     "test": int(sum(test_per_class[offset: offset + size]))})
    return rows


def format_thousands(n: int) -> str:
    """The paper's appendix style, truncated to 0.1k: 25000 → 25.0k, 960 → 0.9k (the paper prints
    CUB's 960-image 5-step tasks as 0.9k, so it truncates rather than rounds)."""
    return f"{n // 100 / 10:.1f}k"


def summary_table(name: str, train_labels: np.ndarray, test_labels: np.ndarray, num_classes: int,
                  n_steps: int, val_count: int = 0, root: str = "") -> str:
    train = np.bincount(train_labels, minlength=num_classes)
    test = np.bincount(test_labels, minlength=num_classes)
    rows = task_counts(train.tolist(), test.tolist(), n_steps)
    table = tabulate([(r["task"], r["classes"], r["num_classes"], r["train"], format_thousands(r["train"]), r["test"])
                      for r in rows], headers=("task", "classes", "#classes", "train", "train (paper style)", "test"),
                     tablefmt="github")
    held = f", {val_count} val images held out of the official train split" if val_count else ""
    source = f" (read from {root})" if root else ""
    return (f"{name}: {num_classes} classes, {int(train.sum())} train and {int(test.sum())} test images{held}; "
            f"{n_steps}-step split{source}\n{table}")


def mixed_summary_table(name: str, split: str, train_labels: np.ndarray, test_labels: np.ndarray, num_classes: int,
                        partitioned: bool = False, root: str = "") -> str:
    """The mixed split `split` as `bench run` cuts the dataset with the protocol's own settings (the classes in
    their canonical order; a run's `split.json` says which images): the labelled classes and images of step 0,
    then per step the classes seen before and new, the images of each, and the test images of every class seen."""
    from bench.splits.manifests import labelled_count
    from bench.splits.settings import mixed_setting, protocol_for

    protocol = protocol_for(mixed_setting(split, partitioned), num_classes, train_labels)
    test = np.bincount(test_labels, minlength=num_classes)
    labelled = labelled_count(protocol, train_labels.tolist())
    seen = set(protocol.labelled_classes)
    rows = [(0, "labelled", 0, len(seen), 0, sum(labelled.values()), int(test[sorted(seen)].sum()))]
    for t, counts in enumerate(protocol.steps, 1):
        new = set(counts) - seen
        old_images = sum(n for c, n in counts.items() if c in seen)
        rows.append((t, "unlabelled", len(set(counts) & seen), len(new), old_images,
                     sum(counts[c] for c in new), int(test[sorted(seen | new)].sum())))
        seen |= new
    table = tabulate(rows, headers=("step", "images", "old classes", "new classes", "old images", "new images",
                                    "test (seen classes)"), tablefmt="github")
    source = f" (read from {root})" if root else ""
    return (f"{name}: {num_classes} classes, {len(train_labels)} train and {int(test.sum())} test images; {split}: "
            f"{len(protocol.labelled_classes)} labelled classes ({protocol.labelled_fraction:g} of their images "
            f"labelled), then {len(protocol.steps)} unlabelled steps{source}\n{table}")

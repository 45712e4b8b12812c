"""What a run's stored predictions say class by class (its page shows it): under one Hungarian match of the
unified head's clusters to the classes after the last step (flavour `w`, `bench.protocol.evaluate.hungarian_mapping`),
each class's accuracy, and the confusion of old and new classes: of the images of the classes seen before the last
step (old) and of the last step's (new), the share whose matched prediction is an old class, a new one, or a
cluster matched to no class."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from bench.protocol.evaluate import hungarian_mapping
from bench.runs.predictions import PREDICTIONS, Keys, layout_of, opened

KINDS = ("old", "new")


class PerClass(NamedTuple):
    """`classes`: per class (`cls`, `kind`, `images`, `accuracy` in %); `confusion`: rows old/new images, columns
    the kind of their matched prediction (old, new, unmatched), in % of the row."""

    classes: pd.DataFrame
    confusion: pd.DataFrame


def per_class(labels: np.ndarray, pred: np.ndarray, first_new: int) -> PerClass:
    """`labels` and the head's `pred` on the test images seen after the last step; classes from `first_new` on are
    the last step's (new)."""
    labels, pred = np.asarray(labels, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    mapping = hungarian_mapping(labels, pred)
    seen = set(np.unique(labels).tolist())  # the match pairs every cluster with some index: a class or none seen
    matched = np.array([c if (c := mapping.get(int(p), -1)) in seen else -1 for p in pred], dtype=np.int64)
    rows = []
    for c in np.unique(labels):
        mine = labels == c
        rows.append(dict(cls=int(c), kind=KINDS[int(c >= first_new)], images=int(mine.sum()),
                         accuracy=100.0 * float((matched[mine] == c).mean())))
    truth = np.where(labels >= first_new, "new", "old")
    said = np.where(matched < 0, "unmatched", np.where(matched >= first_new, "new", "old"))
    confusion = pd.DataFrame(0.0, index=list(KINDS), columns=[*KINDS, "unmatched"])
    for kind in KINDS:
        mine = truth == kind
        for column in confusion.columns:
            confusion.loc[kind, column] = 100.0 * float((said[mine] == column).mean()) if mine.any() else float("nan")
    return PerClass(pd.DataFrame(rows, columns=["cls", "kind", "images", "accuracy"]), confusion)


def of_run(directory: Path) -> PerClass | None:
    """`per_class` of a finished run's last step, from its `predictions.npz`; None without them (or where this
    bench cannot read them)."""
    try:
        with opened(Path(directory) / PREDICTIONS) as stored:
            layout = layout_of(stored)
            last = layout.n_steps - 1
            labels, pred = stored[Keys.test_labels(last)], stored[Keys.unified(last)]
    except Exception:  # missing, damaged (numpy and zipfile raise many types), or of a newer schema
        return None
    return per_class(labels, pred, layout.offsets[last])

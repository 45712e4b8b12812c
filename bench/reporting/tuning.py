"""The tuning block (docs/settings.md#tuning): per method, its number as its authors tune and select it beside its
number tuned by a `bench tune` study that never read the test images, and the gap.

A run tuned by bench holds its study in its `tuning` section and says so in its split label (`· tuned (validation
0.2, 20 trials)`, `bench.config.spec.RunSpec.split_label`), so results never average it with runs tuned otherwise.
The block pairs, per (dataset, split, method), the runs without that mark (the preset's values: the authors'
tuning; their selection rule, marked where it reads the test set) with the tuned ones, by the protocol's split name.
Where several of the authors' protocols ran (the last epoch, the authors' own selection), the one that reads the
test set is theirs as published; else the plain one.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bench.reporting.aggregate import seed_values
from bench.reporting.stats import ci95_half_width

TUNED_MARK = " · tuned ("
ORACLE = "ORACLE ON TEST"
COLUMNS = ["dataset", "split", "method", "as its authors tune (their protocol)", "A (authors')",
           "tuned by bench (study)", "A (tuned)", "gap (tuned − authors')", "seeds"]


def _interval(values: list[float]) -> str:
    """`mean [low, high]`: the mean and its 95% t interval over seeds (the mean alone for one seed)."""
    mean = float(np.mean(values))
    half = ci95_half_width(float(np.std(values, ddof=1)) if len(values) > 1 else math.nan, len(values))
    return f"{mean:.1f}" if math.isnan(half) else f"{mean:.1f} [{mean - half:.1f}, {mean + half:.1f}]"


def _base(split: str) -> str:
    return split.split(" · ")[0]


def tuning_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, split name, method) that has both kinds of runs (module docstring); empty otherwise."""
    values = seed_values(frame) if len(frame) else pd.DataFrame()
    if values.empty:
        return pd.DataFrame()
    values = values[values["metric"] == "A"]
    tuned = values[values["split"].str.contains(TUNED_MARK, regex=False)]
    if tuned.empty:
        return pd.DataFrame()
    theirs = values[~values["split"].str.contains(TUNED_MARK, regex=False)]
    rows = []
    for (dataset, label, split), ours in tuned.groupby(["dataset", "label", "split"], sort=True):
        candidates = theirs[(theirs["dataset"] == dataset) & (theirs["label"] == label)
                            & (theirs["split"].map(_base) == _base(split))]
        if candidates.empty:
            continue
        splits = list(dict.fromkeys(candidates["split"]))
        chosen = next((s for s in splits if ORACLE in s), splits[0])
        authors = candidates[candidates["split"] == chosen].set_index("seed")["value"]
        bench = ours.set_index("seed")["value"]
        paired = sorted(set(authors.index) & set(bench.index))
        gap = _interval([float(bench[s] - authors[s]) for s in paired]) if paired else "--"
        rows.append({"dataset": dataset, "split": _base(split), "method": label,
                     "as its authors tune (their protocol)": chosen, "A (authors')": _interval(list(authors)),
                     "tuned by bench (study)": split.split(TUNED_MARK, 1)[1].rstrip(")"),
                     "A (tuned)": _interval(list(bench)), "gap (tuned − authors')": gap,
                     "seeds": f"{len(authors)} / {len(bench)}"})
    return pd.DataFrame(rows, columns=COLUMNS) if rows else pd.DataFrame()

"""Seed statistics a reviewer accepts: 95% confidence intervals of a mean over seeds (Student's t,
n − 1 degrees of freedom) and the paired difference of two methods over the seeds they share."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd


def t_quantile(dof: int, level: float = 0.95) -> float:
    """Student's t quantile: `scipy.stats.t.ppf` computes it with this very function of `scipy.special`, whose
    import takes a tenth of `scipy.stats`'s (2 s of a first `bench.results`: docs/performance.md)."""
    from scipy.special import stdtrit  # imported where used: reports without several seeds never need it

    return float(stdtrit(dof, 0.5 + level / 2))


def ci95_half_width(std: float, n: int) -> float:
    """Half-width of the 95% confidence interval of a mean of n values with sample std `std`; NaN for n < 2."""
    if n < 2 or pd.isna(std):
        return math.nan
    return t_quantile(n - 1) * std / math.sqrt(n)


# The range a percentage metric can take: an accuracy lies in [0, 100]; a forgetting (an accuracy
# minus another) in [-100, 100]. A t interval over few seeds can run past it (44.7 – 133.7 for an F of
# 89 ± 18 over 3 seeds); shown, it is cut to the range, since no seed could land outside it.
METRIC_RANGE = {"A": (0.0, 100.0), "F": (-100.0, 100.0)}


def ci95_bounds(mean: float, half_width: float, metric: str) -> tuple[float, float]:
    """The 95% interval mean ± half_width, cut to the metric's range (METRIC_RANGE; others uncut)."""
    low, high = METRIC_RANGE.get(metric, (-math.inf, math.inf))
    return max(low, mean - half_width), min(high, mean + half_width)


def paired_differences(frame: pd.DataFrame, first: str, second: str) -> pd.DataFrame:
    """Per (split, dataset, metric): the mean over shared seeds of `first` − `second`, its 95% CI, the
    number of shared seeds and whether the interval excludes 0 (`beyond noise`). `frame` has one row
    per (split, dataset, label, metric, seed) with its `value`."""
    pivot = frame[frame["label"].isin([first, second])].pivot_table(
        index=["split", "dataset", "metric", "seed"], columns="label", values="value", observed=True)
    if first not in pivot or second not in pivot:
        return pd.DataFrame(columns=["split", "dataset", "metric", "n", "diff", "ci_low", "ci_high", "beyond_noise"])
    diff = (pivot[first] - pivot[second]).dropna().rename("d").reset_index()
    rows = []
    for (split, dataset, metric), group in diff.groupby(["split", "dataset", "metric"], observed=True, sort=True):
        n, (mean, half) = len(group), _mean_and_half_width(group["d"])
        rows.append(dict(split=split, dataset=dataset, metric=metric, n=n, diff=mean, ci_low=mean - half,
                         ci_high=mean + half, beyond_noise=bool(n >= 2 and abs(mean) > half)))
    return pd.DataFrame(rows)


def _mean_and_half_width(d: pd.Series) -> tuple[float, float]:
    return float(d.mean()), ci95_half_width(float(d.std(ddof=1)), len(d))


def _shared_differences(first: Mapping[int, float] | None, second: Mapping[int, float] | None) -> pd.Series:
    """first − second over the seeds both cells have a value for; a cell without per-seed values (NaN) has none."""
    first, second = (v if isinstance(v, Mapping) else {} for v in (first, second))
    return pd.Series([first[s] - second[s] for s in sorted(set(first) & set(second))], dtype=float).dropna()


def separable(first: Mapping[int, float] | None, second: Mapping[int, float] | None) -> bool | None:
    """Whether two cells' values (by seed) differ beyond seed noise: the 95% CI of their paired
    difference over the seeds both have excludes 0. None where that cannot be told (fewer than two
    shared seeds); a cell without per-seed values (NaN) has none."""
    d = _shared_differences(first, second)
    if len(d) < 2:
        return None
    mean, half = _mean_and_half_width(d)
    return bool(abs(mean) > half)


def paired_pvalue(first: Mapping[int, float] | None, second: Mapping[int, float] | None) -> float:
    """The two-sided paired t-test's p-value of two cells' values (by seed) over the seeds both have: below 0.05
    exactly where `separable` is True (the test behind its interval). NaN where `separable` is None; differences
    all equal: 0, or 1 where they are all 0."""
    d = _shared_differences(first, second)
    if len(d) < 2:
        return math.nan
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if not sd > 0:
        return 1.0 if mean == 0 else 0.0
    from scipy.stats import t

    return float(2 * t.sf(abs(mean) / (sd / math.sqrt(len(d))), len(d) - 1))


CORRECTIONS = ("holm", "bh")
CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg"}


def adjust(pvalues: np.ndarray | Sequence[float], method: str = "holm") -> np.ndarray:
    """p-values adjusted for the number of tests: `holm` (Holm's step-down, controls the chance of any false
    "significant" mark) or `bh` (Benjamini–Hochberg, controls the share of false ones among those marked; scipy's
    `false_discovery_control`). NaN (a test not made) is kept out of the count and stays NaN."""

    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; choose from {', '.join(CORRECTIONS)}")
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    made = ~np.isnan(p)
    if not made.any():
        return out
    if method == "bh":
        from scipy.stats import false_discovery_control

        out[made] = false_discovery_control(p[made], method="bh")
        return out
    q = p[made]
    order = np.argsort(q, kind="stable")
    m = len(q)
    # the i-th smallest (from 0) times m − i, made non-decreasing, capped at 1
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
    held = np.empty(m)
    held[order] = stepped
    out[made] = held
    return out

"""Ranks of methods over blocks (Demšar 2006): each block (a split × dataset cell of the report) ranks the methods
by their mean over seeds, 1 the best, ties sharing the mean of their ranks; the Friedman test asks whether the
average ranks differ more than chance would make them; a post-hoc test then tells which pairs differ: Nemenyi's
(every pair, one critical difference of average ranks) or Wilcoxon's signed-rank test per pair over the blocks'
values, its p-values corrected for the number of pairs (Holm, Benjamini–Hochberg: `stats.adjust`). A bootstrap
over the blocks gives each average rank an interval. scipy does the tests; this module only arranges the blocks."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from bench.reporting.stats import CORRECTION_NAMES, adjust

POSTHOCS = ("nemenyi", "wilcoxon-holm")
LOWER_IS_BETTER = {"F"}
ALPHA = 0.05


@dataclass(frozen=True)
class Blocks:
    """The methods' mean values per block: `values` has a row per block (split, dataset) and a column per method
    ranked (those with a value in every block); `left_out` says, a line each, which methods are not ranked and
    why; `seeds` the fewest and most seeds behind a value."""

    metric: str
    values: pd.DataFrame
    left_out: tuple[str, ...]
    seeds: tuple[int, int]

    @property
    def datasets(self) -> int:
        return self.values.index.get_level_values("dataset").nunique() if len(self.values) else 0

    @property
    def splits(self) -> int:
        return self.values.index.get_level_values("split").nunique() if len(self.values) else 0

    def rests_on(self) -> str:
        low, high = self.seeds
        seeds = f"{low}" if low == high else f"{low}–{high}"
        return (f"{len(self.values)} blocks ({self.datasets} dataset(s) × {self.splits} split(s)), "
                f"{self.values.shape[1]} methods, {seeds} seed(s) per value")


def blocks(scores: pd.DataFrame, metric: str) -> Blocks:
    """`Blocks` of `metric` from `aggregate.final_scores`: a method missing a block is left out (named), since a
    rank needs every method in every block."""
    part = scores[scores["metric"] == metric].astype({"split": str, "dataset": str, "label": str})
    table = part.pivot_table(index=["split", "dataset"], columns="label", values="mean", sort=False)
    order = list(dict.fromkeys(part["label"]))
    table = table.reindex(columns=[label for label in order if label in table])
    left_out = []
    for label in table.columns[table.isna().any()]:
        missing = [" / ".join(b) for b in table.index[table[label].isna()]]
        left_out.append(f"{label}: not ranked, no {metric} in {', '.join(missing)}")
    values = table.dropna(axis=1)
    counts = part[part["label"].isin(values.columns)]["n"]
    seeds = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
    return Blocks(metric, values, tuple(left_out), seeds)


def rank_matrix(values: np.ndarray, lower_is_better: bool = False) -> np.ndarray:
    """Ranks within each row (block), 1 the best, ties averaged."""
    from scipy.stats import rankdata

    return rankdata(values if lower_is_better else -np.asarray(values, dtype=float), axis=1)


def refusal(part: Blocks) -> str | None:
    """One line saying why ranks cannot be told from `part`, None when they can."""
    if len(part.values) < 2:
        return (f"ranks of {part.metric} refused: {len(part.values)} block(s) (split × dataset) with every method; "
                f"ranks need at least 2")
    if part.values.shape[1] < 2:
        return f"ranks of {part.metric} refused: {part.values.shape[1]} method(s) in every block; ranks need at least 2"
    return None


@dataclass(frozen=True)
class Ranks:
    """Average ranks with their bootstrap interval, the Friedman test and the post-hoc pairs of one metric."""

    blocks: Blocks
    average: pd.Series  # method → average rank, best first
    low: pd.Series  # the bootstrap interval's ends
    high: pd.Series
    resamples: int
    friedman: tuple[float, float] | None  # (chi², p), None with two methods (Friedman needs three)
    iman_davenport: tuple[float, float] | None  # (F, p): Demšar's less conservative form of the same test
    posthoc: str
    pvalues: pd.DataFrame  # method × method, the post-hoc's p-values (corrected for Wilcoxon–Holm)
    critical_difference: float | None  # Nemenyi's, in average ranks
    cliques: list[list[str]] = field(default_factory=list)  # runs of methods no pair of which differs
    correction: str = "holm"  # of the Wilcoxon pairs

    @property
    def test(self) -> str:
        """The post-hoc test's name as reports print it."""
        return "Nemenyi" if self.posthoc == "nemenyi" else f"Wilcoxon signed-rank, {CORRECTION_NAMES[self.correction]}"


def rank(part: Blocks, posthoc: str = "nemenyi", resamples: int = 1000, seed: int = 0,
         correction: str = "holm", alpha: float = ALPHA) -> Ranks:
    """The `Ranks` of `part` (check `refusal` first). `correction` corrects the Wilcoxon pairs (`wilcoxon-holm`
    uses Holm unless told `bh`)."""
    if posthoc not in POSTHOCS:
        raise ValueError(f"unknown post-hoc test {posthoc!r}; choose from {', '.join(POSTHOCS)}")
    values = part.values.to_numpy(dtype=float)
    methods = list(part.values.columns)
    ranks = rank_matrix(values, part.metric in LOWER_IS_BETTER)
    n, k = ranks.shape
    average = pd.Series(ranks.mean(axis=0), index=methods)
    # the blocks resampled with replacement: each resample's average ranks, as a matrix product
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)
    boot = counts @ ranks / n
    low = pd.Series(np.percentile(boot, 2.5, axis=0), index=methods)
    high = pd.Series(np.percentile(boot, 97.5, axis=0), index=methods)
    friedman = iman = None
    if k >= 3:
        from scipy.stats import f as f_dist, friedmanchisquare

        chi2, p = friedmanchisquare(*values.T)
        friedman = (float(chi2), float(p))
        if n > 1 and chi2 < n * (k - 1):
            ff = (n - 1) * chi2 / (n * (k - 1) - chi2)
            iman = (float(ff), float(f_dist.sf(ff, k - 1, (k - 1) * (n - 1))))
    cd = None
    if posthoc == "nemenyi":
        pvalues, cd = nemenyi(average.to_numpy(), n), nemenyi_cd(k, n, alpha)
    else:
        pvalues = wilcoxon_pairs(values, correction)
    pvalues = pd.DataFrame(pvalues, index=methods, columns=methods)
    order = average.sort_values(kind="stable").index
    return Ranks(part, average[order], low[order], high[order], resamples, friedman, iman, posthoc,
                 pvalues.loc[order, order], cd, cliques(list(order), pvalues.loc[order, order], alpha), correction)


def nemenyi(average: np.ndarray, n_blocks: int) -> np.ndarray:
    """Nemenyi's p-value of every pair of average ranks over `n_blocks` blocks: the studentized range of k
    means at infinite degrees of freedom, of |R_i − R_j| / sqrt(k(k+1) / 6N) · sqrt(2)."""
    from scipy.stats import studentized_range

    k = len(average)
    q = np.abs(average[:, None] - average[None, :]) / math.sqrt(k * (k + 1) / (6.0 * n_blocks))
    p = studentized_range.sf(q * math.sqrt(2.0), k, np.inf)
    np.fill_diagonal(p, 1.0)
    return p


def nemenyi_cd(k: int, n_blocks: int, alpha: float = ALPHA) -> float:
    """The critical difference of average ranks: q_α sqrt(k(k+1) / 6N), q_α the studentized range's
    1 − α quantile over sqrt(2) (Demšar's Table 5: 2.569 for k = 4 at α = 0.05)."""
    from scipy.stats import studentized_range

    q_alpha = float(studentized_range.ppf(1 - alpha, k, np.inf)) / math.sqrt(2.0)
    return q_alpha * math.sqrt(k * (k + 1) / (6.0 * n_blocks))


def wilcoxon_pairs(values: np.ndarray, correction: str = "holm") -> np.ndarray:
    """Wilcoxon's signed-rank test of every pair of columns over the rows (blocks), its p-values corrected over
    the pairs. A pair whose values are equal in every block has p = 1 (scipy refuses it: no difference to rank)."""
    from scipy.stats import wilcoxon

    k = values.shape[1]
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    raw = []
    for i, j in pairs:
        d = values[:, i] - values[:, j]
        raw.append(1.0 if not np.any(d) else float(wilcoxon(values[:, i], values[:, j]).pvalue))
    corrected = adjust(np.asarray(raw), correction) if raw else np.asarray([])
    p = np.ones((k, k))
    for (i, j), value in zip(pairs, corrected):
        p[i, j] = p[j, i] = value
    return p


def cliques(order: Sequence[str], pvalues: pd.DataFrame, alpha: float = ALPHA) -> list[list[str]]:
    """The maximal runs of consecutive methods (in rank order) no pair of which differs at `alpha`: the bars of a
    critical-difference diagram. Runs of one method are left out; a run inside another too."""
    runs: list[tuple[int, int]] = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and all(pvalues.loc[order[a], order[j + 1]] >= alpha for a in range(i, j + 1)):
            j += 1
        if j > i and not any(a <= i and j <= b for a, b in runs):
            runs.append((i, j))
    return [list(order[a:b + 1]) for a, b in runs]


def rank_texts(scores: pd.DataFrame, metric: str = "A", resamples: int = 1000) -> dict[str, str]:
    """Each ranked method's average rank of `metric` with its bootstrap interval, as a leaderboard shows it
    (`2.50 (1.00–4.00)`); empty where ranks are refused (fewer than 2 blocks with every method)."""
    part = blocks(scores, metric)
    if refusal(part):
        return {}
    r = rank(part, resamples=resamples)
    return {m: f"{r.average[m]:.2f} ({r.low[m]:.2f}–{r.high[m]:.2f})" for m in r.average.index}

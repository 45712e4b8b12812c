"""The statistics part of a report (`bench report`): the methods' average ranks over the blocks (split × dataset
cells) with bootstrap intervals, the Friedman test, a post-hoc test drawn as a critical-difference diagram
(`ranks`, `cdplot`), and every method compared with the best of each block, its p-values corrected for their
number (Holm or Benjamini–Hochberg, `stats.adjust`) and, where runs stored their predictions, a paired bootstrap
over test images and seeds (`image_bootstrap`). Each part says what it rests on, or in one line why it is refused."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from bench.core.progress import LoggedProgress
from bench.reporting.ranks import LOWER_IS_BETTER, POSTHOCS, Ranks, blocks, rank, refusal
from bench.reporting.stats import CORRECTION_NAMES, CORRECTIONS, adjust

METRICS = ("A", "F")


@dataclass(frozen=True)
class Options:
    """`bench report --posthoc --correction --bootstrap`: the post-hoc test of the ranks, the correction of the
    paired comparisons, and the resamples of each bootstrap (0: no image bootstrap)."""

    posthoc: str = "nemenyi"
    correction: str = "holm"
    resamples: int = 1000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.posthoc not in POSTHOCS:
            raise ValueError(f"unknown post-hoc test {self.posthoc!r}; choose from {', '.join(POSTHOCS)}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"unknown correction {self.correction!r}; choose from {', '.join(CORRECTIONS)}")
        if self.resamples < 0:
            raise ValueError(f"--bootstrap takes a number of resamples >= 0 (0: none), not {self.resamples}")


@dataclass
class Statistics:
    options: Options
    ranks: dict[str, Ranks] = field(default_factory=dict)  # metric → its ranks, where not refused
    notes: dict[str, list[str]] = field(default_factory=dict)  # metric (or "bootstrap") → one-line refusals
    comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    seconds: float = 0.0


def compute(frame: pd.DataFrame, scores: pd.DataFrame, runs: Mapping[str, Path] | None = None,
            options: Options = Options()) -> Statistics:
    """The statistics of a report's runs: `frame` (the loaded metrics), `scores` (its `final_scores`), `runs`
    (run id → directory, where predictions are read for the image bootstrap; None: no image bootstrap)."""
    start = time.perf_counter()
    out = Statistics(options)
    for metric in METRICS:
        part = blocks(scores, metric)
        out.notes[metric] = list(part.left_out)
        refused = refusal(part)
        if refused:
            out.notes[metric].append(refused)
            continue
        out.ranks[metric] = rank(part, options.posthoc, max(options.resamples, 1), correction=options.correction,
                                 alpha=options.alpha)
        if part.values.shape[1] < 3:
            out.notes[metric].append(f"Friedman test of {metric} refused: {part.values.shape[1]} methods; it needs "
                                     f"at least 3 (the post-hoc test compares the pair)")
    boot, out.notes["bootstrap"] = ({}, []) if not runs or not options.resamples else\
        _bootstrap(frame, scores, runs, options)
    out.comparisons = comparisons(scores, options, boot)
    out.seconds = time.perf_counter() - start
    return out


def comparisons(scores: pd.DataFrame, options: Options,
                boot: Mapping[tuple[str, str, str], object] | None = None) -> pd.DataFrame:
    """Every method against the best of its block (by its mean), per metric: the mean difference over the seeds
    both ran, the paired t-test's p-value, that p-value corrected over the whole table, and where `boot` has the
    pair's image bootstrap ((split, dataset, label) → `image_bootstrap.Paired`, for A) its interval and the
    probability that the method is better than the best. A pair with fewer than 2 shared seeds is not tested."""
    from scipy.stats import ttest_rel

    rows = []
    for (split, dataset, metric), group in scores.groupby(["split", "dataset", "metric"], observed=True, sort=True):
        group = group.dropna(subset=["mean"])
        if len(group) < 2:
            continue
        best = group.loc[group["mean"].idxmin() if metric in LOWER_IS_BETTER else group["mean"].idxmax()]
        best_seeds = best["by_seed"] if isinstance(best.get("by_seed"), Mapping) else {}
        for _, row in group.iterrows():
            if row["label"] == best["label"]:
                continue
            mine = row["by_seed"] if isinstance(row.get("by_seed"), Mapping) else {}
            shared = sorted(set(mine) & set(best_seeds))
            a, b = np.array([mine[s] for s in shared]), np.array([best_seeds[s] for s in shared])
            p, d = math.nan, a - b
            # the same difference on every seed (to rounding: 0.5 - 0.7 and 0.6 - 0.8 differ in the last bit) leaves
            # a t-test nothing to weigh: scipy gives p = 0 and a precision warning; such a pair is not tested
            if len(shared) >= 2 and not np.ptp(d) <= 1e-9 * np.abs(d).max():
                p = float(ttest_rel(a, b).pvalue)
            elif len(shared) >= 2 and not np.any(d):
                p = 1.0
            paired = (boot or {}).get((str(split), str(dataset), str(row["label"]))) if metric == "A" else None
            rows.append(dict(split=str(split), dataset=str(dataset), metric=metric, method=str(row["label"]),
                             best=str(best["label"]), diff=float(np.mean(a - b)) if shared else math.nan,
                             seeds=len(shared), p=p, images=getattr(paired, "images", math.nan),
                             boot_low=getattr(paired, "low", math.nan), boot_high=getattr(paired, "high", math.nan),
                             p_better=getattr(paired, "p_improvement", math.nan)))
    table = pd.DataFrame(rows, columns=["split", "dataset", "metric", "method", "best", "diff", "seeds", "p",
                                        "images", "boot_low", "boot_high", "p_better"])
    table["p_adjusted"] = adjust(table["p"].to_numpy(), options.correction) if len(table) else []
    table["significant"] = table["p_adjusted"] < options.alpha
    return table


def _bootstrap(frame: pd.DataFrame, scores: pd.DataFrame, runs: Mapping[str, Path],
               options: Options) -> tuple[dict[tuple[str, str, str], Any], list[str]]:
    """The image × seed bootstrap of A of every method against its block's best; and one line per kind of run
    left out (no stored predictions, a setting not bootstrapped)."""
    from bench.reporting.aggregate import reported_sources
    from bench.reporting.image_bootstrap import NotBootstrapped, Paired, bootstrap_scores, load_scorer, paired

    identity = reported_sources(frame).drop_duplicates("run_id")[["run_id", "split", "dataset", "label", "seed",
                                                                    "reported_A"]]
    out: dict[tuple[str, str, str], Paired] = {}
    why: dict[str, list[str]] = {}
    a = scores[scores["metric"] == "A"].dropna(subset=["mean"])
    cells = identity.groupby(["split", "dataset"], observed=True, sort=True)
    # about a minute for the `full` grid's 337 runs (docs/performance.md): a line on stderr every 10 s
    progress = LoggedProgress("bootstrap of the report's statistics", cells.ngroups,
                              lambda line: print(f"bench: {line}", file=sys.stderr, flush=True), unit="cells",
                              every_s=10)
    for (split, dataset), cell in cells:
        progress.advance(1)
        means = a[(a["split"].astype(str) == str(split)) & (a["dataset"].astype(str) == str(dataset))]
        if len(means) < 2:
            continue
        scorers = {}
        for r in cell.itertuples():
            if (str(r.label), int(r.seed)) in scorers:  # pooled class orders: one run per seed is paired
                why.setdefault("another run of its method and seed in its cell was paired (pooled orders?)",
                               []).append(r.run_id)
                continue
            try:
                scorers[(str(r.label), int(r.seed))] = load_scorer(runs[r.run_id], str(r.reported_A))
            except (NotBootstrapped, KeyError) as err:
                why.setdefault(str(err) if isinstance(err, NotBootstrapped) else "no run directory", []).append(r.run_id)
        if not scorers:
            continue
        drawn = bootstrap_scores(scorers, options.resamples)
        best = str(means.loc[means["mean"].idxmax(), "label"])
        for label in means["label"].astype(str):
            if label != best:
                result = paired(scorers, drawn, label, best)
                if result is not None:
                    out[(str(split), str(dataset), label)] = result
    notes = [f"image bootstrap leaves out {len(ids)} run(s): {reason} ({', '.join(sorted(ids)[:3])}"
             f"{', …' if len(ids) > 3 else ''})" for reason, ids in why.items()]
    return out, notes


def number(value: float, digits: int = 3) -> str:
    """A p-value or statistic as text: `--` where none, `<0.001` below what the digits show."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    return f"<{10 ** -digits:.{digits}f}" if 0 < value < 10 ** -digits else f"{value:.{digits}f}"


def rank_rows(r: Ranks) -> list[tuple[str, ...]]:
    return [(str(i + 1), m, f"{r.average[m]:.2f}", f"{r.low[m]:.2f} – {r.high[m]:.2f}")
            for i, m in enumerate(r.average.index)]


def test_lines(r: Ranks) -> list[str]:
    """The Friedman test and the post-hoc's summary, a sentence each, with what they rest on."""
    lines = [f"Rests on {r.blocks.rests_on()}; rank intervals: 95% percentile bootstrap over the blocks "
             f"({r.resamples} resamples)."]
    k, n = r.pvalues.shape[0], len(r.blocks.values)
    if r.friedman is not None:
        chi2, p = r.friedman
        lines.append(f"Friedman test: χ² = {chi2:.3f} ({k - 1} df), p = {number(p)}"
                     + (f"; Iman–Davenport F = {r.iman_davenport[0]:.3f} ({k - 1}, {(k - 1) * (n - 1)} df), "
                        f"p = {number(r.iman_davenport[1])}" if r.iman_davenport else "") + ".")
    differ = [(a, b) for i, a in enumerate(r.pvalues.index) for b in r.pvalues.index[i + 1:]
              if r.pvalues.loc[a, b] < 0.05]
    cd = f"; critical difference {r.critical_difference:.3f} average ranks at α = 0.05"\
        if r.critical_difference is not None else ""
    lines.append(f"Post-hoc: {r.test}{cd}; pairs that differ (p < 0.05): "
                 + (", ".join(f"{a} vs {b} (p = {number(r.pvalues.loc[a, b])})" for a, b in differ) or "none") + ".")
    return lines


def comparison_rows(table: pd.DataFrame) -> list[tuple[str, ...]]:
    def interval(r: pd.Series) -> str:
        return "--" if math.isnan(r["boot_low"]) else f"{r['boot_low']:+.2f} … {r['boot_high']:+.2f}"

    return [(r["split"], r["dataset"], r["metric"], r["method"], r["best"],
             "--" if math.isnan(r["diff"]) else f"{r['diff']:+.2f}", str(r["seeds"]), number(r["p"]),
             number(r["p_adjusted"]), "yes" if r["significant"] else "no",
             "--" if math.isnan(r["images"]) else str(int(r["images"])), interval(r), number(r["p_better"], 2))
            for _, r in table.iterrows()]


COMPARISON_HEADERS = ("split", "dataset", "metric", "method", "best of block", "Δ (method − best)", "seeds",
                      "p (paired t)", "p corrected", "significant", "images", "95% interval (images × seeds)",
                      "P(method better)")


def comparison_note(stats: Statistics) -> str:
    table, o = stats.comparisons, stats.options
    tested = int(table["p"].notna().sum()) if len(table) else 0
    return (f"Each method against the best of its block (by mean): the paired t-test over the seeds both ran, its "
            f"p-value corrected with {CORRECTION_NAMES[o.correction]} over the {tested} tests of this table "
            f"(significant: corrected p < {o.alpha}); a pair with fewer than 2 shared seeds, or with the same "
            f"nonzero difference on every seed (no variance to test), is not tested (--). "
            + (f"Where runs stored their predictions, A is recomputed on {o.resamples} paired resamples of the test "
               f"images and seeds: the difference's 95% percentile interval and the probability that the method "
               f"beats the best." if o.resamples else "Image bootstrap off (--bootstrap 0)."))


def all_notes(stats: Statistics) -> list[str]:
    return [line for lines in stats.notes.values() for line in lines]


def figure_names(stats: Statistics) -> Sequence[str]:
    return [f"cd_{metric}" for metric in stats.ranks]

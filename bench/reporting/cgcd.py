"""The mixed setting's table (continual category discovery, `bench.protocol.mixed`): what those papers report,
side by side for every method of a (dataset, split): All, Old and New in the hard sense (labelled-stage
classes vs the rest) and the soft one (classes seen before a step vs new in it), each the mean over the
unlabelled steps; forgetting F and discovery D apart; the error in K beside them. Mean ± std over seeds."""
from __future__ import annotations

import pandas as pd

COLUMNS = {"All": "All", "Old_hard": "Old (hard)", "New_hard": "New (hard)", "Old_soft": "Old (soft)",
           "New_soft": "New (soft)", "F": "F (lower is better)", "K_error": "K error"}
# discovery (the summary's D) is New (soft), shown once


KEYS = ["dataset", "split", "label"]


def cgcd_stats(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, split, method, metric) of the frame's mixed runs: mean, std and count over seeds,
    and the value as the table shows it (`shown`); empty when the frame has no mixed run."""
    rows = frame[(frame["group"] == "summary") & (frame["flavour"] == "cgcd") & frame["metric"].isin(COLUMNS)]
    if rows.empty:
        return pd.DataFrame()
    stats = rows.groupby(KEYS + ["metric"], observed=True)["value"].agg(["mean", "std", "count"]).reset_index()

    def shown(row: pd.Series) -> str:
        if row["metric"] == "K_error":
            return f"{row['mean']:.2f}"
        return f"{row['mean']:.1f}" + ("" if row["count"] < 2 else f" ± {row['std']:.1f}")

    stats["shown"] = stats.apply(shown, axis=1)
    seeds = rows.groupby(KEYS, observed=True)["seed"].nunique().rename("seeds")
    return stats.join(seeds, on=KEYS)


def cgcd_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, split, method) of the frame's mixed runs (empty when it has none)."""
    stats = cgcd_stats(frame)
    if stats.empty:
        return stats
    table = stats.pivot(index=KEYS, columns="metric", values="shown").reindex(columns=list(COLUMNS))
    seeds = stats.groupby(KEYS, observed=True)["seeds"].first()
    table = table.join(seeds).rename(columns=COLUMNS).reset_index().rename(columns={"label": "method"})
    return table.fillna("--")


def domain_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A domain-shifted stream's runs grouped by domain as the table groups them by stage: one row per (dataset,
    split, method), one column per domain (in the order its stages first bring them), each the accuracy after the
    last stage on that domain's test images of every class seen (its `domain` rows), mean ± std over seeds; empty
    when the frame has no stream."""
    rows = frame[(frame["group"] == "domain") & (frame["flavour"] == "cgcd")]
    if rows.empty:
        return pd.DataFrame()
    last = rows[rows["step"] == rows.groupby("run_id", observed=True)["step"].transform("max")]
    stats = last.groupby(KEYS + ["metric"], observed=True, sort=False)["value"].agg(["mean", "std", "count"])
    shown = stats.apply(lambda r: f"{r['mean']:.1f}" + ("" if r["count"] < 2 else f" ± {r['std']:.1f}"), axis=1)
    domains = list(dict.fromkeys(last.sort_values("step", kind="stable")["metric"]))
    table = shown.unstack("metric").reindex(columns=domains).reset_index().rename(columns={"label": "method"})
    table.columns.name = None
    return table.fillna("--")


def render(table: pd.DataFrame, fmt: str, title: str = "",
           what_of: str = "the mixed setting's accuracies (%), mean ± std over seeds") -> str:
    """The table as csv, LaTeX (booktabs) or markdown; cells as shown (never re-parsed as numbers). `title` (the
    report's: its grid and `--cfg-options`) heads the markdown (a caption) and the LaTeX (a comment); csv is tidy data,
    without a preamble."""
    if fmt == "csv":
        return table.to_csv(index=False)
    what = f"{title}: {what_of}" if title else ""
    if fmt == "latex":
        from bench.reporting.table import escape_latex

        escaped = table.astype(str).map(escape_latex)
        escaped.columns = [escape_latex(c) for c in table.columns]
        return (f"% {what}\n" if what else "") + escaped.to_latex(index=False, escape=False)
    return (f"Table: {what}.\n\n" if what else "") + table.to_markdown(index=False, disable_numparse=True) + "\n"

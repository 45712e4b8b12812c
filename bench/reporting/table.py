"""The paper's tables: row groups per split, an F↓ / A↑ column pair per dataset, the best value of
each column (per split) in bold, with a dagger where it is not separable from the runner-up: the paired
t-test of their difference over the seeds both have, its p-value corrected for the number of such tests
in the table (Holm's step-down, or Benjamini–Hochberg: `stats.adjust`), is not below 0.05. Which rows
there are and what their headers say is the layout's (`layouts.py`: Tab. 5 by default, Tab. 2, 3 and
4); the cells, their bolding and their daggers are shared."""
from __future__ import annotations

import math
from typing import Literal, Sequence

import pandas as pd
from tabulate import tabulate

from bench.reporting.layouts import NO, YES, Shape, axes, shape_of
from bench.reporting.stats import CORRECTION_NAMES, adjust, ci95_bounds, paired_pvalue

TableFormat = Literal["latex", "markdown", "csv"]  # what `render_table` writes

METRICS = ("F", "A")  # column order within a dataset, as in the paper
LOWER_IS_BETTER = {"F"}
LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
LATEX_MARKS = {YES: r"\checkmark", NO: r"$\times$"}  # \checkmark is amssymb's
ALPHA = 0.05  # a dagger where the corrected p-value is not below it


def escape_latex(text: str) -> str:
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def dagger_note(tests: int, correction: str, daggers: bool) -> str:
    """What a table's daggers mean (or, with none, that every tested bold value is separable), with the
    correction and the number of comparisons it was made over; empty where no test was made."""
    if not tests:
        return ""
    how = (f"paired t-test over the seeds both have, p-values corrected with {CORRECTION_NAMES[correction]} over "
           f"the {tests} comparison{'s' if tests > 1 else ''} of this table, each column's bold value against its "
           f"runner-up")
    return (f"not separable from the runner-up: corrected p ≥ {ALPHA} ({how})" if daggers else
            f"Each bold value tested differs from its runner-up beyond noise: corrected p < {ALPHA} ({how})")


def _cells(scores: pd.DataFrame, exclude_from_best: Sequence[str],
           correction: str = "holm") -> tuple[dict[tuple, tuple[str, str, bool, bool]], int]:
    """(split, label, dataset, metric) → (mean text, std text, is best, best but not separable from
    the runner-up), and the number of tests behind the last: every bold value against its column's
    runner-up, their p-values corrected together (`correction`: holm or bh)."""
    cells: dict[tuple, tuple[str, str, bool, bool]] = {}
    pvalues: dict[tuple, float] = {}
    for (split, dataset, metric), group in scores.groupby(["split", "dataset", "metric"], observed=True):
        shown = group["mean"].round(1)
        eligible = shown[~group["label"].isin(exclude_from_best)]
        best = None if eligible.empty else (eligible.min() if metric in LOWER_IS_BETTER else eligible.max())
        # the runner-up: the best of the others by its unrounded mean (rows tied with the best at the
        # shown precision are bold too, and each is tested against this one)
        rest = group.loc[eligible[eligible != best].dropna().index, "mean"]
        runner_up = None if rest.empty else (rest.idxmin() if metric in LOWER_IS_BETTER else rest.idxmax())
        for (_, row), value in zip(group.iterrows(), shown):
            std = "" if (row["n"] < 2 or math.isnan(row["std"])) else f"{row['std']:.1f}"
            is_best = best is not None and row["label"] not in exclude_from_best and value == best
            key = (split, row["label"], dataset, metric)
            if is_best and runner_up is not None and "by_seed" in group:
                pvalues[key] = paired_pvalue(row["by_seed"], group.loc[runner_up, "by_seed"])
            cells[key] = (f"{row['mean']:.1f}", std, is_best, False)
    tested = [key for key, p in pvalues.items() if not math.isnan(p)]  # fewer than 2 shared seeds: no test
    for key, p in zip(tested, adjust([pvalues[key] for key in tested], correction)):
        if p >= ALPHA:
            cells[key] = (*cells[key][:3], True)
    return cells, len(tested)


def render_table(scores: pd.DataFrame, fmt: TableFormat, caption: str = "",
                 exclude_from_best: Sequence[str] = (), layout: str = "comparison", correction: str = "holm") -> str:
    """The table as text, its rows in `layout` (see `layouts.BUILDERS`). `caption` is used by LaTeX
    only and must already be valid LaTeX. `correction` (holm or bh): how the daggers' tests are corrected
    for their number."""
    if fmt not in ("latex", "markdown", "csv"):
        raise ValueError(f"unknown format {fmt!r}; choose from latex, markdown, csv")
    shape = shape_of(scores, layout, exclude_from_best)
    if fmt == "csv":
        return _csv(scores, shape)
    cells, tests = _cells(scores, exclude_from_best, correction)
    datasets = axes(scores)[1]
    # every format says which flavour the numbers are and how the features were computed
    note = protocol_note(scores) if "source" in scores else ""
    daggers = any(cell[3] for cell in cells.values())
    tested = dagger_note(tests, correction, daggers)
    if fmt == "markdown":
        return (_markdown(cells, shape, datasets) + (f"\n{note}\n" if note else "")
                + (f"\n{'† ' if daggers else ''}{tested}.\n" if tested else ""))
    tested = escape_latex(tested).replace("≥", r"$\geq$").replace("<", "$<$").replace("–", "--")
    mark = ((r"$^\dagger$ " if daggers else "") + tested + ".") if tested else ""
    return _latex(cells, shape, datasets, " ".join(filter(None, [caption, escape_latex(note), mark])))


def _csv(scores: pd.DataFrame, shape: Shape) -> str:
    """Tidy: one line per (split, dataset, row, metric), the layout's key columns naming the row."""
    keys = pd.DataFrame([{"split": split, "label": row.label, "_group": g, "_row": r, **row.keys}
                         for g, (split, rows) in enumerate(shape.groups) for r, row in enumerate(rows)])
    tidy = (scores.drop(columns=[c for c in shape.key_columns if c in scores])  # the layout's names win
            .astype({"split": str, "label": str}).merge(keys, on=["split", "label"], how="left")
            .sort_values(["_group", "dataset", "_row", "metric"], kind="stable"))  # the rendered tables' order
    columns = ["split", "dataset", *shape.key_columns, "metric", "mean", "std", "n",
               *[c for c in ("ci95", "source", "features") if c in tidy]]
    return tidy[columns].to_csv(index=False, float_format="%.4f")


def _values(cells: dict, split: str, label: str, datasets: Sequence[str], bold: str, pm: str,
            dagger: str) -> list[str]:
    """The F/A texts of one row: `bold`, `pm` and `dagger` are the format's bold template, ± separator
    and not-separable mark."""
    out = []
    for dataset in datasets:
        for metric in METRICS:
            mean, std, best, tied = cells.get((split, label, dataset, metric), ("--", "", False, False))
            text = f"{mean}{pm}{std}" if std else mean
            out.append((bold.format(text) if best else text) + (dagger if tied else ""))
    return out


def _markdown(cells: dict, shape: Shape, datasets: Sequence[str]) -> str:
    # github tables have no rules: Tab. 2's separator is LaTeX-only
    headers = (["split"] if shape.split_column else []) + list(shape.columns)\
        + [f"{d} {m}{'↓' if m in LOWER_IS_BETTER else '↑'}" for d in datasets for m in METRICS]
    rows = [([split] if shape.split_column else []) + list(row.header)
            + _values(cells, split, row.label, datasets, "**{}**", " ± ", "†")
            for split, group in shape.groups for row in group]
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n"


def _latex_cell(text: str) -> str:
    return LATEX_MARKS.get(text, escape_latex(text))


def _latex(cells: dict, shape: Shape, datasets: Sequence[str], caption: str) -> str:
    first = 2 if shape.split_column else 1  # the first column a row-group rule spans
    n_head = first - 1 + len(shape.columns)
    width = n_head + 2 * len(datasets)
    marks = any(cell in LATEX_MARKS for _, group in shape.groups for row in group for cell in row.header)
    lines = [r"% needs \usepackage{booktabs,multirow,amssymb}"] if marks else []
    lines += [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{caption}}}")  # LaTeX-ready: the caller escapes what it inserts
    titles = (["Split"] if shape.split_column else []) + [t[:1].upper() + t[1:] for t in shape.columns]
    groups = " & ".join(rf"\multicolumn{{2}}{{c}}{{{escape_latex(d)}}}" for d in datasets)
    lines += [rf"\begin{{tabular}}{{{'l' * (first - 1)}{shape.align}{'cc' * len(datasets)}}}", r"\toprule",
              " " + "& " * n_head + groups + r" \\",
              " ".join(rf"\cmidrule(lr){{{n_head + 1 + 2 * i}-{n_head + 2 + 2 * i}}}" for i in range(len(datasets))),
              " & ".join(titles + [r"F$\downarrow$ & A$\uparrow$" for _ in datasets]) + r" \\",
              r"\midrule"]
    for i, (split, rows) in enumerate(shape.groups):
        for j, row in enumerate(rows):
            if row.rule_above:
                lines.append(rf"\cmidrule{{{first}-{width}}}")
            lead = [] if not shape.split_column else\
                [rf"\multirow{{{len(rows)}}}{{*}}{{{escape_latex(split)}}}" if j == 0 else ""]
            values = _values(cells, split, row.label, datasets, r"\textbf{{{}}}", r"\,$\pm$\,", r"$^\dagger$")
            lines.append(" & ".join(lead + [_latex_cell(h) for h in row.header] + values) + r" \\")
        lines.append(r"\midrule" if i < len(shape.groups) - 1 else r"\bottomrule")
    lines += [r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


# the mixed setting's summary rows (`bench.protocol.mixed`): the flavour of its A and F, and what they are
MIXED = "cgcd"
MIXED_SOURCES = {"A": "All (mixed setting)", "F": "labelled classes' forgetting (mixed setting)"}
MIXED_NOTE = ("Mixed setting (continual category discovery): A is All, the accuracy over every class seen so far "
              "under one Hungarian match (on the test images; on each step's own unlabelled images where the split "
              "says transductive), mean over the unlabelled steps; F is the labelled classes' accuracy after the "
              "labelled step minus after the last")


def source_text(source: str) -> str:
    """`w/A_sample` → `W, sample-weighted`, `wo_refit/A` → `W/O, maps re-fitted`, `cgcd/A` → `All (mixed setting)`:
    which evaluator row a reported value is."""
    flavour, metric = source.split("/")
    if flavour == MIXED:
        return MIXED_SOURCES.get(metric, f"{metric} (mixed setting)")
    name = {"wo": "W/O", "w": "W", "wo_refit": "W/O, maps re-fitted"}.get(flavour, flavour)
    return name + (", sample-weighted" if metric.endswith("_sample") else "")


def flavours_text(a_source: str | None, f_source: str | None) -> str:
    """A leaderboard's `A · F flavour` cell: `W/O · W/O` for class-iNCD, `mixed setting: A = All, F = labelled classes`
    for a run of the mixed setting (whose A and F are not flavours of class-iNCD's evaluator)."""
    if a_source == f"{MIXED}/A" and f_source == f"{MIXED}/F":
        return "mixed setting: A = All, F = labelled classes"
    return " · ".join(source_text(s) if isinstance(s, str) else "--" for s in (a_source, f_source))


def is_mixed_source(source: str) -> bool:
    return str(source).split("/")[0] == MIXED


def protocol_note(scores: pd.DataFrame) -> str:
    """Plain text for a caption: which flavour each method's A and F are (the paper's protocol is
    task-agnostic; K-means' A is one match over all classes), what A and F are for the mixed setting's rows, and
    how the features were computed."""
    def by_value(column: str) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for label, value in scores.drop_duplicates("label")[["label", column]].itertuples(index=False):
            groups.setdefault(str(value), []).append(str(label))
        return groups

    parts = []
    per_label = {label: "; ".join(f"{metric} {source_text(source)}" for metric, source in
                                 g.drop_duplicates("metric")[["metric", "source"]].itertuples(index=False))
                 for label, g in scores.groupby("label", observed=True, sort=False)}
    mixed = {str(label) for label, g in scores.groupby("label", observed=True, sort=False)
             if g["source"].map(is_mixed_source).all()}
    usual = "A W/O; F W/O"
    incremental = {label: text for label, text in per_label.items() if str(label) not in mixed}
    others = [f"{label}: {text}" for label, text in incremental.items() if text != usual]
    if incremental:
        parts.append(("A and F task-agnostic (W/O)" if not mixed else
                      f"Class-iNCD rows ({', '.join(map(str, incremental))}): A and F task-agnostic (W/O)")
                     + (f", except {', '.join(others)}" if others else ""))
    if mixed:
        parts.append(MIXED_NOTE + (f" ({', '.join(l for l in map(str, per_label) if l in mixed)})"
                                   if incremental else ""))
    if "features" in scores:
        groups = by_value("features")
        text = "; ".join(f"{value} ({', '.join(labels)})" for value, labels in groups.items()) if len(groups) > 1\
            else next(iter(groups), "unknown")
        parts.append(f"Features: {text}")
        if any("bank" in value for value in groups):
            parts.append("bank V=n: n stored augmented views per training image, reused every epoch, "
                         "not the paper's fresh views (features.mode=exact)")
    return ". ".join(parts) + "."


def rank_header(scores: pd.DataFrame) -> str:
    """The leaderboards' rank column's title: a method's average rank over every block of the report, the same on
    each of its rows (`rank_note` says so below a table)."""
    from bench.reporting.ranks import blocks

    return f"avg rank of A over {len(blocks(scores, 'A').values)} blocks (95% CI)"


def rank_note(scores: pd.DataFrame) -> str:
    """What the rank column is: not a rank within the row's split."""
    from bench.reporting.ranks import blocks

    part = blocks(scores, "A")
    return (f"avg rank of A: each method's mean rank of A over the report's {len(part.values)} blocks (split × "
            f"dataset) that every ranked method ran, with its 95% bootstrap interval over the blocks; the same on each "
            f"of its rows, not its rank within the row's split (rows within a split are ordered by A)")


def leaderboard(scores: pd.DataFrame, references: Sequence[str] = ()) -> str:
    """The terminal table `bench run` ends with: A and F per split, dataset and method, best A first;
    reference methods marked as in the paper's tables, the flavour of A and F (the mixed setting's: A is All) and the
    features said; where several blocks (split × dataset) are reported, each method's average rank of A over them
    with its 95% bootstrap interval (`ranks.rank_texts`), the same on each of its rows, as the line below says."""
    from bench.reporting.ranks import rank_texts

    ranks = rank_texts(scores)
    def text(hit: pd.DataFrame) -> str:
        if hit.empty:
            return "--"
        row = hit.iloc[0]
        return f"{row['mean']:.1f}" + ("" if pd.isna(row["std"]) else f" ± {row['std']:.1f}")

    def source(hit: pd.DataFrame) -> str | None:
        return str(hit["source"].iloc[0]) if len(hit) and "source" in hit else None

    rows = []
    for (split, dataset, label), group in scores.groupby(["split", "dataset", "label"], observed=True, sort=True):
        a, f = group[group["metric"] == "A"], group[group["metric"] == "F"]
        best_first = -float(a["mean"].iloc[0]) if len(a) else math.inf
        shown = f"{label} (reference)" if label in references else str(label)
        features = str(group["features"].iloc[0]) if "features" in group else "--"
        ci = ("{:.1f} – {:.1f}".format(*ci95_bounds(a["mean"].iloc[0], a["ci95"].iloc[0], "A"))
              if len(a) and "ci95" in a and not pd.isna(a["ci95"].iloc[0]) else "--")
        rank = (ranks.get(str(label), "not ranked"),) if ranks else ()
        rows.append(((split, dataset, best_first), (split, dataset, shown, text(a), ci, text(f), int(group["n"].max()),
                                                    flavours_text(source(a), source(f)), features, *rank)))
    rows.sort(key=lambda r: r[0])
    table = tabulate([r[1] for r in rows], headers=("split", "dataset", "method", "A ↑ (%)", "A 95% CI", "F ↓ (%)",
                                                    "seeds", "A · F flavour", "features")
                     + ((rank_header(scores),) if ranks else ()), tablefmt="github", disable_numparse=True)
    return table + (f"\n{rank_note(scores)}." if ranks else "")

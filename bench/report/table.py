"""Tables in the layout of the paper's Tab. 5: row groups per split, one row per method, an
F↓ / A↑ column pair per dataset, the best value of each column (per split) in bold."""
from __future__ import annotations

import math
from typing import Literal, Sequence

import pandas as pd
from tabulate import tabulate

METRICS = ("F", "A")  # column order within a dataset, as in the paper
LOWER_IS_BETTER = {"F"}
LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def escape_latex(text: str) -> str:
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def _cells(scores: pd.DataFrame, exclude_from_best: Sequence[str]) -> dict[tuple, tuple[str, str, bool]]:
    """(split, label, dataset, metric) → (mean text, std text, is best)."""
    cells: dict[tuple, tuple[str, str, bool]] = {}
    for (split, dataset, metric), group in scores.groupby(["split", "dataset", "metric"], observed=True):
        shown = group["mean"].round(1)
        eligible = shown[~group["label"].isin(exclude_from_best)]
        best = None if eligible.empty else (eligible.min() if metric in LOWER_IS_BETTER else eligible.max())
        for (_, row), value in zip(group.iterrows(), shown):
            std = "" if (row["n"] < 2 or math.isnan(row["std"])) else f"{row['std']:.1f}"
            is_best = best is not None and row["label"] not in exclude_from_best and value == best
            cells[(split, row["label"], dataset, metric)] = (f"{row['mean']:.1f}", std, is_best)
    return cells


def _layout(scores: pd.DataFrame) -> tuple[list, list, dict]:
    splits = [s for s in scores["split"].cat.categories if s in set(scores["split"])] \
        if hasattr(scores["split"], "cat") else list(dict.fromkeys(scores["split"]))
    datasets = [d for d in (scores["dataset"].cat.categories if hasattr(scores["dataset"], "cat")
                            else dict.fromkeys(scores["dataset"])) if d in set(scores["dataset"])]
    labels = {s: [l for l in (scores["label"].cat.categories if hasattr(scores["label"], "cat")
                              else dict.fromkeys(scores["label"]))
                  if l in set(scores.loc[scores["split"] == s, "label"])] for s in splits}
    return splits, datasets, labels


def render_table(scores: pd.DataFrame, fmt: Literal["latex", "markdown", "csv"], caption: str = "",
                 exclude_from_best: Sequence[str] = ()) -> str:
    """The table as text. `caption` is used by LaTeX only and must already be valid LaTeX."""
    if fmt == "csv":
        tidy = scores.rename(columns={"label": "method"})[["split", "dataset", "method", "metric", "mean", "std", "n"]]
        return tidy.to_csv(index=False, float_format="%.4f")
    cells = _cells(scores, exclude_from_best)
    splits, datasets, labels = _layout(scores)
    if fmt == "markdown":
        return _markdown(cells, splits, datasets, labels)
    if fmt == "latex":
        return _latex(cells, splits, datasets, labels, caption)
    raise ValueError(f"unknown format {fmt!r}; choose from latex, markdown, csv")


def _markdown(cells, splits, datasets, labels) -> str:
    headers = ["split", "method"] + [f"{d} {m}{'↓' if m in LOWER_IS_BETTER else '↑'}" for d in datasets for m in METRICS]
    rows = []
    for split in splits:
        for label in labels[split]:
            row = [split, label]
            for dataset in datasets:
                for metric in METRICS:
                    mean, std, best = cells.get((split, label, dataset, metric), ("--", "", False))
                    text = f"{mean} ± {std}" if std else mean
                    row.append(f"**{text}**" if best else text)
            rows.append(row)
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n"


def _latex(cells, splits, datasets, labels, caption: str) -> str:
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{caption}}}")  # LaTeX-ready: the caller escapes what it inserts
    lines += [rf"\begin{{tabular}}{{ll{'cc' * len(datasets)}}}", r"\toprule",
              " & & " + " & ".join(rf"\multicolumn{{2}}{{c}}{{{escape_latex(d)}}}" for d in datasets) + r" \\",
              " ".join(rf"\cmidrule(lr){{{3 + 2 * i}-{4 + 2 * i}}}" for i in range(len(datasets))),
              "Split & Method & " + " & ".join(r"F$\downarrow$ & A$\uparrow$" for _ in datasets) + r" \\",
              r"\midrule"]
    for i, split in enumerate(splits):
        for j, label in enumerate(labels[split]):
            first = rf"\multirow{{{len(labels[split])}}}{{*}}{{{escape_latex(split)}}}" if j == 0 else ""
            row = [first, escape_latex(label)]
            for dataset in datasets:
                for metric in METRICS:
                    mean, std, best = cells.get((split, label, dataset, metric), ("--", "", False))
                    text = rf"{mean}\,$\pm$\,{std}" if std else mean
                    row.append(rf"\textbf{{{text}}}" if best else text)
            lines.append(" & ".join(row) + r" \\")
        lines.append(r"\midrule" if i < len(splits) - 1 else r"\bottomrule")
    lines += [r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def leaderboard(scores: pd.DataFrame) -> str:
    """The terminal table `bench run` ends with: A and F per split, dataset and method, best A first."""
    def text(hit: pd.DataFrame) -> str:
        if hit.empty:
            return "--"
        row = hit.iloc[0]
        return f"{row['mean']:.1f}" + ("" if pd.isna(row["std"]) else f" ± {row['std']:.1f}")

    rows = []
    for (split, dataset, label), group in scores.groupby(["split", "dataset", "label"], observed=True, sort=True):
        a, f = group[group["metric"] == "A"], group[group["metric"] == "F"]
        best_first = -float(a["mean"].iloc[0]) if len(a) else math.inf
        rows.append(((split, dataset, best_first), (split, dataset, label, text(a), text(f), int(group["n"].max()))))
    rows.sort(key=lambda r: r[0])
    return tabulate([r[1] for r in rows], headers=("split", "dataset", "method", "A ↑ (%)", "F ↓ (%)", "seeds"),
                    tablefmt="github", disable_numparse=True)

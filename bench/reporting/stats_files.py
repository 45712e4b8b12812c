"""The statistics part's files (`statistics` computes it): `stats.md`, `stats.tex` or `stats.csv` (ranks and the
corrected comparisons), and the critical-difference diagrams `cd_A.png/.pdf` and `cd_F.png/.pdf`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
from tabulate import tabulate

from bench.core.storage import write_atomic
from bench.reporting.statistics import (COMPARISON_HEADERS, Options, Statistics, all_notes, comparison_note,
                                        comparison_rows, compute, rank_rows, test_lines)
from bench.reporting.table import escape_latex

TITLES = {"A": "A ↑", "F": "F ↓"}
RANK_HEADERS = ("rank", "method", "average rank", "95% interval")
SUFFIX = {"markdown": "md", "latex": "tex", "csv": "csv"}


def render(stats: Statistics, fmt: str) -> str:
    """The statistics part as text in `fmt` (markdown, latex or csv)."""
    if fmt == "csv":
        return _csv(stats)
    latex = fmt == "latex"
    table_fmt = "latex_booktabs" if latex else "github"
    text = (lambda s: escape_latex(s)) if latex else (lambda s: s)
    head = (lambda s: rf"\subsection*{{{escape_latex(s)}}}") if latex else (lambda s: f"## {s}")
    parts = [r"% needs \usepackage{booktabs,graphicx}" if latex else "# Statistics"]
    for metric in ("A", "F"):
        r = stats.ranks.get(metric)
        if r is None:
            continue
        parts += [head(f"Average ranks of {TITLES[metric]}"), *[text(line) for line in test_lines(r)],
                  tabulate([[text(c) for c in row] for row in rank_rows(r)], headers=RANK_HEADERS, tablefmt=table_fmt,
                           disable_numparse=True),
                  (rf"\includegraphics[width=\linewidth]{{cd_{metric}.pdf}}" if latex
                   else f"![critical-difference diagram of {metric}](cd_{metric}.png)")]
    notes = all_notes(stats)
    if notes:
        parts += [head("Refused or left out"), *[text(("" if latex else "- ") + line) for line in notes]]
    parts += [head("Paired comparisons, corrected"), text(comparison_note(stats))]
    if len(stats.comparisons):
        parts.append(tabulate([[text(c) for c in row] for row in comparison_rows(stats.comparisons)],
                              headers=[text(h) for h in COMPARISON_HEADERS], tablefmt=table_fmt, disable_numparse=True))
    else:
        parts.append(text("No block has two methods to compare."))
    parts.append(text(f"Computed in {stats.seconds:.1f} s."))
    return "\n\n".join(parts) + "\n"


def _csv(stats: Statistics) -> str:
    """Tidy: the ranks (kind `rank`) then the comparisons (kind `comparison`), one line each."""
    ranks = [pd.DataFrame(dict(kind="rank", metric=m, method=r.average.index, average_rank=r.average.to_numpy(),
                               rank_low=r.low.to_numpy(), rank_high=r.high.to_numpy(), blocks=len(r.blocks.values)))
             for m, r in stats.ranks.items()]
    frames = [*ranks, stats.comparisons.assign(kind="comparison")] if len(stats.comparisons) else ranks
    return pd.concat(frames, ignore_index=True).to_csv(index=False, float_format="%.6g") if frames else "kind\n"


def write_statistics(stats: Statistics, out: Path, formats: Sequence[str], figures: bool = True) -> list[Path]:
    """`stats.<ext>` per text format and, unless `figures` is False, the critical-difference diagrams."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        paths.append(out / f"stats.{SUFFIX[fmt]}")
        write_atomic(paths[-1], render(stats, fmt))
    if figures:
        from bench.reporting.cdplot import cd_diagram

        for metric, r in stats.ranks.items():
            paths += cd_diagram(r, out / f"cd_{metric}")
    return paths


def statistics_options(options: Options | Mapping[str, Any] | None) -> Options:
    """`bench.report(statistics=...)`: an `Options`, its fields by name, or None (the defaults); a BenchError
    names a wrong one."""
    from bench.errors import BenchError

    try:
        return Options(**options) if isinstance(options, Mapping) else options or Options()
    except (TypeError, ValueError) as err:
        raise BenchError(f"statistics options: {err}") from None


def report_statistics(frame: pd.DataFrame, order: Mapping[str, Sequence[str]], out: Path, formats: Sequence[str],
                      directories: Sequence[Path], options: Options | Mapping[str, Any] | None = None
                      ) -> tuple[Statistics, list[Path]]:
    """`bench report`'s statistics part: computed once over the report's runs (predictions read from
    `directories`), written in each text format of `formats`, with its diagrams; `options` an `Options` or its
    fields by name (a BenchError names a wrong one)."""
    from bench.reporting.aggregate import final_scores

    options = statistics_options(options)
    stats = compute(frame, final_scores(frame, order), {Path(d).name: Path(d) for d in directories}, options)
    return stats, write_statistics(stats, out, [f for f in formats if f in SUFFIX])

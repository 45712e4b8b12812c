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
# what pdflatex's defaults (utf8 input, OT1 fonts) cannot set, or set wrong (OT1 prints "<" as "¡")
LATEX_SYMBOLS = {"χ": r"$\chi$", "²": r"$^2$", "×": r"$\times$", "Δ": r"$\Delta$", "–": "--", "…": r"\ldots{}",
                 "↑": r"$\uparrow$", "↓": r"$\downarrow$", "−": "$-$", "≥": r"$\geq$", "≤": r"$\leq$",
                 "α": r"$\alpha$", "·": r"$\cdot$", "š": r"\v{s}", "√": r"$\surd$"}


def latex_symbols(text: str) -> str:
    """`text`, already LaTeX, with the characters of LATEX_SYMBOLS replaced."""
    return "".join(LATEX_SYMBOLS.get(ch, ch) for ch in text)


def latex_text(text: str) -> str:
    """Plain text as LaTeX that pdflatex sets with its defaults: escaped, `<` and `>` in math, the symbols replaced."""
    return latex_symbols(escape_latex(text).replace("<", "$<$").replace(">", "$>$"))


def render(stats: Statistics, fmt: str, title: str = "") -> str:
    """The statistics part as text in `fmt` (markdown, latex or csv), headed with the report's `title` (its grid and
    `--cfg-options`; csv: tidy data, no preamble)."""
    if fmt == "csv":
        return _csv(stats)
    latex = fmt == "latex"
    text = latex_text if latex else (lambda s: s)
    head = (lambda s: rf"\subsection*{{{latex_text(s)}}}") if latex else (lambda s: f"## {s}")

    def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:  # tabulate escapes LaTeX's cells itself
        out = tabulate(rows, headers=headers, tablefmt="latex_booktabs" if latex else "github", disable_numparse=True)
        return latex_symbols(out) if latex else out

    # the diagrams beside stats.tex, wherever a paper \input's it from (LaTeX's \CurrentFilePath, 2020 and later;
    # without it, or input from its own folder, the bare names)
    parts = [(f"% {title}\n" if title else "") + r"% needs \usepackage{booktabs,graphicx}" "\n"
             r"\edef\benchstatsdir{\ifdefined\CurrentFilePath\CurrentFilePath\fi}" "\n"
             r"\edef\benchstatsdir{\ifx\benchstatsdir\empty\else\benchstatsdir/\fi}"
             if latex else "# Statistics" + (f": {title}" if title else "")]
    for metric in ("A", "F"):
        r = stats.ranks.get(metric)
        if r is None:
            continue
        parts += [head(f"Average ranks of {TITLES[metric]}"), *[text(line) for line in test_lines(r)],
                  table(rank_rows(r), RANK_HEADERS),
                  (rf"\includegraphics[width=\linewidth]{{\benchstatsdir cd_{metric}.pdf}}" if latex
                   else f"![critical-difference diagram of {metric}](cd_{metric}.png)")]
    notes = all_notes(stats)
    if notes:
        parts += [head("Refused or left out"), *[text(("" if latex else "- ") + line) for line in notes]]
    parts += [head("Paired comparisons, corrected"), text(comparison_note(stats))]
    if len(stats.comparisons):
        parts.append(table(comparison_rows(stats.comparisons), COMPARISON_HEADERS))
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


def write_statistics(stats: Statistics, out: Path, formats: Sequence[str], figures: bool = True,
                     title: str = "") -> list[Path]:
    """`stats.<ext>` per text format (headed with `title`) and, unless `figures` is False, the critical-difference
    diagrams."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        paths.append(out / f"stats.{SUFFIX[fmt]}")
        write_atomic(paths[-1], render(stats, fmt, title))
    if figures:
        from bench.reporting.cdplot import cd_diagram

        for metric, r in stats.ranks.items():
            paths += cd_diagram(r, out / f"cd_{metric}")
    return paths


def statistics_options(options: Options | Mapping[str, Any] | None) -> Options:
    """`bench.report(statistics=...)`: an `Options`, its fields by name, or None (the defaults); a BenchError
    names a wrong one."""
    from bench.errors import BenchError

    if options is not None and not isinstance(options, (Options, Mapping)):
        raise BenchError(f"bad statistics={options!r}: a bench.reporting.statistics.Options, a dict of its fields, "
                         f"or None (the defaults)")
    try:
        return Options(**options) if isinstance(options, Mapping) else options or Options()
    except (TypeError, ValueError) as err:
        raise BenchError(f"statistics options: {err}") from None


def report_statistics(frame: pd.DataFrame, order: Mapping[str, Sequence[str]], out: Path, formats: Sequence[str],
                      directories: Sequence[Path], options: Options | Mapping[str, Any] | None = None,
                      title: str = "") -> tuple[Statistics, list[Path]]:
    """`bench report`'s statistics part: computed once over the report's runs (predictions read from
    `directories`), written in each text format of `formats`, with its diagrams; `options` an `Options` or its
    fields by name (a BenchError names a wrong one)."""
    from bench.reporting.aggregate import final_scores

    options = statistics_options(options)
    stats = compute(frame, final_scores(frame, order), {Path(d).name: Path(d) for d in directories}, options)
    return stats, write_statistics(stats, out, [f for f in formats if f in SUFFIX], title=title)

"""The index's statistics section (`bench.reporting.statistics`): per metric the average ranks with their
intervals, the Friedman and post-hoc tests and the critical-difference diagram; the refusals; the corrected
paired comparisons, sortable."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from bench.reporting.site.html import e
from bench.reporting.statistics import (COMPARISON_HEADERS, Statistics, all_notes, comparison_note, comparison_rows,
                                        rank_rows, test_lines)
from bench.reporting.stats_files import RANK_HEADERS, TITLES


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int], sortable: bool = True) -> str:
    head = "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' if sortable
                   else f'<th scope="col">{e(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="{"num" if i in numeric else ""}">{e(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return (f'<div class="scroll"><table class="{"sortable" if sortable else ""}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def statistics_section(stats: Statistics | None, figures: Sequence[Path] = ()) -> str:
    """The section, or an empty string where the report computed no statistics."""
    if stats is None:
        return ""
    drawn = {p.name for p in figures}
    parts = ['<section id="statistics"><h2>Statistics</h2><p class="note">Blocks are the report\'s split × dataset '
             'cells, each ranking the methods by their mean over seeds (1: the best; docs/metrics.md says when to use '
             'which test).</p>']
    for metric in ("A", "F"):
        r = stats.ranks.get(metric)
        if r is None:
            continue
        parts.append(f'<h3 id="ranks-{metric}">Average ranks of {e(TITLES[metric])}</h3>'
                     + "".join(f'<p class="note">{e(line)}</p>' for line in test_lines(r))
                     + _table(RANK_HEADERS, rank_rows(r), {0, 2, 3}))
        if f"cd_{metric}.png" in drawn:
            parts.append(f'<figure class="cd"><img src="cd_{metric}.png" alt="critical-difference diagram of '
                         f'{metric}: {e(", ".join(r.average.index))}" style="max-width: 100%"></figure>')
    notes = all_notes(stats)
    if notes:
        parts.append('<h3>Refused or left out</h3><ul class="refusals">'
                     + "".join(f"<li>{e(line)}</li>" for line in notes) + "</ul>")
    parts.append(f'<h3 id="corrected">Paired comparisons, corrected</h3><p class="note">{e(comparison_note(stats))}</p>'
                 + (_table(COMPARISON_HEADERS, comparison_rows(stats.comparisons), {5, 6, 7, 8, 10, 11, 12}) if len(stats.comparisons)
                    else "<p>No block has two methods to compare.</p>")
                 + f'<p class="meta">Computed in {stats.seconds:.1f} s.</p></section>')
    return "".join(parts)

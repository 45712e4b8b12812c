"""The critical-difference diagram (Demšar 2006, Fig. 1): the methods' average ranks on an axis, 1 (the best) on
the left, the better half named on the left and the rest on the right; a thick bar joins each run of methods no
pair of which the post-hoc test tells apart, and with Nemenyi a scale bar shows the critical difference."""
from __future__ import annotations

from pathlib import Path

from bench.reporting.plots import _save, plt
from bench.reporting.ranks import Ranks

TITLES = {"A": "A ↑ (accuracy)", "F": "F ↓ (forgetting)"}


def cd_diagram(ranks: Ranks, stem: Path) -> list[Path]:
    """Draw `ranks` to `<stem>.png` and `.pdf`; returns the files."""
    names, average = list(ranks.average.index), ranks.average.to_numpy()
    k = len(names)
    left = (k + 1) // 2
    # in units of one label row: the axis at 0, its numbers and the CD bar above, the bars and then the names below
    first = -0.6 - 0.3 * len(ranks.cliques)
    bottom = first - 0.55 * (max(left, k - left) - 1) - 0.4
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * (1.6 - bottom)))
    low, high = 1, max(k, 2)
    ax.set_xlim(low - 0.6, high + 0.6)
    ax.set_ylim(bottom, 1.3)
    ax.axis("off")
    ax.plot([low, high], [0, 0], color="black", lw=1)
    for tick in range(low, high + 1):
        ax.plot([tick, tick], [0, 0.12], color="black", lw=1)
        ax.text(tick, 0.2, str(tick), ha="center", va="bottom", fontsize=9)
    for i, (name, r) in enumerate(zip(names, average)):
        on_left = i < left
        y = first - 0.55 * (i if on_left else k - 1 - i)
        edge = low - 0.55 if on_left else high + 0.55
        ax.plot([r, r, edge], [0, y, y], color="#444444", lw=0.8)
        ax.text(edge + (0.03 if on_left else -0.03), y + 0.05, f"{name} ({r:.2f})", fontsize=8,
                ha="left" if on_left else "right", va="bottom")
    for j, members in enumerate(ranks.cliques):  # the bars: runs no pair of which differs
        xs = [float(ranks.average[m]) for m in members]
        y = -0.3 - 0.3 * j
        ax.plot([min(xs) - 0.03, max(xs) + 0.03], [y, y], color="black", lw=3, solid_capstyle="round")
    if ranks.critical_difference is not None:
        cd = ranks.critical_difference
        ax.plot([low, low + cd], [0.85, 0.85], color="#b22222", lw=1.5)
        ax.text(low + cd / 2, 0.92, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8, color="#b22222")
    ax.set_title(f"{TITLES.get(ranks.blocks.metric, ranks.blocks.metric)}: average ranks over "
                 f"{len(ranks.blocks.values)} blocks; a bar joins methods {ranks.test} does not tell apart", fontsize=9, pad=14)
    return _save(fig, stem)

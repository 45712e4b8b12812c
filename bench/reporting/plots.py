"""Figures: a radar plot per split, per-step accuracy curves and the appendix's per-step accuracy and
forgetting per dataset, PNG and PDF, paper style."""
from __future__ import annotations

import math
from typing import Sequence, cast
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.projections.polar import PolarAxes  # noqa: E402
import pandas as pd  # noqa: E402

from bench.core.storage import atomic_path  # noqa: E402
from bench.splits.settings import first_step, of_mixed_setting, step_name  # noqa: E402

# One fixed colour per paper method, the same in every figure (tab10 + two extras).
PALETTE = {
    "Baseline": "#1f77b4", "Baseline++": "#d62728", "K-means": "#7f7f7f", "Joint (frozen)": "#2ca02c",
    "Joint (unfrozen)": "#98df8a", "EwC": "#ff7f0e", "LwF": "#9467bd", "DER": "#8c564b", "ResTune": "#e377c2",
    "FRoST": "#bcbd22", "CaSSLe": "#17becf",
}
# Every other method's colours, in this order: Okabe and Ito's colour-blind-safe palette, then Paul Tol's muted one
SAFE = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000",
        "#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499"]
# A colour closer than this (CIEDE2000 ΔE) to one a figure already draws is not used for another method. CIEDE2000,
# not the plain L*a*b* distance (CIE76): that one overstates differences of saturated greens and blues, and drew
# Joint (frozen) (#2ca02c) and VB-CGCD (#009E73) in two greens a reader cannot tell apart (CIE76 36.9, CIEDE2000 13.9)
MIN_DELTA_E = 20.0
# where colours run out, methods share one and differ by line style (a preset variant is drawn dashed)
LINE_STYLES = ["-", ":", "-."]


def _lab(colour: str) -> np.ndarray:
    """sRGB `#rrggbb` in CIE L*a*b* (D65)."""
    rgb = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(first: str, second: str) -> float:
    """CIEDE2000 colour difference of two sRGB `#rrggbb` colours: 1 is about what an eye tells apart side by side;
    two methods' lines want 20 or more."""
    return ciede2000(_lab(first).tolist(), _lab(second).tolist())


def ciede2000(first: Sequence[float], second: Sequence[float]) -> float:
    """CIEDE2000 difference of two L*a*b* colours, as Sharma, Wu and Dalal (2005) write it out."""
    (l1, a1, b1), (l2, a2, b2) = first, second
    mean_c = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(mean_c ** 7 / (mean_c ** 7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1, h2 = math.degrees(math.atan2(b1, a1)) % 360, math.degrees(math.atan2(b2, a2)) % 360
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180  # the hue change, the short way round
    d_hue = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    mean_l, mean_c = (l1 + l2) / 2, (c1 + c2) / 2
    mean_h = h1 + h2 if c1 * c2 == 0 else ((h1 + h2) / 2 + (180 if abs(h1 - h2) > 180 else 0)) % 360
    t = (1 - 0.17 * math.cos(math.radians(mean_h - 30)) + 0.24 * math.cos(math.radians(2 * mean_h))
         + 0.32 * math.cos(math.radians(3 * mean_h + 6)) - 0.20 * math.cos(math.radians(4 * mean_h - 63)))
    rotation = -math.sin(math.radians(60 * math.exp(-(((mean_h - 275) / 25) ** 2)))) \
        * 2 * math.sqrt(mean_c ** 7 / (mean_c ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (mean_l - 50) ** 2 / math.sqrt(20 + (mean_l - 50) ** 2)
    s_c, s_h = 1 + 0.045 * mean_c, 1 + 0.015 * mean_c * t
    dl, dc, dhh = (l2 - l1) / s_l, (c2 - c1) / s_c, d_hue / s_h
    return math.sqrt(dl ** 2 + dc ** 2 + dhh ** 2 + rotation * dc * dhh)


def figure_styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """(colour, line style) of each method label of one figure: the paper methods keep their colours; every
    other method takes the first colour of `SAFE` that no method of the figure draws and that is at least
    MIN_DELTA_E (`delta_e`) from every colour the figure draws (so a plugin's method is never drawn in almost Baseline's
    colour); once none is left, colours are reused with other line styles. A preset variant (`Baseline
    [equations]`) keeps its method's colour, drawn dashed. The same labels in the same order get the same styles."""
    bases = list(dict.fromkeys(label.split(" [")[0] for label in labels))
    chosen: dict[str, tuple[str, str]] = {b: (PALETTE[b], "-") for b in bases if b in PALETTE}
    others = [b for b in bases if b not in PALETTE]
    free, reused = list(SAFE), 0
    for base in others:
        drawn = [colour for colour, _ in chosen.values()]
        pick = next((c for c in free if all(delta_e(c, d) >= MIN_DELTA_E for d in drawn)), None)
        if pick is not None:
            free.remove(pick)
            chosen[base] = (pick, "-")
        else:  # every distinct colour is taken: the palette again, with the next line style
            chosen[base] = (SAFE[reused % len(SAFE)], LINE_STYLES[1 + (reused // len(SAFE)) % (len(LINE_STYLES) - 1)])
            reused += 1
    return {label: (chosen[label.split(" [")[0]][0], "--" if " [" in label else chosen[label.split(" [")[0]][1])
            for label in labels}


def method_colour(label: str) -> str:
    """A label's colour when it is drawn alone (`figure_styles` of a figure with it alone)."""
    return figure_styles([label])[label][0]


def _save(fig: plt.Figure, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".pdf")]
    try:
        for path, dpi in zip(paths, (150, "figure")):
            with atomic_path(path) as tmp:  # a full disk leaves the previous figure whole
                fig.savefig(tmp, format=path.suffix[1:], dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return paths


def radar_plot(scores: pd.DataFrame, splits: list[str], stem: Path) -> list[Path]:
    """One axis per (split,) dataset and metric: A, and 100−F so that outward is better on every axis, both in
    % on one 0-100 scale (absolute: a method's shape does not change with the others beside it). With several
    splits the axes are numbered by split and the numbers are explained under the plot (split labels are long)."""
    rows = scores[scores["split"].isin(splits)]
    axes = [(sp, d, m) for sp in splits for d in rows.loc[rows["split"] == sp, "dataset"].unique() for m in ("A", "F")]
    labels = list(dict.fromkeys(rows["label"]))
    values = {}
    for label in labels:
        vals = []
        for split, dataset, metric in axes:
            hit = rows[(rows["label"] == label) & (rows["split"] == split) & (rows["dataset"] == dataset)
                       & (rows["metric"] == metric)]
            v = float(hit["mean"].iloc[0]) if len(hit) else np.nan
            vals.append(100.0 - v if metric == "F" else v)
        values[label] = np.array(vals)
    angles = np.linspace(0, 2 * math.pi, len(axes), endpoint=False).tolist()
    fig, axes_ = plt.subplots(figsize=(6.4, 6.4), subplot_kw={"projection": "polar"})
    ax = cast(PolarAxes, axes_)
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    styles = figure_styles(labels)
    for label, measured in values.items():
        shown = np.clip(np.nan_to_num(measured, nan=0.0), 0, 100).tolist()
        colour, style = styles[label]
        ax.plot(angles + angles[:1], shown + shown[:1], style, color=colour, linewidth=1.8, label=label)
        ax.fill(angles + angles[:1], shown + shown[:1], color=colour, alpha=0.08)
    number = {sp: i + 1 for i, sp in enumerate(splits)}
    prefix = (lambda sp: f"[{number[sp]}] ") if len(splits) > 1 else (lambda sp: "")
    ax.set_thetagrids(np.degrees(angles), [f"{prefix(sp)}{d}\n{'A' if m == 'A' else '100−F'}" for sp, d, m in axes],
                      fontsize=8)
    ax.tick_params(axis="x", pad=10)  # the labels clear the outer ring
    ax.set_ylim(0, 100)
    ax.set_yticks([20, 40, 60, 80, 100])
    ax.tick_params(axis="y", labelsize=7)
    ax.set_rlabel_position(180 / max(len(axes), 1))
    title = "A and 100−F (%), outward is better" if len(splits) > 1 else f"{splits[0]}: A and 100−F (%), outward is better"
    ax.set_title(title, fontsize=10, pad=24)
    if len(splits) > 1:
        fig.text(0.5, 0.0, "; ".join(f"[{number[sp]}] {sp}" for sp in splits), ha="center", va="top", fontsize=8,
                 wrap=True)
    ax.legend(loc="upper right", bbox_to_anchor=(1.38, 1.12), fontsize=8, frameon=False)
    return _save(fig, stem)


def _draw_curves(ax: plt.Axes, rows: pd.DataFrame, bounds: tuple[float, float] = (0.0, 100.0),
                 mixed: bool = False) -> None:
    """One line per method label (mean, with ± std shaded within the quantity's `bounds`: an accuracy band
    never runs past 100%), steps counted from 1 (the mixed setting's stages from 0, its labelled one)."""
    first = first_step(mixed)
    styles = figure_styles(list(dict.fromkeys(rows["label"].astype(str))))
    for label, group in rows.groupby("label", observed=True, sort=False):
        steps = group["step"].to_numpy() + first
        mean, std = group["mean"].to_numpy(), np.nan_to_num(group["std"].to_numpy())
        colour, style = styles[str(label)]
        ax.plot(steps, mean, style, marker="o", markersize=4, color=colour, label=str(label))
        ax.fill_between(steps, np.clip(mean - std, *bounds), np.clip(mean + std, *bounds), color=colour, alpha=0.15,
                        linewidth=0)
    ax.set_xlabel("stage (0: labelled)" if mixed else "step")
    ax.set_xticks(sorted(rows["step"].unique() + first))
    ax.grid(alpha=0.3)


def steps_plot(accuracy: pd.DataFrame, forgetting: pd.DataFrame, dataset: str, splits: list[str],
               stem: Path) -> list[Path]:
    """The appendix's per-step figure of one dataset: for each split (a row), the overall accuracy and
    the forgetting of the first step's classes after every step, every method of the report."""
    fig, axes = plt.subplots(len(splits), 2, figsize=(9, 3.2 * len(splits)), squeeze=False)
    for row, split in enumerate(splits):
        mixed = of_mixed_setting(split)
        for col, (curves, what, bounds) in enumerate(((accuracy, "accuracy on all seen classes (%)", (0.0, 100.0)),
                                                      (forgetting, f"forgetting of {step_name(0, mixed)}'s classes (%)",
                                                       (-100.0, 100.0)))):
            ax = axes[row][col]
            _draw_curves(ax, curves[(curves["dataset"] == dataset) & (curves["split"] == split)], bounds, mixed)
            ax.set_ylabel(what)
            ax.set_title(f"({chr(ord('a') + 2 * row + col)}) {dataset}, {split}", fontsize=10)
    fig.tight_layout()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, max(1, len(labels))),
               fontsize=8, frameon=False)  # below the panels; the saved figure's tight box takes it in
    return _save(fig, stem)


def curve_plot(curves: pd.DataFrame, dataset: str, split: str, stem: Path) -> list[Path]:
    """Accuracy on all classes seen so far after each step, mean ± std over seeds."""
    rows = curves[(curves["dataset"] == dataset) & (curves["split"] == split)]
    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    _draw_curves(ax, rows, mixed=of_mixed_setting(split))
    ax.set_ylabel("accuracy on all seen classes (%)")
    ax.set_title(f"{dataset}, {split}", fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    return _save(fig, stem)


def matrix_plot(matrices: pd.DataFrame, dataset: str, split: str, stem: Path) -> list[Path]:
    """The accuracy matrices of one dataset and split, a heatmap per method: row t the step, column k the task,
    the accuracy (%) on task k after step t written in its cell; each panel's title gives the method's BWT."""
    from bench.reporting.aggregate import backward_transfer

    rows = matrices[(matrices["dataset"] == dataset) & (matrices["split"] == split)]
    labels = list(dict.fromkeys(rows["label"].astype(str)))
    cols = min(3, len(labels))
    fig, axes = plt.subplots(math.ceil(len(labels) / cols), cols, figsize=(3.6 * cols, 3.4 * math.ceil(len(labels) / cols)),
                             squeeze=False)
    for ax in axes.flat[len(labels):]:
        ax.axis("off")
    for ax, label in zip(axes.flat, labels):
        mine = rows[rows["label"].astype(str) == label]
        steps = int(mine["step"].max()) + 1
        grid = np.full((steps, steps), np.nan)
        for r in mine.itertuples():
            grid[int(r.step), int(r.task)] = float(r.mean)
        ax.imshow(grid, vmin=0, vmax=100, cmap="viridis")
        for (t, k), value in np.ndenumerate(grid):
            if np.isfinite(value):
                ax.text(k, t, f"{value:.0f}", ha="center", va="center", fontsize=9,
                        color="white" if value < 60 else "black")
        ax.set_xticks(range(steps), [str(k + 1) for k in range(steps)], fontsize=7)
        ax.set_yticks(range(steps), [str(t + 1) for t in range(steps)], fontsize=7)
        ax.set_xlabel("task", fontsize=8)
        ax.set_ylabel("after step", fontsize=8)
        bwt = backward_transfer(mine)
        ax.set_title(f"{label}\nBWT {bwt:+.1f}" if np.isfinite(bwt) else label, fontsize=8)
    fig.suptitle(f"{dataset}, {split}: accuracy on each task after each step (%)", fontsize=9)
    fig.tight_layout()
    return _save(fig, stem)

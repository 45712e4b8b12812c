"""The index's curves: inline SVG per dataset and split (a line per method with a band of ± one std
over seeds, a title per point for hovering), and the report's radar PNGs beside them. Plain SVG: no
plotting library, no script."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

import pandas as pd

from bench.reporting.aggregate import step_curves, step_forgetting
from bench.reporting.site.html import e


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = max(high - low, 1e-9)
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if raw <= step * m)
    start = math.ceil(low / step) * step
    return [start + i * step for i in range(int((high - start) / step + 1e-9) + 1)]


# a figure's line styles (`bench.reporting.plots.figure_styles`) as SVG dash arrays
DASHES = {"--": ' stroke-dasharray="5 3"', ":": ' stroke-dasharray="1.5 3"', "-.": ' stroke-dasharray="6 3 1.5 3"'}


def svg_curves(rows: pd.DataFrame, title: str, ylabel: str, colour: Any, style: Any = None,
               bounds: tuple[float, float] = (0.0, 100.0), xlabel: str = "step", first: int = 1) -> str:
    """Mean per step (a line per label) with a band of ± one std over seeds within the quantity's `bounds` (an
    accuracy band never runs past 100%), steps counted from `first` (the mixed setting's stages from 0); `colour`
    and `style` give a label's colour and line style (`bench.reporting.plots.figure_styles`)."""
    width, height, left, right, top, bottom = 460, 280, 52, 12, 26, 40
    if rows.empty:
        return f'<p class="na">{e(title)}: no per-step values recorded.</p>'
    steps = sorted(int(s) for s in rows["step"].unique())
    rows = rows.assign(std=rows["std"].fillna(0.0))
    lower, upper = (rows["mean"] - rows["std"]).clip(*bounds), (rows["mean"] + rows["std"]).clip(*bounds)
    low, high = float(min(lower.min(), rows["mean"].min())), float(max(upper.max(), rows["mean"].max()))
    pad = max((high - low) * 0.08, 1.0)
    low, high = low - pad, high + pad
    x0, x1 = steps[0], max(steps[-1], steps[0] + 1)

    def x(step: float) -> float:
        return left + (step - x0) / (x1 - x0) * (width - left - right)

    def y(value: float) -> float:
        return top + (high - value) / (high - low) * (height - top - bottom)

    out = [f'<svg class="curve" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'aria-label="{e(title)}"><title>{e(title)}</title>',
           f'<text x="{left}" y="16" class="svg-title">{e(title)}</text>']
    for tick in _ticks(low, high):
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{tick:g}</text>')
    for step in steps[::max(1, -(-len(steps) // 12))]:  # at most about 12 labels (an epoch axis has hundreds)
        out.append(f'<text x="{x(step):.1f}" y="{height - bottom + 16}" class="tick" text-anchor="middle">{step + first}</text>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" class="axis" text-anchor="middle">{e(xlabel)}</text>'
               f'<text transform="translate(13 {(top + height - bottom) / 2:.0f}) rotate(-90)" class="axis" '
               f'text-anchor="middle">{e(ylabel)}</text>')
    labels = rows["label"].astype(str).nunique()
    for label, group in rows.groupby("label", observed=True, sort=False):
        group = group.sort_values("step")
        c = colour(str(label))
        out.append(f'<g data-label="{e(label)}">')
        sx = [x(s) for s in group["step"]]
        mean, sd = group["mean"].tolist(), group["std"].fillna(0.0).tolist()
        if len(sx) > 1 and any(v > 0 for v in sd):
            band = [f"{a:.1f},{y(min(m + s, bounds[1])):.1f}" for a, m, s in zip(sx, mean, sd)]
            band += [f"{a:.1f},{y(max(m - s, bounds[0])):.1f}" for a, m, s in reversed(list(zip(sx, mean, sd)))]
            opacity = 0.15 if labels <= 5 else 0.07  # many overlapping bands would turn to mud
            out.append(f'<polygon points="{" ".join(band)}" fill="{c}" fill-opacity="{opacity}" stroke="none"/>')
        dash = DASHES.get(style(str(label)) if style is not None else ("--" if " [" in str(label) else "-"), "")
        out.append(f'<polyline points="{" ".join(f"{a:.1f},{y(m):.1f}" for a, m in zip(sx, mean))}" fill="none" '
                   f'stroke="{c}" stroke-width="2"{dash}/>')
        for a, m, s, n, step in zip(sx, mean, sd, group["n"], group["step"]):
            out.append(f'<circle cx="{a:.1f}" cy="{y(m):.1f}" r="3" fill="{c}"><title>{e(label)}, {e(xlabel.split(" (")[0])} {int(step) + first}: '
                       f'{m:.1f} ± {s:.1f} ({int(n)} seed(s))</title></circle>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _curves(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None, figures: Sequence[Path], out: Path) -> str:
    from bench.reporting.plots import figure_styles
    from bench.splits.settings import first_step, of_mixed_setting, step_name

    accuracy = step_curves(frame, order)
    forgetting = step_forgetting(frame, order)
    parts = []
    for (dataset, split), rows in accuracy.groupby(["dataset", "split"], observed=True, sort=False):
        fr = forgetting[(forgetting["dataset"] == dataset) & (forgetting["split"] == split)]
        labels = list(dict.fromkeys(rows["label"].astype(str)))
        styles = figure_styles(labels)

        def colour(label: str) -> str:
            return styles[label][0]  # noqa: B023 (called within this iteration)

        def style(label: str) -> str:
            return styles[label][1]  # noqa: B023 (called within this iteration)

        mixed = of_mixed_setting(split)
        first, axis = first_step(mixed), "stage (0: labelled)" if mixed else "step"
        legend = "".join(f'<li data-label="{e(l)}" title="click: hide or show its lines">'
                         f'<span class="swatch{" dashed" if style(l) != "-" else ""}" style="--c:{colour(l)}"></span>'
                         f'{e(l)}</li>' for l in labels)
        parts.append(f'<figure class="curves" data-dataset="{e(dataset)}"><figcaption>{e(dataset)}, {e(split)}'
                     f'</figcaption><div class="panels">'
                     + svg_curves(rows, "accuracy on all classes seen so far", "accuracy (%)", colour, style, xlabel=axis,
                                  first=first)
                     + svg_curves(fr, f"forgetting of {step_name(0, mixed)}'s classes", "forgetting (%)", colour, style,
                                  (-100.0, 100.0), xlabel=axis, first=first)
                     + f'</div><ul class="legend">{legend}</ul></figure>')
    radars = [p for p in figures if p.suffix == ".png" and p.name.startswith(("radar", "matrix_"))]
    for path in radars:
        rel = os.path.relpath(path, out)
        pdf = path.with_suffix(".pdf")
        kind = "matrices" if path.name.startswith("matrix_") else "radar"  # the matrices' panels want more width
        parts.append(f'<figure class="{kind}"><img src="{e(quote(rel))}" alt="{kind} {e(path.stem)}" loading="lazy">'
                     f'<figcaption>{e(path.stem.replace("_", " "))}: '
                     + ("accuracy on each task after each step (%), with each method's backward transfer"
                        if path.name.startswith("matrix_") else "A and 100−F in %, outward is better")
                     + (f' (<a href="{e(quote(os.path.relpath(pdf, out)))}">PDF</a>)' if pdf.exists() else "")
                     + "</figcaption></figure>")
    return "".join(parts)

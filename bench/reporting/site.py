"""`bench report --format html`: the report as a static site that opens from disk, with no server and
no network (no CDN: the script and the style sheet lie beside the pages).

    <report>/index.html      leaderboards per split (sortable, filterable), the paper comparison, curves
                             per dataset and split (inline SVG, seed bands), radar plots (the report's
                             PNGs), the paper's table layouts, every run with its state
    <report>/site.css, site.js
    <report>/runs/<id>.html  one page per run: config, provenance, per-step metrics in every flavour,
                             the end of its log (and its error), links to its files

Every text that comes from a run (labels, configuration values, logs, error messages, paths) is
escaped; the only markup is this module's. Runs that failed, are unfinished or never ran are shown
with their state, never as an empty cell."""
from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

import pandas as pd

from bench.reporting.aggregate import final_scores, flat_config, step_curves, step_forgetting
from bench.reporting.layouts import axes, shape_of
from bench.reporting.stats import ci95_bounds
from bench.reporting.table import LOWER_IS_BETTER, METRICS, _cells, source_text
from bench.storage import write_atomic

ASSETS = Path(__file__).with_name("site_assets")
LOG_LINES = 60  # the end of a run's log shown on its page
DONE, FAILED, UNFINISHED, NOT_RUN, UNREADABLE = "done", "failed", "unfinished", "not run", "unreadable"
STATE_HELP = {
    DONE: "finished; its metrics are in the tables",
    FAILED: "failed: its error.txt says why; the next `bench run` retries it",
    UNFINISHED: "started but not finished: running now, or interrupted (the next `bench run` resumes it)",
    NOT_RUN: "never started: no run directory, or nothing in it yet",
    UNREADABLE: "finished, but its files cannot be read back or describe another run: in no row",
}
PROVENANCE = ("bench_version", "git_commit", "host", "device", "slurm_job_id", "started_at", "ended_at", "duration_s",
              "torch_version", "torchvision_version", "timm_version", "numpy_version", "cuda_version",
              "cudnn_version", "weights_sha256", "tail_precision", "threads", "rebuilt_from", "features",
              "mapping_images", "reported_A", "reported_F")


def e(value: Any) -> str:
    """Text for HTML, quotes included (safe in attributes)."""
    return escape(str(value), quote=True)


@dataclass
class Run:
    """One run of the report's selection and what the site says about it."""

    run_id: str
    directory: Path
    state: str
    why: str = ""  # the error's first line, or why a finished run is in no row
    split: str = "?"
    dataset: str = "?"
    label: str = "?"
    method: str = "?"
    preset: str = ""
    backbone: str = ""
    seed: int | None = None
    spec: Any = None
    page: str = ""  # runs/<page>.html
    siblings: list["Run"] = field(default_factory=list)  # the runs of its cell (the other seeds), itself included

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.split, self.dataset, self.label)


def _page_name(run_id: str) -> str:
    """The run page's file name: the run id when it is a plain name (it always is for bench's runs)."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", run_id):
        return run_id
    import hashlib

    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


def _first_line(path: Path) -> str:
    try:
        return (path.read_text(errors="replace").strip().splitlines() or [""])[0]
    except OSError:
        return ""


def collect_runs(frame: pd.DataFrame, runs: Iterable[tuple[Path, Any]], unplaced: Mapping[str, str],
                 label_of_spec: Any) -> list[Run]:
    """Every run of the selection with its state: the finished ones as the frame labels them, the others
    from their spec (`label_of_spec(spec)` gives their row's label)."""
    done = frame.drop_duplicates("run_id").set_index("run_id") if len(frame) else pd.DataFrame()
    out: list[Run] = []
    for directory, spec in runs:
        run_id = directory.name
        run = Run(run_id, directory, DONE, spec=spec, page=_page_name(run_id))
        if run_id in done.index:
            row = done.loc[run_id]
            run.split, run.dataset, run.label = str(row["split"]), str(row["dataset"]), str(row["label"])
            run.method, run.preset = str(row.get("method", row["label"])), str(row.get("preset", ""))
            run.backbone, run.seed = str(row.get("backbone", "")), int(row["seed"])
        else:
            if run_id in unplaced:
                run.state, run.why = UNREADABLE, unplaced[run_id]
            elif (directory / "error.txt").exists():
                run.state, run.why = FAILED, _first_line(directory / "error.txt")
            elif (directory / "log.txt").exists() or (directory / "checkpoint.pt").exists():
                run.state = UNFINISHED
            else:
                run.state = NOT_RUN
            if spec is not None:
                run.split, run.dataset, run.label = spec.split_label, spec.dataset, label_of_spec(spec)
                run.method, run.preset, run.backbone, run.seed = spec.method, spec.preset, spec.backbone, spec.seed
        out.append(run)
    cells: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for run in out:
        if run.spec is not None or run.state == DONE:
            cells[run.cell].append(run)
    for members in cells.values():
        members.sort(key=lambda r: (r.seed is None, r.seed or 0, r.run_id))
        for run in members:
            run.siblings = members
    return out


# ---------------------------------------------------------------------------------------------- pieces

def _num(value: Any, digits: int = 1) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _state_badge(state: str) -> str:
    return f'<span class="st st-{e(state.replace(" ", "-"))}" title="{e(STATE_HELP[state])}">{e(state)}</span>'


def _cell_state(members: Sequence[Run]) -> str:
    """What a cell without a finished run says instead of a number: its runs' states."""
    if not members:
        return NOT_RUN
    counts: dict[str, int] = defaultdict(int)
    for run in members:
        counts[run.state] += 1
    order = [FAILED, UNREADABLE, UNFINISHED, NOT_RUN]
    return ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s))


def _missing_td(members: Sequence[Run], extra: str = "") -> str:
    text = _cell_state(members)
    worst = next((s for s in (FAILED, UNREADABLE, UNFINISHED, NOT_RUN) if any(r.state == s for r in members)), NOT_RUN)
    link = next((r for r in members if r.state != NOT_RUN or r.spec is not None), None)
    inner = f'<a href="runs/{quote(link.page)}.html">{e(text)}</a>' if link else e(text)
    return f'<td data-v="" class="missing st-{e(worst.replace(" ", "-"))}" title="no finished run{e(extra)}">{inner}</td>'


REFERENCE_MARK = (' <span class="ref" title="a reference method: sees earlier steps\' data; never bold in the '
                  'paper\'s tables">reference</span>')


def _run_links(members: Sequence[Run], prefix: str = "runs/") -> str:
    return " ".join(f'<a class="seed st-{e(r.state.replace(" ", "-"))}" href="{prefix}{quote(r.page)}.html" '
                    f'title="{e(r.run_id)}: {e(r.state)}{(": " + e(r.why)) if r.why else ""}">'
                    f'{e("s" + str(r.seed) if r.seed is not None else r.run_id)}</a>' for r in members)


def _filters(runs: Sequence[Run]) -> str:
    def options(values: Iterable[str]) -> str:
        return "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in sorted(set(values)))

    shown = [r for r in runs if r.spec is not None or r.state == DONE]
    return ('<form class="filters" onsubmit="return false">'
            + "".join(f'<label>{title} <select data-filter="{key}"><option value="">all</option>'
                      f'{options(getattr(r, key) for r in shown)}</select></label>'
                      for key, title in (("dataset", "dataset"), ("method", "method"), ("preset", "preset")))
            + '<label>search <input type="search" data-filter-text placeholder="label, feature, …"></label>'
            + '<span class="filter-count" aria-live="polite"></span></form>')


def _leaderboards(scores: pd.DataFrame, runs: Sequence[Run], references: Sequence[str]) -> str:
    by_cell: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if run.spec is not None or run.state == DONE:
            by_cell[run.cell].append(run)
    stats: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(dict)
    for r in scores.to_dict("records"):
        stats[(str(r["split"]), str(r["dataset"]), str(r["label"]))][r["metric"]] = r
    keys = list(stats) + [k for k in by_cell if k not in stats]
    splits = list(dict.fromkeys(k[0] for k in keys))
    rank = {d: i for i, d in enumerate(dict.fromkeys(k[1] for k in keys))}
    parts = []
    for split in splits:
        rows = []
        mine = [k for k in keys if k[0] == split]
        # as `bench run`'s leaderboard: by dataset, best A first, cells without a number last
        mine.sort(key=lambda k: (rank[k[1]], -stats[k]["A"]["mean"] if "A" in stats[k] else math.inf))
        backbones = {_backbone(stats.get(k), by_cell.get(k)) for k in mine}
        head = ("method", "dataset", "A ↑ (%)", "A 95% CI", "F ↓ (%)", "F 95% CI", "seeds", "runs",
                "A · F flavour", "features") + (("backbone",) if len(backbones) > 1 else ())
        for key in mine:
            members, values = by_cell.get(key, []), stats.get(key, {})
            first = next(iter(values.values()), None)
            run = members[0] if members else None
            method = str(first["method"]) if first is not None and "method" in first else (run.method if run else key[2])
            preset = str(first["preset"]) if first is not None and "preset" in first else (run.preset if run else "")
            label = e(key[2]) + (REFERENCE_MARK if key[2] in references else "")
            tds = [f'<td class="label" data-v="{e(key[2])}">{label}</td>', f"<td>{e(key[1])}</td>"]
            for metric in ("A", "F"):
                hit = values.get(metric)
                if hit is None:
                    tds += [_missing_td(members), '<td class="na" data-v="" title="no finished run">—</td>']
                    continue
                std = "" if pd.isna(hit["std"]) else f" ± {hit['std']:.1f}"
                target = next((r for r in members if r.state == DONE), None)
                text = f"{hit['mean']:.1f}{std}"
                link = f'<a href="runs/{quote(target.page)}.html">{e(text)}</a>' if target else e(text)
                tds.append(f'<td class="num" data-v="{hit["mean"]:.6g}" title="mean ± std over {int(hit["n"])} '
                           f'seed(s); the link opens the first seed\'s run, whose page links the others">{link}</td>')
                ci = hit.get("ci95")
                if ci is None or pd.isna(ci):
                    tds.append('<td data-v="" class="na" title="one seed: no interval">n/a</td>')
                    continue
                low, high = ci95_bounds(hit["mean"], ci, metric)
                tds.append(f'<td class="num" data-v="{low:.6g}" title="Student\'s t over the seeds, cut to the '
                           f'metric\'s range">{low:.1f} – {high:.1f}</td>')
            n_done = sum(r.state == DONE for r in members)
            others = _cell_state([r for r in members if r.state != DONE])
            tds.append(f'<td class="num" data-v="{n_done}" title="finished seeds / runs of the cell'
                       f'{(": " + e(others)) if n_done < len(members) else ""}">{n_done}/{len(members)}</td>')
            tds.append(f'<td class="runs">{_run_links(members)}</td>')
            flavours = " · ".join(source_text(values[m]["source"]) if m in values and isinstance(values[m].get("source"), str)
                                  else "--" for m in ("A", "F"))
            tds += [f'<td class="wrap">{e(flavours)}</td>',
                    f'<td class="wrap">{e(first.get("features", "--") if first else "--")}</td>']
            if len(backbones) > 1:
                tds.append(f"<td>{e(_backbone(values, members))}</td>")
            rows.append(f'<tr data-dataset="{e(key[1])}" data-method="{e(method)}" data-preset="{e(preset)}">'
                        + "".join(tds) + "</tr>")
        one = f' <span class="meta">· backbone {e(next(iter(backbones)))}</span>' if len(backbones) == 1 else ""
        parts.append(f'<h3 id="leaderboard-{e(_slug(split))}">{e(split)}{one}</h3>'
                     f'<div class="scroll"><table class="sortable filterable leaderboard"><thead><tr>'
                     + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    return "".join(parts)


def _backbone(values: Mapping[str, Any] | None, members: Sequence[Run] | None) -> str:
    first = next(iter((values or {}).values()), None)
    if first is not None and "backbone" in first:
        return str(first["backbone"])
    return members[0].backbone if members else ""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower() or "x"


def _delta_style(metric: str, diff: float) -> str:
    """Background of a difference to the paper: green where the measured value is better (A higher,
    F lower), red where worse, stronger with the size of the gap (full at 10 points)."""
    better = diff < 0 if metric in LOWER_IS_BETTER else diff > 0
    strength = min(abs(diff) / 10.0, 1.0)
    hue = 130 if better else 0
    return f"background: hsla({hue}, 70%, 45%, {0.12 + 0.5 * strength:.2f})"


def _comparison(table: pd.DataFrame | None, runs_by_cell: Mapping[tuple[str, str, str], list[Run]]) -> str:
    if table is None:
        return "<p>Not computed.</p>"
    rows = table[table["paper"].notna()]
    if rows.empty:
        return ("<p>None of this report's cells is in the paper's tables (its datasets, splits, methods or "
                "backbones are not the paper's): nothing to compare.</p>")
    head = ("split", "dataset", "method", "backbone", "metric", "measured", "paper", "Δ (measured − paper)",
            "flavour", "features")
    body = []
    for r in rows.to_dict("records"):
        std = "" if pd.isna(r["std"]) else f" ± {r['std']:.1f}"
        cell = (str(r["split"]), str(r["dataset"]))
        members = runs_by_cell.get((*cell, str(r["label"]))) or runs_by_cell.get((*cell, f'{r["label"]} · {r["backbone"]}'), [])
        target = next((m for m in members if m.state == DONE), None)
        measured = e(f"{r['mean']:.1f}{std}")
        if target:
            measured = f'<a href="runs/{quote(target.page)}.html">{measured}</a>'
        flavour = source_text(r["source"]) if isinstance(r.get("source"), str) else "--"
        body.append(f'<tr data-dataset="{e(r["dataset"])}" data-method="{e(r["label"])}">'
                    f'<td>{e(r["split"])}</td><td>{e(r["dataset"])}</td><td>{e(r["label"])}</td>'
                    f'<td>{e(r["backbone"])}</td><td>{e(r["metric"])}</td>'
                    f'<td class="num" data-v="{r["mean"]:.6g}">{measured}</td>'
                    f'<td class="num" data-v="{r["paper"]:.6g}">{r["paper"]:.1f}</td>'
                    f'<td class="num delta" data-v="{r["diff"]:.6g}" style="{_delta_style(r["metric"], r["diff"])}">'
                    f'{r["diff"]:+.1f}</td><td>{e(flavour)}</td><td>{e(r.get("features", "--"))}</td></tr>')
    return ('<p class="note">Green: better than the paper (A higher, F lower); red: worse; the stronger the '
            'colour, the larger the gap (full at 10 points). Only the cells the paper reports are listed.</p>'
            '<table class="sortable filterable"><thead><tr>'
            + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>")


def _interval(r: Mapping[str, Any]) -> str:
    return "n/a" if r["n"] < 2 else f"{r['ci_low']:+.1f} … {r['ci_high']:+.1f}"


def _paired(table: pd.DataFrame | None, labels: Sequence[str]) -> str:
    if table is None or table.empty:
        return ""
    first, second = labels
    rows = "".join(
        f'<tr><td>{e(r["split"])}</td><td>{e(r["dataset"])}</td><td>{e(r["metric"])}</td><td class="num">{int(r["n"])}</td>'
        f'<td class="num">{r["diff"]:+.1f}</td><td class="num">'
        f'{_interval(r)}</td>'
        f'<td>{"yes" if r["beyond_noise"] else "no"}</td></tr>' for r in table.to_dict("records"))
    return (f'<section id="paired"><h2>{e(first)} − {e(second)}, paired over shared seeds</h2>'
            '<table class="sortable"><thead><tr>' + "".join(
                f'<th scope="col"><button type="button">{e(h)}</button></th>'
                for h in ("split", "dataset", "metric", "shared seeds", "difference", "95% CI", "beyond noise"))
            + "</tr></thead><tbody>" + rows + "</tbody></table></section>")


def _cgcd_section(frame: pd.DataFrame, runs_by_cell: Mapping[tuple[str, str, str], list[Run]],
                  references: Sequence[str]) -> str:
    """The mixed setting's table (as `cgcd.*`), sortable and filtered with the leaderboards: All, Old and
    New (hard, soft), F and the error in K per (split, dataset, method), each value a link to a run of its
    cell; empty when the report has no mixed run."""
    from bench.reporting.cgcd import COLUMNS, cgcd_stats

    stats = cgcd_stats(frame)
    if stats.empty:
        return ""
    cells: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(dict)
    for r in stats.to_dict("records"):
        cells[(str(r["split"]), str(r["dataset"]), str(r["label"]))][str(r["metric"])] = r
    body = []
    for (split, dataset, label), values in cells.items():
        members = runs_by_cell.get((split, dataset, label), [])
        target = next((m for m in members if m.state == DONE), None)
        method = members[0].method if members else label
        preset = members[0].preset if members else ""
        tds = [f"<td>{e(split)}</td><td>{e(dataset)}</td><td>{e(label)}{REFERENCE_MARK if label in references else ''}</td>"]
        for metric in COLUMNS:
            hit = values.get(metric)
            if hit is None:
                tds.append('<td class="na" data-v="">--</td>')
                continue
            text = e(hit["shown"])
            if target:
                text = f'<a href="runs/{quote(target.page)}.html">{text}</a>'
            tds.append(f'<td class="num" data-v="{hit["mean"]:.6g}">{text}</td>')
        seeds = int(next(iter(values.values()))["seeds"])
        tds.append(f'<td class="num" data-v="{seeds}">{seeds}</td><td class="runs">{_run_links(members)}</td>')
        body.append(f'<tr data-dataset="{e(dataset)}" data-method="{e(method)}" data-preset="{e(preset)}">'
                    + "".join(tds) + "</tr>")
    head = ["split", "dataset", "method", *COLUMNS.values(), "seeds", "runs"]
    return ('<section id="cgcd"><h2>Continual category discovery</h2><p class="note">The mixed setting\'s runs '
            '(cgcd.* beside): accuracy on All classes of a stage\'s test images, on Old and New classes in the hard '
            'sense (the labelled stage\'s classes vs the rest) and the soft one (classes seen before a stage vs new '
            'in it), each the mean over the unlabelled stages, in %, mean ± std over seeds; F the forgetting of the '
            'labelled classes (their accuracy after the labelled stage minus after the last); K error the mean '
            '|K given − K| over the unlabelled stages (0 where K is known).</p><table class="sortable filterable"><thead><tr>'
            + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table></section>")


def _layout_table(title: str, scores: pd.DataFrame, layout: str, references: Sequence[str],
                  runs_by_cell: Mapping[tuple[str, str, str], list[Run]]) -> str:
    """One of the paper's tables (Tab. 2-5, the appendix's) in HTML: the layout's rows and headers, the
    best value per column in bold (dagger: not separable from the runner-up), each value a link to a
    run of its cell, a cell without a finished run saying why."""
    shape = shape_of(scores, layout, references)
    cells = _cells(scores, references)
    datasets = axes(scores)[1]
    n_head = (1 if shape.split_column else 0) + len(shape.columns)
    top = "".join(f'<th scope="col" rowspan="2">{e(t)}</th>' for t in (["split"] if shape.split_column else [])
                  + list(shape.columns))
    top += "".join(f'<th scope="colgroup" colspan="2">{e(d)}</th>' for d in datasets)
    second = "".join(f'<th scope="col">{m}{"↓" if m in LOWER_IS_BETTER else "↑"}</th>' for _ in datasets for m in METRICS)
    body = []
    for split, rows in shape.groups:
        for j, row in enumerate(rows):
            tds = []
            if shape.split_column and j == 0:
                tds.append(f'<th scope="rowgroup" rowspan="{len(rows)}">{e(split)}</th>')
            tds += [f"<td>{e(h)}</td>" for h in row.header]
            for dataset in datasets:
                members = runs_by_cell.get((str(split), str(dataset), str(row.label)), [])
                for metric in METRICS:
                    cell = cells.get((split, row.label, dataset, metric))
                    if cell is None:
                        tds.append(_missing_td(members).replace(' data-v=""', ""))
                        continue
                    mean, std, best, tied = cell
                    text = e(f"{mean} ± {std}" if std else mean)
                    target = next((m for m in members if m.state == DONE), None)
                    if target:
                        text = f'<a href="runs/{quote(target.page)}.html">{text}</a>'
                    if best:
                        text = f"<strong>{text}</strong>"
                    if tied:
                        text += '<sup title="not separable from the runner-up">†</sup>'
                    tds.append(f'<td class="num">{text}</td>')
            body.append(f'<tr class="{"rule" if row.rule_above else ""}">' + "".join(tds) + "</tr>")
        body.append(f'<tr class="group-end"><td colspan="{n_head + 2 * len(datasets)}"></td></tr>')
    return (f'<h3 id="table-{e(_slug(title))}">{e(title)}</h3><table class="paper-table"><thead><tr>{top}</tr>'
            f"<tr>{second}</tr></thead><tbody>" + "".join(body[:-1]) + "</tbody></table>")


# ------------------------------------------------------------------------------------------------ SVG

def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = max(high - low, 1e-9)
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if raw <= step * m)
    start = math.ceil(low / step) * step
    return [start + i * step for i in range(int((high - start) / step + 1e-9) + 1)]


def svg_curves(rows: pd.DataFrame, title: str, ylabel: str, colour: Any) -> str:
    """Mean per step (a line per label) with a band of ± one std over seeds, steps counted from 1."""
    width, height, left, right, top, bottom = 460, 280, 52, 12, 26, 40
    if rows.empty:
        return f'<p class="na">{e(title)}: no per-step values recorded.</p>'
    steps = sorted(int(s) for s in rows["step"].unique())
    std = rows["std"].fillna(0.0)
    low, high = float((rows["mean"] - std).min()), float((rows["mean"] + std).max())
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
    for step in steps:
        out.append(f'<text x="{x(step):.1f}" y="{height - bottom + 16}" class="tick" text-anchor="middle">{step + 1}</text>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" class="axis" text-anchor="middle">step</text>'
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
            band = [f"{a:.1f},{y(m + s):.1f}" for a, m, s in zip(sx, mean, sd)]
            band += [f"{a:.1f},{y(m - s):.1f}" for a, m, s in reversed(list(zip(sx, mean, sd)))]
            opacity = 0.15 if labels <= 5 else 0.07  # many overlapping bands would turn to mud
            out.append(f'<polygon points="{" ".join(band)}" fill="{c}" fill-opacity="{opacity}" stroke="none"/>')
        dash = ' stroke-dasharray="5 3"' if " [" in str(label) else ""
        out.append(f'<polyline points="{" ".join(f"{a:.1f},{y(m):.1f}" for a, m in zip(sx, mean))}" fill="none" '
                   f'stroke="{c}" stroke-width="2"{dash}/>')
        for a, m, s, n, step in zip(sx, mean, sd, group["n"], group["step"]):
            out.append(f'<circle cx="{a:.1f}" cy="{y(m):.1f}" r="3" fill="{c}"><title>{e(label)}, step {int(step) + 1}: '
                       f'{m:.1f} ± {s:.1f} ({int(n)} seed(s))</title></circle>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _curves(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None, figures: Sequence[Path], out: Path) -> str:
    from bench.reporting.plots import method_colour

    accuracy = step_curves(frame, order)
    forgetting = step_forgetting(frame, order)
    parts = []
    for (dataset, split), rows in accuracy.groupby(["dataset", "split"], observed=True, sort=False):
        fr = forgetting[(forgetting["dataset"] == dataset) & (forgetting["split"] == split)]
        labels = list(dict.fromkeys(rows["label"].astype(str)))
        legend = "".join(f'<li data-label="{e(l)}" title="click: hide or show its lines">'
                         f'<span class="swatch{" dashed" if " [" in l else ""}" style="--c:{method_colour(l)}"></span>'
                         f'{e(l)}</li>' for l in labels)
        parts.append(f'<figure class="curves" data-dataset="{e(dataset)}"><figcaption>{e(dataset)}, {e(split)}'
                     f'</figcaption><div class="panels">'
                     + svg_curves(rows, "accuracy on all classes seen so far", "accuracy (%)", method_colour)
                     + svg_curves(fr, "forgetting of step 1's classes", "forgetting (%)", method_colour)
                     + f'</div><ul class="legend">{legend}</ul></figure>')
    radars = [p for p in figures if p.suffix == ".png" and p.name.startswith("radar")]
    for path in radars:
        rel = os.path.relpath(path, out)
        pdf = path.with_suffix(".pdf")
        parts.append(f'<figure class="radar"><img src="{e(quote(rel))}" alt="radar plot {e(path.stem)}" loading="lazy">'
                     f'<figcaption>{e(path.stem.replace("_", " "))}: A and 100−F, each axis relative to its best method'
                     + (f' (<a href="{e(quote(os.path.relpath(pdf, out)))}">PDF</a>)' if pdf.exists() else "")
                     + "</figcaption></figure>")
    return "".join(parts)


# ------------------------------------------------------------------------------------------ run pages

def _group_key(group: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"task_(\d+)", group)
    if m:
        return (0, int(m.group(1)), group)
    return (1, ("old", "new", "all", "summary").index(group) if group in ("old", "new", "all", "summary") else 9, group)


def _metric_text(metric: str, value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    return f"{value:.3f}" if metric in ("nmi", "ari") else f"{value:.2f}"


MEASURES = ["step", "group", "flavour", "metric", "value"]
Measure = tuple[int, str, str, str, float]  # a metrics row: step, group, flavour, metric, value


def _metrics_tables(rows: Sequence[Measure]) -> str:
    """A table per flavour: one line per (step, group), one column per metric."""
    by_flavour: dict[str, dict[tuple[int, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    metrics: dict[str, list[str]] = defaultdict(list)
    for step, group, flavour, metric, value in rows:
        by_flavour[str(flavour)][(int(step), str(group))][str(metric)] = value
        if metric not in metrics[flavour]:
            metrics[str(flavour)].append(str(metric))
    names = {"task": "task (each task's own head)", "wo": "W/O (task-agnostic, frozen maps)",
             "wo_refit": "W/O, maps re-fitted", "w": "W (one Hungarian match per group)",
             "gcd": "GCD All/Old/New (one match)", "gcd_sep": "GCD, separate matches"}
    out = []
    for flavour in sorted(by_flavour, key=lambda f: (list(names).index(f) if f in names else 99, f)):
        lines = by_flavour[flavour]
        cols = metrics[flavour]
        # compact (a 10-step run has hundreds of lines): no per-cell attributes; `·`: not a metric of the group
        body = "".join(f'<tr><td>{step + 1}</td><td>{e(group)}</td>'
                       + "".join(f'<td>{e(_metric_text(m, lines[(step, group)][m]))}</td>' if m in lines[(step, group)]
                                 else '<td class="na">·</td>'
                                 for m in cols) + "</tr>"
                       for step, group in sorted(lines, key=lambda k: (k[0], _group_key(k[1]))))
        out.append(f'<h3>{e(names.get(flavour, flavour))}</h3><table class="sortable metrics"><thead><tr>'
                   + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in ["step", "group", *cols])
                   + f"</tr></thead><tbody>{body}</tbody></table>")
    return "".join(out) or "<p>No metrics recorded.</p>"


def _tail(path: Path, lines: int) -> tuple[str, int]:
    try:
        with path.open("rb") as fh:  # the end of a long log without reading all of it
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return "", 0
    kept = text.splitlines()[-lines:]
    return "\n".join(kept), len(kept)


def _files(directory: Path, page_dir: Path) -> str:
    if not directory.is_dir():
        return "<p>No run directory: the run never started.</p>"
    items = []
    for path in sorted(directory.iterdir()):
        if path.name.startswith("."):
            continue
        size = "folder" if path.is_dir() else _size(path.stat().st_size)
        items.append(f'<li><a href="{e(quote(os.path.relpath(path, page_dir)))}">{e(path.name)}</a> '
                     f'<span class="size">{e(size)}</span></li>')
    return f'<p class="path">{e(directory)}</p><ul class="files">{"".join(items)}</ul>'


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _kv_table(pairs: Iterable[tuple[str, Any]], cls: str = "kv") -> str:
    return (f'<table class="{cls}"><tbody>' + "".join(f'<tr><th scope="row">{e(k)}</th><td>{e(v)}</td></tr>'
                                                      for k, v in pairs) + "</tbody></table>")


def _read_spec(run: Run) -> Any:
    if run.spec is not None:
        return run.spec
    from bench.spec import RunSpec

    try:
        return RunSpec.from_json((run.directory / "spec.json").read_text())
    except Exception:
        return None


def run_page(run: Run, rows: Sequence[Measure] | None, first: Mapping[str, Any] | None, page_dir: Path,
             title: str) -> str:
    """The run's page; `rows`: its metrics, `first`: its first metrics row (identity, provenance)."""
    spec = _read_spec(run)
    what = " · ".join(str(v) for v in (run.label, run.dataset, run.split, run.backbone) if v)
    seed = f" · seed {run.seed}" if run.seed is not None else ""
    parts = [f'<p class="crumbs"><a href="../index.html">{e(title)}</a> › run {e(run.run_id)}</p>',
             f"<h1>{e(what)}{e(seed)} {_state_badge(run.state)}</h1>"]
    if run.why:
        parts.append(f'<p class="why">{e(run.why)}</p>')
    if len(run.siblings) > 1:
        parts.append('<p class="siblings">Runs of this cell (the other seeds): '
                     + " ".join(("<strong>" + e(f"s{s.seed}") + "</strong>") if s is run else _run_links([s], "")
                                for s in run.siblings) + "</p>")
    if rows and first is not None:
        summary = {(flavour, metric): value for _, group, flavour, metric, value in rows if group == "summary"}
        reported = []
        for metric in ("A", "F"):
            source = first.get(f"reported_{metric}")
            source = str(source) if isinstance(source, str) else f"{first.get('primary_flavour', 'wo')}/{metric}"
            key = tuple(source.split("/", 1)) if "/" in source else (source, metric)
            if key in summary:
                reported.append(f'<div class="big"><span>{metric}</span>{summary[key]:.1f}'
                                f'<small>{e(source_text(source))}</small></div>')
        parts.append('<div class="bigs">' + "".join(reported) + "</div>")
    parts.append('<nav class="toc"><a href="#config">config</a> <a href="#provenance">provenance</a> '
                 '<a href="#metrics">per-step metrics</a> ' + ('<a href="#error">error</a> ' if run.state == FAILED else "")
                 + '<a href="#log">log</a> <a href="#files">files</a></nav>')
    if spec is not None:
        ident = [("run id", run.run_id), ("method", spec.method), ("preset", spec.preset), ("dataset", spec.dataset),
                 ("split", spec.split_label), ("steps", spec.n_steps), ("backbone", spec.backbone), ("seed", spec.seed)]
        config = sorted(flat_config(spec.config).items())
        parts.append('<div class="cols"><section id="config"><h2>Configuration</h2>' + _kv_table(ident)
                     + '<h3>resolved config</h3>' + _kv_table((k, repr(v) if not isinstance(v, str) else v)
                                                             for k, v in config) + "</section>")
    else:
        parts.append('<div class="cols"><section id="config"><h2>Configuration</h2><p class="na">Its spec.json cannot be '
                     'read.</p></section>')
    if rows and first is not None:
        prov = [(c, first[c]) for c in PROVENANCE if c in first and not pd.isna(first[c])]
        prov = [(c, f"{v:.1f} s" if c == "duration_s" else (v if str(v) != "" else "—")) for c, v in prov]
        parts.append('<section id="provenance"><h2>Provenance</h2>' + _kv_table(prov) + "</section></div>"
                     + '<section id="metrics"><h2>Per-step metrics, every flavour</h2>'
                     '<p class="note">Accuracies and F in %, NMI and ARI in 0..1; steps counted from 1; · where the '
                     'metric is not one of the group\'s.</p>'
                     + _metrics_tables(rows) + "</section>")
    else:
        parts.append('<section id="provenance"><h2>Provenance</h2><p class="na">No metrics: the run has not finished.'
                     '</p></section></div><section id="metrics"><h2>Per-step metrics</h2><p class="na">None recorded '
                     f'({e(run.state)}).</p></section>')
    if run.state == FAILED:
        text, _ = _tail(run.directory / "error.txt", 80)
        parts.append(f'<section id="error"><h2>error.txt</h2><pre class="log error">{e(text)}</pre></section>')
    log, n = _tail(run.directory / "log.txt", LOG_LINES)
    parts.append(f'<section id="log"><h2>Log (last {n} lines)</h2>'
                 + (f'<pre class="log">{e(log)}</pre>' if n else '<p class="na">No log.txt.</p>') + "</section>")
    parts.append(f'<section id="files"><h2>Files</h2>{_files(run.directory, page_dir)}</section>')
    return _document(f"{what}{seed} — {title}", "".join(parts), "../")


# ------------------------------------------------------------------------------------------ the site

def _document(title: str, body: str, root: str = "") -> str:
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)}</title><link rel=\"stylesheet\" href=\"{root}site.css\"></head>"
            f"<body>{body}<script src=\"{root}site.js\"></script></body></html>\n")


def write_site(frame: pd.DataFrame, out: Path, *, title: str, runs: Sequence[tuple[Path, Any]],
               unplaced: Mapping[str, str], label_of_spec: Any, order: Mapping[str, Sequence[str]] | None = None,
               references: Sequence[str] = (), tables: Sequence[tuple[str, str, pd.DataFrame]] = (),
               comparison: pd.DataFrame | None = None, paired: tuple[Sequence[str], pd.DataFrame] | None = None,
               figures: Sequence[Path] = (), files: Sequence[Path] = ()) -> list[Path]:
    """Write the site under `out`; returns index.html and its two assets (the run pages are under
    `out/runs/`). `tables`: (title, layout, frame) of each paper-layout table; `comparison`: the
    `--compare paper` table; `figures`, `files`: what the report wrote beside."""
    out = Path(out)
    page_dir = out / "runs"
    page_dir.mkdir(parents=True, exist_ok=True)
    all_runs = collect_runs(frame, runs, unplaced, label_of_spec)
    scores = final_scores(frame, order) if len(frame) else pd.DataFrame()
    runs_by_cell: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for run in all_runs:
        if run.siblings:
            runs_by_cell[run.cell] = run.siblings
    counts: dict[str, int] = defaultdict(int)
    for run in all_runs:
        counts[run.state] += 1
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = ", ".join(f'{n} {_state_badge(s)}' for s, n in
                        sorted(counts.items(), key=lambda kv: list(STATE_HELP).index(kv[0])))
    cgcd = _cgcd_section(frame, runs_by_cell, references) if len(frame) else ""
    sections = [("leaderboards", "Leaderboards"), *([("cgcd", "Category discovery")] if cgcd else []),
                ("comparison", "Paper comparison"), ("curves", "Curves"), ("tables", "Paper tables"), ("runs", "Runs"),
                ("files", "Files")]
    nav = "".join(f'<a href="#{k}">{v}</a>' for k, v in sections)
    body = [f'<header><h1>{e(title)}</h1><p class="meta">{len(all_runs)} runs: {summary} · generated {e(generated)}'
            f'</p><nav class="toc">{nav}</nav></header>',
            '<section id="leaderboards"><h2>Leaderboards</h2>'
            '<p class="note">Per split: A and F in %, mean ± std over seeds, the 95% confidence interval of the mean '
            '(Student\'s t), finished seeds / runs of the cell and a link per run (coloured by state). Click a header '
            'to sort (again to reverse); filter by dataset, method and preset. Reference methods see earlier steps\' '
            'data, as in the paper.</p>'
            + _filters(all_runs) + (_leaderboards(scores, all_runs, references) or "<p>No runs.</p>") + "</section>",
            cgcd,
            '<section id="comparison"><h2>Paper comparison</h2>' + _comparison(comparison, runs_by_cell) + "</section>"]
    if paired is not None:
        body.append(_paired(paired[1], paired[0]))
    body.append('<section id="curves"><h2>Curves and radar plots</h2><p class="note">Per dataset and split: each '
                'method\'s accuracy on all classes seen so far (in the flavour of its A) and the forgetting of the '
                'first step\'s classes (in the flavour of its F) after every step, mean with a band of ± one std '
                'over seeds; hover a point for its values.</p>'
                + (_curves(frame, order, figures, out) if len(frame) else "<p>No finished runs.</p>") + "</section>")
    body.append('<section id="tables"><h2>The paper\'s tables</h2><p class="note">In the layouts of the paper: best '
                'value per column in bold (reference methods never), † where it is not separable from the '
                'runner-up; every value links to a run of its cell.</p>'
                + "".join(_layout_table(name, part, layout, references, runs_by_cell) for name, layout, part in tables)
                + "</section>")
    run_rows = "".join(
        f'<tr data-dataset="{e(r.dataset)}" data-method="{e(r.method)}" data-preset="{e(r.preset)}">'
        f'<td><a href="runs/{quote(r.page)}.html">{e(r.run_id)}</a></td><td>{e(r.label)}</td><td>{e(r.dataset)}</td>'
        f'<td>{e(r.split)}</td><td>{e(r.backbone)}</td><td class="num" data-v="{"" if r.seed is None else r.seed}">'
        f'{"" if r.seed is None else r.seed}</td><td data-v="{e(r.state)}">{_state_badge(r.state)}</td>'
        f'<td>{e(r.why)}</td></tr>' for r in all_runs)
    body.append('<section id="runs"><h2>Runs</h2><table class="sortable filterable"><thead><tr>'
                + "".join(f'<th scope="col"><button type="button">{h}</button></th>'
                          for h in ("run", "label", "dataset", "split", "backbone", "seed", "state", "why"))
                + f"</tr></thead><tbody>{run_rows}</tbody></table></section>")
    listed = "".join(f'<li><a href="{e(quote(os.path.relpath(p, out)))}">{e(p.name)}</a></li>' for p in files)
    body.append(f'<section id="files"><h2>Files of this report</h2><ul class="files">{listed}</ul></section>')
    index = out / "index.html"
    write_atomic(index, _document(title, "".join(body)))
    assets = []
    for name in ("site.css", "site.js"):
        write_atomic(out / name, (ASSETS / name).read_text())
        assets.append(out / name)
    # each run's rows as plain tuples: slicing the frame per run copies every column (pyarrow strings), slowly
    by_run: dict[str, list[Measure]] = defaultdict(list)
    firsts: dict[str, dict[str, Any]] = {}
    if len(frame):
        for run_id, *measure in zip(frame["run_id"].astype(str).tolist(), *(frame[c].tolist() for c in MEASURES)):
            by_run[run_id].append(tuple(measure))  # type: ignore[arg-type]
        firsts = frame.drop(columns=MEASURES).drop_duplicates("run_id").set_index("run_id").to_dict("index")
    for run in all_runs:
        write_atomic(page_dir / f"{run.page}.html",
                     run_page(run, by_run.get(run.run_id), firsts.get(run.run_id), page_dir, title))
    return [index, *assets]

"""`write_site`: the whole site under a report's folder: index.html (its sections from `tables` and
`charts`), the two assets copied beside it, and a page per run (`pages`), each file written atomically."""
from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

import pandas as pd

from bench.reporting.aggregate import final_scores
from bench.reporting.site.charts import _curves
from bench.reporting.site.html import _document, e
from bench.reporting.site.pages import MEASURES, Measure, run_page
from bench.reporting.site.statistics import statistics_section
from bench.reporting.site.runs import STATE_HELP, Run, _state_badge, collect_runs
from bench.reporting.site.tables import _cgcd_section, _tuning_section, _comparison, _filters, _layout_table, _leaderboards, _paired
from bench.core.storage import write_atomic

# the assets stay beside the package, in bench/reporting/site_assets/ (bench.reporting's package data)
ASSETS = Path(__file__).parents[1] / "site_assets"


def write_site(frame: pd.DataFrame, out: Path, *, title: str, runs: Sequence[tuple[Path, Any]],
               unplaced: Mapping[str, str], label_of_spec: Any, order: Mapping[str, Sequence[str]] | None = None,
               references: Sequence[str] = (), tables: Sequence[tuple[str, str, pd.DataFrame]] = (),
               comparison: pd.DataFrame | None = None, paired: tuple[Sequence[str], pd.DataFrame] | None = None,
               figures: Sequence[Path] = (), files: Sequence[Path] = (), statistics: Any = None) -> list[Path]:
    """Write the site under `out`; returns index.html and its two assets (the run pages are under
    `out/runs/`). `tables`: (title, layout, frame) of each paper-layout table; `comparison`: the
    `--compare paper` table; `figures`, `files`: what the report wrote beside; `statistics`: the report's
    `bench.reporting.statistics.Statistics` (its section; none without)."""
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
    cgcd = (_cgcd_section(frame, runs_by_cell, references) + _tuning_section(frame)) if len(frame) else ""
    ranked = statistics_section(statistics, figures)
    correction = getattr(getattr(statistics, "options", None), "correction", "holm")  # the daggers' (--correction)
    sections = [("leaderboards", "Leaderboards"), *([("statistics", "Statistics")] if ranked else []),
                *([("cgcd", "Category discovery")] if cgcd else []),
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
            ranked, cgcd,
            '<section id="comparison"><h2>Paper comparison</h2>'
            + _comparison(comparison, runs_by_cell, mixed=bool(cgcd), files=[Path(p).name for p in files]) + "</section>"]
    if paired is not None:
        body.append(_paired(paired[1], paired[0]))
    body.append('<section id="curves"><h2>Curves and radar plots</h2><p class="note">Per dataset and split: each '
                'method\'s accuracy on all classes seen so far (in the flavour of its A) and the forgetting of the '
                'first step\'s classes (in the flavour of its F) after every step, mean with a band of ± one std '
                'over seeds; hover a point for its values.</p>'
                + (_curves(frame, order, figures, out) if len(frame) else "<p>No finished runs.</p>") + "</section>")
    body.append('<section id="tables"><h2>The paper\'s tables</h2><p class="note">In the layouts of the paper: best '
                'value per column in bold (reference methods never), † where it is not separable from the '
                'runner-up (paired t-tests over the seeds, corrected for their number in each table, as the note '
                'under it says); every value links to a run of its cell.</p>'
                + "".join(_layout_table(name, part, layout, references, runs_by_cell, correction)
                          for name, layout, part in tables)
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
            by_run[run_id].append(tuple(measure))
        firsts = frame.drop(columns=MEASURES).drop_duplicates("run_id").set_index("run_id").to_dict("index")
    for run in all_runs:
        write_atomic(page_dir / f"{run.page}.html",
                     run_page(run, by_run.get(run.run_id), firsts.get(run.run_id), page_dir, title))
    return [index, *assets]

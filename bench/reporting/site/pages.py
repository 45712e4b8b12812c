"""One page per run (`runs/<page>.html`): its A and F and its figures first (the per-step curve, the forgetting of
the first step's classes, the accuracy matrix), then its identity and resolved config, provenance, per-step
metrics in every flavour, the end of its log (and its error), links to its files and to the other seeds of its
cell."""
from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

import pandas as pd

from bench.core.sizes import size_text
from bench.reporting.aggregate import flat_config
from bench.reporting.site.html import _document, _kv_table, e
from bench.reporting.site.runs import FAILED, Run, _run_links, _state_badge
from bench.reporting.table import source_text

LOG_LINES = 60  # the end of a run's log shown on its page

PROVENANCE = ("bench_version", "git_commit", "host", "device", "gpu", "slurm_job_id", "started_at", "ended_at", "duration_s",
              "torch_version", "torchvision_version", "timm_version", "numpy_version", "cuda_version",
              "cudnn_version", "weights_sha256", "tail_precision", "threads", "rebuilt_from", "features",
              "mapping_images", "reported_A", "reported_F")


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
        flavour = "domain" if group == "domain" else str(flavour)  # a stream's stage × domain matrix, apart
        by_flavour[flavour][(int(step), str(group))][str(metric)] = value
        if metric not in metrics[flavour]:
            metrics[flavour].append(str(metric))
    names = {"task": "task (each task's own head)", "wo": "W/O (task-agnostic, frozen maps)",
             "wo_refit": "W/O, maps re-fitted", "w": "W (one Hungarian match per group)",
             "gcd": "GCD All/Old/New (one match)", "gcd_sep": "GCD, separate matches",
             "domain": "accuracy by domain: after each stage (a line), on each domain's test images of the classes "
                       "seen (a column; its own match)"}
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


def _figures(rows: Sequence[Measure], first: Mapping[str, Any], directory: Path | None = None) -> str:
    """What the page opens with: the run's accuracy on every class seen so far after each step (in the flavour
    and weighting of its A), its forgetting of the first step's classes where it recorded per-task rows, and its
    accuracy matrix (each task's accuracy after each step, with its backward transfer)."""
    from bench.reporting.aggregate import backward_transfer
    from bench.reporting.site.charts import svg_curves

    source = str(first.get("reported_A") or f"{first.get('primary_flavour', 'wo')}/A")
    flavour, summary = source.split("/", 1) if "/" in source else (source, "A")
    metric = "acc_sample" if summary == "A_sample" else "acc"
    label = str(first.get("label", "run"))

    def frame(points: list[tuple[int, float]]) -> pd.DataFrame:
        return pd.DataFrame([dict(label=label, step=t, mean=v, std=0.0, n=1) for t, v in points])

    curve = sorted((t, v) for t, g, f, m, v in rows if g == "all" and f == flavour and m == metric)
    if not curve:  # the mixed setting: its steps' `all` rows are flavour cgcd
        curve = sorted((t, v) for t, g, f, m, v in rows if g == "all" and f == "cgcd" and m == "acc")
    cells = {(t, int(g[5:])): v for t, g, f, m, v in rows if re.fullmatch(r"task_\d+", g) and f == flavour and m == "acc"}
    out = ['<section id="figures"><h2>Per step</h2><div class="panels">']
    if curve:
        out.append(svg_curves(frame(curve), "accuracy on all classes seen so far", "accuracy (%)", lambda _: "#1f77b4"))
    if cells:
        first_task = cells.get((0, 0))
        forgetting = [(t, first_task - v) for (t, k), v in sorted(cells.items()) if k == 0 and first_task is not None]
        if forgetting:
            out.append(svg_curves(frame(forgetting), f"drop on step 1's classes ({flavour})", "points",
                                  lambda _: "#d62728", bounds=(-100.0, 100.0)))
    out.append("</div>")
    if cells:
        steps = max(t for t, _ in cells) + 1
        matrix = pd.DataFrame([dict(step=t, task=k, mean=v) for (t, k), v in cells.items()])
        bwt = backward_transfer(matrix)
        head = "".join(f"<th>task {k + 1}</th>" for k in range(steps))
        body = "".join("<tr><th>after step " + str(t + 1) + "</th>" + "".join(
            f'<td class="num" style="background:hsl({1.2 * cells[(t, k)]:.0f} 70% 85%)">{cells[(t, k)]:.1f}</td>'
            if (t, k) in cells else "<td></td>" for k in range(steps)) + "</tr>" for t in range(steps))
        out.append(f'<table class="matrix"><caption>accuracy (%) on each task after each step ({e(flavour)})'
                   + (f"; backward transfer {bwt:+.1f}" if not math.isnan(bwt) else "")
                   + f'</caption><tr><th></th>{head}</tr>{body}</table>')
    return "".join(out) + _per_class(directory) + _training_curves(directory) + "</section>"


def _per_class(directory: Path | None) -> str:
    """The confusion of old and new classes after the last step, and each class's accuracy (folded), under one
    Hungarian match (`bench.reporting.per_class`)."""
    from bench.reporting.per_class import of_run

    got = of_run(directory) if directory is not None else None
    if got is None or got.classes.empty:
        return ""
    conf = got.confusion
    head = "".join(f"<th>predicted {e(c)}</th>" for c in conf.columns)
    body = "".join(f"<tr><th>{e(kind)} images</th>" + "".join(
        f'<td class="num">{v:.1f}</td>' if not math.isnan(v) else "<td>—</td>" for v in conf.loc[kind]) + "</tr>"
        for kind in conf.index)
    classes = "".join(f'<tr><td>{int(r.cls)}</td><td>{e(r.kind)}</td><td class="num">{int(r.images)}</td>'
                      f'<td class="num">{r.accuracy:.1f}</td></tr>' for r in got.classes.itertuples())
    return ('<h3>Old and new classes after the last step</h3><p class="note">Under one Hungarian match of the '
            "clusters to the classes (flavour w): of the old classes' images (seen before the last step) and the new "
            "ones', the share (%) whose matched prediction is an old class, a new one, or a cluster matched to none."
            f'</p><table class="matrix"><tr><th></th>{head}</tr>{body}</table>'
            f'<details><summary>accuracy of each class ({len(got.classes)})</summary><table class="metrics">'
            f'<tr><th>class</th><th>kind</th><th>images</th><th>accuracy (%)</th></tr>{classes}</table></details>')


def _training_curves(directory: Path | None) -> str:
    """Each training loop's mean loss per epoch (or per SVI step, where its loop says so: `loss_unit_<t>_<i>`), step
    by step (what the run's predictions keep: `epoch_loss_<t>_<i>`), a panel per step with its legend; nothing for a
    run without (no trained loop, or finished before they were kept)."""
    import numpy as np

    from bench.reporting.plots import figure_styles
    from bench.reporting.site.charts import svg_curves
    from bench.runs.predictions import LOSS_UNITS, PREDICTIONS, Keys, each, is_mixed, opened
    from bench.splits.settings import step_name

    if directory is None:
        return ""
    try:
        with opened(directory / PREDICTIONS) as stored:
            losses, scores = each(stored, Keys.epoch_loss), each(stored, Keys.epoch_score)
            units = {index: LOSS_UNITS[int(unit)] for index, unit in each(stored, Keys.loss_unit).items()}
            mixed = is_mixed(stored)
    except Exception:  # missing, damaged (numpy and zipfile raise many types), or of a newer schema
        return ""
    by_step: dict[int, list[tuple[str, np.ndarray, str]]] = defaultdict(list)
    for (t, i), values in losses.items():
        by_step[t].append((f"loop {i + 1}", values, units.get((t, i), "epoch")))
    panels = []
    for t, loops in sorted(by_step.items()):
        frame = pd.DataFrame([dict(label=label, step=epoch, mean=float(v), std=0.0, n=1)
                              for label, values, _ in loops for epoch, v in enumerate(values)])
        if frame.empty:
            continue
        unit = " or ".join(dict.fromkeys(u for _, _, u in loops))
        styles = figure_styles(list(dict.fromkeys(frame["label"])))
        legend = "".join(f'<li><span class="swatch{" dashed" if styles[label][1] != "-" else ""}" '
                         f'style="--c:{styles[label][0]}"></span>{e(label)} ({len(values)} {e(u)}s)</li>'
                         for label, values, u in loops)
        panels.append('<figure class="training">'
                      + svg_curves(frame, f"{step_name(t, mixed)}: training loss per {unit}", "mean loss",
                                   lambda l: styles[l][0], lambda l: styles[l][1],  # noqa: B023 (used right here)
                                   bounds=(float("-inf"), float("inf")), xlabel=unit)
                      + f'<ul class="legend">{legend}</ul></figure>')
    for (t, i), scored in scores.items():
        frame = pd.DataFrame([dict(label=f"loop {i + 1}", step=int(epoch), mean=float(score), std=0.0, n=1)
                              for epoch, score in scored])
        if len(frame):
            panels.append(svg_curves(frame, f"{step_name(t, mixed)}, loop {i + 1}: the selection's score per epoch "
                                     "scored", "score (%)", lambda _: "#2ca02c", xlabel="epoch"))
    if not panels:
        return ""
    return ('<h3>Training</h3><p class="note">Each training loop\'s mean loss over an epoch\'s batches (a step may '
            'train several loops, e.g. a warm-up and the main loop; VB-CGCD\'s loops are its fits, a point per SVI '
            'step: one Adam step on a batch), and where the run selected an epoch (<code>setting.selection</code>), '
            'the score of each epoch it scored.</p><div class="panels">' + "".join(panels) + "</div>")


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
        size = "folder" if path.is_dir() else size_text(path.stat().st_size)
        items.append(f'<li><a href="{e(quote(os.path.relpath(path, page_dir)))}">{e(path.name)}</a> '
                     f'<span class="size">{e(size)}</span></li>')
    return f'<p class="path">{e(directory)}</p><ul class="files">{"".join(items)}</ul>'


def _read_spec(run: Run) -> Any:
    if run.spec is not None:
        return run.spec
    from bench.config.spec import RunSpec

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
        parts.append(_figures(rows, first, run.directory))
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

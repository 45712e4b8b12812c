"""The index's tables over cells: the leaderboards per split and their filters, the paper comparison,
the paired comparison of two methods, the mixed setting's (cgcd) section and the paper's table
layouts. Every value links to a run of its cell; a cell without a finished run says why."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

import pandas as pd

from bench.reporting.layouts import axes, shape_of
from bench.reporting.ranks import rank_texts
from bench.reporting.site.html import _slug, e
from bench.reporting.site.runs import DONE, Run, _cell_state, _missing_td, _run_links
from bench.reporting.stats import ci95_bounds
from bench.reporting.table import (LOWER_IS_BETTER, METRICS, _cells, dagger_note, flavours_text, rank_header, rank_note,
                                   source_text)

REFERENCE_MARK = (' <span class="ref" title="a reference method: sees earlier steps\' data; never bold in the '
                  'paper\'s tables">reference</span>')


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
    ranks = rank_texts(scores) if len(scores) else {}  # over every block of the report: one per method
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
                "A · F flavour", "features") + (("backbone",) if len(backbones) > 1 else ())\
            + ((rank_header(scores),) if ranks else ())
        for key in mine:
            members, values = by_cell.get(key, []), stats.get(key, {})
            first = next(iter(values.values()), None)
            lead = members[0] if members else None
            method = str(first["method"]) if first is not None and "method" in first else (lead.method if lead else key[2])
            preset = str(first["preset"]) if first is not None and "preset" in first else (lead.preset if lead else "")
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
            flavours = flavours_text(*(values[m]["source"] if m in values and isinstance(values[m].get("source"), str)
                                       else None for m in ("A", "F")))
            tds += [f'<td class="wrap">{e(flavours)}</td>',
                    f'<td class="wrap">{e(first.get("features", "--") if first else "--")}</td>']
            if len(backbones) > 1:
                tds.append(f"<td>{e(_backbone(values, members))}</td>")
            if ranks:
                shown = ranks.get(key[2], "not ranked")
                tds.append(f'<td class="num" data-v="{e(shown.split(" ")[0]) if key[2] in ranks else ""}" title="average '
                           f'rank of A over every split × dataset of the report, 95% bootstrap interval over them: '
                           f'the same on each of the method\'s rows; not ranked: a cell without its value">{e(shown)}</td>')
            rows.append(f'<tr data-dataset="{e(key[1])}" data-method="{e(method)}" data-preset="{e(preset)}">'
                        + "".join(tds) + "</tr>")
        one = f' <span class="meta">· backbone {e(next(iter(backbones)))}</span>' if len(backbones) == 1 else ""
        parts.append(f'<h3 id="leaderboard-{e(_slug(split))}">{e(split)}{one}</h3>'
                     f'<div class="scroll"><table class="sortable filterable leaderboard"><thead><tr>'
                     + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    if ranks:  # one average over every block, shown on each row of a split: said once, under the tables
        parts.append(f'<p class="note">{e(rank_note(scores))}.</p>')
    return "".join(parts)


def _backbone(values: Mapping[str, Any] | None, members: Sequence[Run] | None) -> str:
    first = next(iter((values or {}).values()), None)
    if first is not None and "backbone" in first:
        return str(first["backbone"])
    return members[0].backbone if members else ""


def _delta_style(metric: str, diff: float) -> str:
    """Background of a difference to the paper: green where the measured value is better (A higher,
    F lower), red where worse, stronger with the size of the gap (full at 10 points)."""
    better = diff < 0 if metric in LOWER_IS_BETTER else diff > 0
    strength = min(abs(diff) / 10.0, 1.0)
    hue = 130 if better else 0
    return f"background: hsla({hue}, 70%, 45%, {0.12 + 0.5 * strength:.2f})"


def _peers_pointer(files: Sequence[str]) -> str:
    """Where a report of the mixed setting compares with published numbers: the continual-GCD peers' tables
    (`bench report --compare PEER`), and the comparisons this report wrote (`files`: their names, beside index.html)."""
    from bench.reporting.peers import PEERS

    written = [name for name in files if any(name.startswith(f"compare_{peer}.") for peer in PEERS)]
    return ("<p>This report's runs of the mixed setting (continual category discovery) are not in the paper's "
            "class-iNCD tables; the continual-GCD peers' published tables are: run <code>bench report</code> again "
            "with this report's selection and " + ", ".join(f"<code>--compare {e(peer)}</code>" for peer in PEERS)
            + " (" + "; ".join(e(name) for name in PEERS.values()) + ") to write <code>compare_&lt;peer&gt;.md</code> "
            "(and .tex, .csv) beside this page, each published cell beside the measured one."
            + (" This report's: " + ", ".join(f'<a href="{quote(name)}">{e(name)}</a>' for name in written) + "."
               if written else "") + "</p>")


def _comparison(table: pd.DataFrame | None, runs_by_cell: Mapping[tuple[str, str, str], list[Run]],
                mixed: bool = False, files: Sequence[str] = ()) -> str:
    """The paper comparison's section body; where the report has runs of the mixed setting (`mixed`), a pointer to
    the peers' tables (`_peers_pointer`, `files` the names of the report's files) beside it."""
    peers = _peers_pointer(files) if mixed else ""
    if table is None:
        return "<p>Not computed.</p>" + peers
    rows = table[table["paper"].notna()]
    if rows.empty and mixed:
        return peers
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
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>" + peers)


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
            '(cgcd.* beside): accuracy on All classes of a step\'s test images, on Old and New classes in the hard '
            'sense (the labelled step\'s classes vs the rest) and the soft one (classes seen before a step vs new '
            'in it), each the mean over the unlabelled steps, in %, mean ± std over seeds; F the forgetting of the '
            'labelled classes (their accuracy after the labelled step minus after the last); K error the mean '
            '|K given − K| over the unlabelled steps (0 where K is known).</p><table class="sortable filterable"><thead><tr>'
            + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table></section>" + _domain_section(frame))


def _tuning_section(frame: pd.DataFrame) -> str:
    """The tuning block (as `tuning.*`): each method as its authors tune it beside tuned by a bench study, and the
    gap. Empty without a run tuned by bench."""
    from bench.reporting.tuning import tuning_table

    table = tuning_table(frame)
    if table.empty:
        return ""
    body = "".join(f'<tr data-dataset="{e(str(row["dataset"]))}" data-method="{e(str(row["method"]))}">'
                   + "".join(f'<td class="{"oracle" if "ORACLE" in str(row[c]) else ""}">{e(str(row[c]))}</td>'
                             for c in table.columns) + "</tr>" for _, row in table.iterrows())
    return ('<section id="tuning"><h2>Tuned by bench beside the authors\' tuning</h2><p class="note">A (%) of each '
            'method with its preset\'s values and its authors\' selection (ORACLE ON TEST where that reads the test '
            'images), and with the best values of a bench tune study that never read them (its protocol and trial '
            'budget), mean [95% interval] over seeds; the gap over the seeds both ran.</p>'
            '<table class="sortable filterable"><thead><tr>'
            + "".join(f'<th scope="col"><button type="button">{e(str(h))}</button></th>' for h in table.columns)
            + f"</tr></thead><tbody>{body}</tbody></table></section>")


def _domain_section(frame: pd.DataFrame) -> str:
    """A domain-shifted stream's runs by domain (as `cgcd_domains.*`): each domain's accuracy after the last stage;
    each run's page holds its whole stage × domain matrix. Empty without a stream."""
    from bench.reporting.cgcd import domain_table

    table = domain_table(frame)
    if table.empty:
        return ""
    head = [str(c) for c in table.columns]
    body = "".join(f'<tr data-dataset="{e(str(row["dataset"]))}" data-method="{e(str(row["method"]))}">'
                   + "".join(f"<td>{e(str(row[c]))}</td>" for c in table.columns) + "</tr>"
                   for _, row in table.iterrows())
    return ('<section id="cgcd-domains"><h2>By domain</h2><p class="note">The domain-shifted streams\' runs: '
            'accuracy (%) after the last stage on each domain\'s test images of every class seen (a match of its '
            'own), mean ± std over seeds; a run\'s page shows it after every stage.</p>'
            '<table class="sortable filterable"><thead><tr>'
            + "".join(f'<th scope="col"><button type="button">{e(h)}</button></th>' for h in head)
            + f"</tr></thead><tbody>{body}</tbody></table></section>")


def _layout_table(title: str, scores: pd.DataFrame, layout: str, references: Sequence[str],
                  runs_by_cell: Mapping[tuple[str, str, str], list[Run]], correction: str = "holm") -> str:
    """One of the paper's tables (Tab. 2-5, the appendix's) in HTML: the layout's rows and headers, the
    best value per column in bold (dagger: not separable from the runner-up, the table's tests corrected
    with `correction`, as the text tables), each value a link to a run of its cell, a cell without a
    finished run saying why."""
    shape = shape_of(scores, layout, references)
    cells, tests = _cells(scores, references, correction)
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
                        text += '<sup title="not separable from the runner-up (corrected)">†</sup>'
                    tds.append(f'<td class="num">{text}</td>')
            body.append(f'<tr class="{"rule" if row.rule_above else ""}">' + "".join(tds) + "</tr>")
        body.append(f'<tr class="group-end"><td colspan="{n_head + 2 * len(datasets)}"></td></tr>')
    daggers = any(cell[3] for cell in cells.values())
    note = dagger_note(tests, correction, daggers)
    note = f'<p class="note">{"† " if daggers else ""}{e(note)}.</p>' if note else ""
    return (f'<h3 id="table-{e(_slug(title))}">{e(title)}</h3><table class="paper-table"><thead><tr>{top}</tr>'
            f"<tr>{second}</tr></thead><tbody>" + "".join(body[:-1]) + "</tbody></table>" + note)

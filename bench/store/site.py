"""`bench store site PATH`: the store's static leaderboard, in the look of `bench report`'s site (its style sheet and
script), opening from disk.

    index.html               per protocol (dataset, split, backbone): the measured methods ranked by their mean A
                             over seeds, each with its level, its seeds and a 95% interval; the published (claimed)
                             cells of that protocol beside them, never ranked; every refused entry with its reason
    methods/<slug>.html      per method: every number published or measured for it, side by side with its card (the
                             metric's definition, K, the epoch's selection, the seeds, who reported it), the card's
                             fields that differ between those numbers named above them

Every text that comes from an entry is escaped."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from bench.core.storage import write_atomic
from bench.reporting.site.build import ASSETS
from bench.reporting.site.html import _document, _num, _slug, e
from bench.store.claimed import CARD
from bench.store.verify import Verdict

LEVEL_ORDER = {"reproduced": 2, "recomputed": 1}


def _protocol(split: str) -> str:
    """A measured split label's protocol, as the claimed tables name it: `happy-5-stage · draw 0` → happy-5-stage."""
    return str(split).split(" · ")[0]


def _interval(values: Sequence[float]) -> str:
    """Mean and its 95% t-interval over seeds ("" for one seed: no interval)."""
    from scipy import stats

    values = [v for v in values if not math.isnan(v)]
    if len(values) < 2:
        return ""
    half = stats.t.ppf(0.975, len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return f"±{half:.1f}"


def measured_rows(verdicts: Iterable[Verdict]) -> pd.DataFrame:
    """One row per entry that recomputes: its protocol, method, seed, level and A, F (its reported rows)."""
    rows = []
    for v in verdicts:
        if v.checked is None or v.level is None:
            continue
        entry, summary = v.checked.entry, v.checked.summary
        value = {name: summary.get(tuple(str(source).split("/", 1)), float("nan"))  # type: ignore[arg-type]
                 for name, source in entry["reported"].items()}
        rows.append({"dataset": entry["dataset"], "split": entry["split"], "protocol": _protocol(entry["split"]),
                     "backbone": entry["backbone"], "label": entry["label"], "seed": entry["seed"], "level": v.level,
                     "A": value.get("A", float("nan")), "F": value.get("F", float("nan")), "path": v.path,
                     "selection": entry["card"].get("selection", ""), "k": entry["card"].get("k", ""),
                     "on_test": entry["card"].get("selection_on_test", False)})
    return pd.DataFrame(rows, columns=["dataset", "split", "protocol", "backbone", "label", "seed", "level", "A", "F",
                                       "path", "selection", "k", "on_test"])


def claimed_rows(verdicts: Iterable[Verdict]) -> pd.DataFrame:
    frames = [v.claims.assign(file=v.path) for v in verdicts if v.claims is not None and v.level == "claimed"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["label", "file"])


def _ranked(part: pd.DataFrame) -> str:
    grouped = []
    for label, runs in part.groupby("label", sort=False):
        level = max(runs["level"], key=lambda lv: LEVEL_ORDER.get(lv, 0))
        grouped.append((float(np.nanmean(runs["A"])) if runs["A"].notna().any() else float("nan"), label, runs, level))
    grouped.sort(key=lambda g: (math.isnan(g[0]), -g[0] if not math.isnan(g[0]) else 0))
    body = "".join(
        f'<tr><td>{rank}</td><td class="label"><a href="methods/{_slug(label)}.html">{e(label)}</a>'
        + (' <span class="st st-failed" title="selected on the test set">oracle on test</span>' if runs["on_test"].any() else "")
        + f'</td><td><span class="st st-done">{e(level)}</span></td><td>{len(runs)}</td>'
        f"<td>{_num(mean)} {e(_interval(list(runs['A'])))}</td><td>{_num(float(np.nanmean(runs['F'])) if runs['F'].notna().any() else None)}</td>"
        f"<td>{e(runs['k'].iloc[0])}</td><td>{e(runs['selection'].iloc[0])}</td></tr>"
        for rank, (mean, label, runs, level) in enumerate(grouped, 1))
    return ("<table><thead><tr><th>rank</th><th>method</th><th>level</th><th>seeds</th><th>A (95% interval over seeds)"
            "</th><th>F</th><th>K</th><th>selection</th></tr></thead><tbody>" + body + "</tbody></table>")


def _claimed_table(part: pd.DataFrame, columns: Sequence[str]) -> str:
    head = "".join(f"<th>{e(c)}</th>" for c in ["label", "value", *columns, "paper", "table", "row", "column"])
    body = "".join("<tr>" + "".join(f"<td>{e(r[c])}</td>" for c in ["label", "value", *columns, "paper", "table",
                                                                     "row", "column"]) + "</tr>"
                   for _, r in part.iterrows())
    return f'<table class="claimed"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _headline(claims: pd.DataFrame) -> pd.DataFrame:
    """The claimed cells a leaderboard sets beside its ranks: each table's summary A or All, and the last stage's All."""
    if claims.empty or "metric" not in claims:
        return claims
    summary = (claims["step"] == "summary") & claims["metric"].isin(["A", "All"])
    last = claims["step"].str.isdigit() & (claims["group"] == "all") & (
        claims["step"].map(lambda s: int(s) if str(s).isdigit() else -1)
        == claims["stages"].map(lambda s: int(s) - 1 if str(s).isdigit() else -2))
    return claims[summary | last]


def index_page(measured: pd.DataFrame, claims: pd.DataFrame, refused: list[Verdict], title: str) -> str:
    headline = _headline(claims)
    keys = list(dict.fromkeys([*measured[["dataset", "protocol", "backbone"]].itertuples(index=False, name=None),
                               *(headline[["dataset", "split", "backbone"]].itertuples(index=False, name=None)
                                 if not headline.empty else [])]))
    sections = []
    for dataset, protocol, backbone in keys:
        if not dataset or not protocol:
            continue
        mine = measured[(measured["dataset"] == dataset) & (measured["protocol"] == protocol)
                        & (measured["backbone"] == backbone)]
        cells = headline[(headline["dataset"] == dataset) & (headline["split"] == protocol)
                         & (headline["backbone"] == backbone)] if not headline.empty else headline
        parts = [f'<h2 id="{_slug(f"{dataset}-{protocol}-{backbone}")}">{e(dataset)} · {e(protocol)} · {e(backbone)}</h2>']
        for split, runs in mine.groupby("split", sort=False):
            parts.append(f"<h3>measured: {e(split)}</h3>" + _ranked(runs))
        if mine.empty:
            parts.append('<p class="note">no entry of the store measured this protocol yet</p>')
        if not cells.empty:
            parts.append("<h3>claimed (published numbers, not ranked)</h3>"
                         + _claimed_table(cells, ["metric_definition", "k", "selection", "selection_on_test", "seeds",
                                                  "reported_by"]))
        sections.append("".join(parts))
    refusals = ("<h2>refused</h2><ul>" + "".join(f"<li><code>{e(v.path)}</code>: {e(v.why)}</li>" for v in refused)
                + "</ul>") if refused else ""
    intro = (f"<h1>{e(title)}</h1><p class=\"note\">A measured number counts when bench recomputed it from the "
             "entry's stored predictions (<b>recomputed</b>), or when another results folder's run of the same spec and "
             "code agrees with it (<b>reproduced</b>). Published numbers are <b>claimed</b>: shown beside, never "
             f"ranked. {len(measured)} measured entries, {len(claims)} claimed cells.</p>")
    return _document(title, intro + "".join(sections) + refusals)


def method_page(label: str, measured: pd.DataFrame, claims: pd.DataFrame) -> str:
    mine = claims[claims["label"] == label] if not claims.empty else claims
    parts = [f'<p class="crumbs"><a href="../index.html">store</a> / {e(label)}</p><h1>{e(label)}</h1>']
    for dataset in dict.fromkeys([*mine.get("dataset", []), *measured.loc[measured["label"] == label, "dataset"]]):
        cells = mine[mine["dataset"] == dataset] if not mine.empty else mine
        runs = measured[(measured["label"] == label) & (measured["dataset"] == dataset)]
        parts.append(f"<h2>{e(dataset or 'a dataset bench does not have')}</h2>")
        head = _headline(cells) if not cells.empty else cells
        if not head.empty:
            differs = [c for c in ["metric_definition", "split", "k", *CARD[1:]] if head[c].nunique() > 1]
            parts.append(f'<p class="note">{len(head)} published number(s), from {e(head["value"].min())} to '
                         f'{e(head["value"].max())}' + (f"; what differs between them: {e(', '.join(differs))}"
                                                         if differs else "") + "</p>")
            parts.append(_claimed_table(head, ["split", "metric_definition", "k", "selection", "selection_on_test",
                                               "seeds", "reported_by"]))
        if not runs.empty:
            parts.append("<h3>measured in this store</h3><table><thead><tr><th>split</th><th>seed</th><th>level</th>"
                         "<th>A</th><th>F</th><th>selection</th><th>entry</th></tr></thead><tbody>" + "".join(
                             f"<tr><td>{e(r.split)}</td><td>{e(r.seed)}</td><td>{e(r.level)}</td><td>{_num(r.A)}</td>"
                             f"<td>{_num(r.F)}</td><td>{e(r.selection)}</td><td><code>{e(r.path)}</code></td></tr>"
                             for r in runs.itertuples()) + "</tbody></table>")
    return _document(f"{label} · bench results store", "".join(parts), root="../")


def write_store_site(verdicts: Sequence[Verdict], out: Path, title: str = "bench results store") -> Path:
    """The leaderboard of the verified store (`bench.store.verify.verify_store`'s verdicts) under `out`."""
    out = Path(out)
    (out / "methods").mkdir(parents=True, exist_ok=True)
    measured, claims = measured_rows(verdicts), claimed_rows(verdicts)
    refused = [v for v in verdicts if v.level is None]
    write_atomic(out / "index.html", index_page(measured, claims, refused, title))
    labels: dict[str, Any] = defaultdict(int)
    for label in [*measured["label"], *(claims["label"] if not claims.empty else [])]:
        labels[label] += 1
    for label in labels:
        if label:
            write_atomic(out / "methods" / f"{_slug(label)}.html", method_page(label, measured, claims))
    for name in ("site.css", "site.js"):
        write_atomic(out / name, (ASSETS / name).read_text())
    return out / "index.html"

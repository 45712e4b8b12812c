"""`bench report --compare happy|promptccd|vb-cgcd`: a mixed-setting peer's published main tables
(`results/paper/peer_<name>_*.csv`, one published cell a row with the paper, table, row and column it was read
from and its source) beside the cells bench measured on the same protocol.

A published cell is set beside a measured one where its file names bench's cell: the dataset, the split
(the protocol), the method label, the backbone, K known or estimated, the evaluation (inductive, or PromptCCD's
transductive one) and the metric row (step, group, flavour, metric of `metrics.parquet`, `bench.protocol.mixed`).
A cell whose protocol bench lacks (no dataset or split in its file: Caltech-101, Happy's 10 steps, a metric
bench does not compute, VB-CGCD's ImageNet-100 and CUB, which are not Happy's) is kept as reference only, and says
so. Each configuration of a protocol that ran (a draw, Happy's arrival order) is a measured row of its own, never
averaged with another.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
from tabulate import tabulate

from bench.core.resources import resource_dir
from bench.errors import BenchError, did_you_mean

PAPER_DIR = resource_dir("paper")
PEERS = {"happy": "Happy (Ma et al., NeurIPS 2024)", "promptccd": "PromptCCD (Cendra et al., ECCV 2024)",
         "vb-cgcd": "VB-CGCD (Dai and Chauhan, ICML 2025)"}
SHORT = {"happy": "Happy", "promptccd": "PromptCCD", "vb-cgcd": "VB-CGCD"}
# a peer with no stored table: what is missing, said instead of an empty report (none now: each peer has its tables)
MISSING: dict[str, str] = {}
CITATION = ["peer", "paper", "table", "row", "column", "source"]
KEY = ["label", "dataset", "split", "backbone", "k", "evaluation", "step", "group", "flavour", "metric"]
COLUMNS = [*CITATION[:5], "value", *KEY, "source", "note"]  # a peer file's columns, in its order
FLAVOURS = ("cgcd", "cgcd_hard", "cgcd_soft")


def peer_name(compare: Sequence[str] | None) -> str | None:
    """The peer a one-word `--compare` names (one name alone is the peer's tables, though `happy`, `promptccd` and
    `vb-cgcd` are methods' slugs too: two names are two methods); None for `paper` or two names; a BenchError
    naming the valid choices for any other single word, or saying what is missing for a peer without a stored
    table (before anything of the report is written)."""
    if not compare or len(compare) != 1 or compare[0].lower() == "paper":
        return None
    name = compare[0].lower()
    if name not in PEERS:
        raise BenchError(f"--compare takes paper, a peer's tables (one name alone: {', '.join(PEERS)}) or two "
                         f"methods; got {compare[0]!r}{did_you_mean(name, ['paper', *PEERS])}")
    if not any(Path(PAPER_DIR).glob(f"peer_{name}_*.csv")):
        raise BenchError(MISSING.get(name, f"no published table of {name} under {PAPER_DIR}")
                         + f"; `--compare {name}` alone names {SHORT[name]}'s published tables: to compare the "
                         f"method {SHORT[name]} with another, name both (`--compare {name} k-means`)")
    return name


def peer_reference(name: str, paper_dir: Path | None = None) -> pd.DataFrame:
    """Every published cell of the peer's stored tables (value as a float, the other columns as text: an
    empty one is a cell bench has no name for); `paper_dir`: default results/paper/."""
    paper_dir = PAPER_DIR if paper_dir is None else paper_dir
    files = sorted(Path(paper_dir).glob(f"peer_{name}_*.csv"))
    if not files:
        raise BenchError(MISSING.get(name, f"no published table of {name} under {paper_dir}"))
    table = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files], ignore_index=True)
    missing = [c for c in COLUMNS if c not in table]
    if missing:
        raise BenchError(f"{', '.join(f.name for f in files)}: no column {', '.join(missing)}")
    return table.assign(value=table["value"].astype(float))


def mapped(reference: pd.DataFrame) -> pd.Series:
    """Whether each published cell names a cell bench measures (dataset, split and metric row)."""
    return (reference["dataset"] != "") & (reference["split"] != "") & (reference["group"] != "")


def split_parts(split: str) -> tuple[str, str, str]:
    """(protocol, K, evaluation) of a mixed run's split label (`bench.splits.settings.describe`):
    `happy-5-stage · draw 0 · K silhouette · transductive` → (happy-5-stage, silhouette, transductive)."""
    parts = str(split).split(" · ")
    k = next((p[2:] for p in parts[1:] if p.startswith("K ")), "known")
    return parts[0], k, "transductive" if "transductive" in parts[1:] else "inductive"


def measured_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and count over seeds of every mixed-setting metric row of the frame, keyed as the peers'
    files are (`KEY`), with the run's split label as `measured_split` (one row per configuration)."""
    rows = frame[frame["flavour"].astype(str).isin(FLAVOURS)]
    if rows.empty:
        return pd.DataFrame(columns=[*KEY, "measured_split", "mean", "std", "n"])
    rows = rows.assign(measured_split=rows["split"].astype(str), label=rows["label"].astype(str),
                       dataset=rows["dataset"].astype(str), backbone=rows["backbone"].astype(str),
                       group=rows["group"].astype(str), flavour=rows["flavour"].astype(str))
    parts = rows["measured_split"].map(split_parts)
    rows = rows.assign(split=parts.str[0], k=parts.str[1], evaluation=parts.str[2],
                       step=rows["step"].astype(int).astype(str).where(rows["group"] != "summary", "summary"))
    stats = rows.groupby([*KEY, "measured_split"], observed=True)["value"].agg(["mean", "std", "count"])
    return stats.rename(columns={"count": "n"}).reset_index()


# Happy's runs (its README's commands, its logs) draw its own images (`setting.draw=happy`) and take its classes in
# its shuffled order: the arrival its code gives each of its protocols (`bench.splits.settings`)
HAPPY_ARRIVAL = {"happy-5-stage": "happy", "happy-cub-5-stage": "happy-ssb", "happy-in100-5-stage": "happy",
                 "happy-10-stage": "happy", "happy-cub-10-stage": "happy-ssb", "happy-in100-10-stage": "happy"}


# the rows of VB-CGCD's Table 2 that are Happy's Table 1 rows, copied (tests/test_peer_tables.py checks them equal):
# Happy's runs, judged by Happy's rule on every split
COPIED_FROM_HAPPY = {"vb-cgcd": ("GM", "MetaGCD")}


def departures(name: str, measured_split: str, label: str = "") -> list[str]:
    """What of the peer's own runs a measured configuration on one of its protocols did not replay (from its split
    label, `bench.splits.settings.describe`): for Happy, its draw of the images and its order of the classes; for
    VB-CGCD, its class order on `happy-5-stage` (the class order: its draw is its own, which bench does not replay),
    and Happy's on the other splits and for its `COPIED_FROM_HAPPY` rows (those cells are Happy's Table 1's, copied;
    `label`: the published row's method). Such a cell is still
    set beside the published one, and marked."""
    if not measured_split:
        return []
    parts = str(measured_split).split(" · ")
    if name == "vb-cgcd":
        if parts[0] != "happy-5-stage" or label in COPIED_FROM_HAPPY["vb-cgcd"]:
            return departures("happy", measured_split)
        return ["its classes in another order than VB-CGCD's, the class order (setting.arrival=canonical)"] \
            if any(p.startswith("arrival ") for p in parts[1:]) else []
    if name != "happy":
        return []
    said = []
    if "Happy's draw" not in parts:
        said.append("bench's draw, not Happy's images (setting.draw=happy)")
    arrival = HAPPY_ARRIVAL.get(parts[0])
    if arrival and f"arrival {arrival}" not in parts:
        said.append(f"its classes in another order than Happy's (setting.arrival={arrival})")
    return said


def compare_peer(name: str, frame: pd.DataFrame, paper_dir: Path | None = None) -> pd.DataFrame:
    """Every published cell of the peer, beside each measured configuration of its cell (none: measured
    empty), with the difference measured − published and a `status`: `no bench protocol` (reference only),
    `not run` (bench has the protocol, this report has no run of the cell) or empty (measured)."""
    reference = peer_reference(name, paper_dir)
    reference = reference.assign(mapped=mapped(reference), order=range(len(reference)))
    measured = measured_cells(frame)
    table = reference.merge(measured, on=KEY, how="left").sort_values("order", kind="stable")
    table.loc[~table["mapped"], ["measured_split", "mean", "std", "n"]] = None
    table["diff"] = table["mean"] - table["value"]
    table["status"] = ["no bench protocol" if not m else "" if pd.notna(v) else "not run"
                       for m, v in zip(table["mapped"], table["mean"])]
    table["departs"] = ["; ".join(departures(name, split, label)) if pd.notna(v) else ""
                        for split, label, v in zip(table["measured_split"], table["label"], table["mean"])]
    return table.drop(columns=["order"]).reset_index(drop=True)


PROTOCOL = ["dataset", "split", "backbone", "k", "evaluation"]  # what a run ran, of `KEY`
SAID = {"dataset": "dataset", "split": "split", "backbone": "backbone", "k": "K", "evaluation": "evaluation"}


def left_out(name: str, frame: pd.DataFrame, paper_dir: Path | None = None) -> list[str]:
    """Why each measured configuration of the frame is beside no published cell of the peer, one line each: the
    fields of its protocol (`PROTOCOL`: dataset, split, backbone, K, evaluation) that differ from the nearest protocol
    of the peer's tables, with the tables' values; or, on a protocol of the tables, the methods they have no row of."""
    reference = peer_reference(name, paper_dir)
    published = reference[mapped(reference)]
    protocols = list(dict.fromkeys(published[PROTOCOL].itertuples(index=False, name=None)))
    methods = published.groupby(PROTOCOL)["label"].agg(lambda labels: set(labels)).to_dict()
    measured = measured_cells(frame)
    lines = []
    for (split, *ran), part in measured.groupby(["measured_split", *PROTOCOL], sort=False):
        ran_on, labels = tuple(ran), list(dict.fromkeys(part["label"]))
        where = f"{ran_on[0]} · {split} on {ran_on[2]} ({', '.join(labels)})"
        if ran_on in methods:
            missing = [label for label in labels if label not in methods[ran_on]]
            if missing:
                lines.append(f"{', '.join(missing)} on {ran_on[0]} · {split} on {ran_on[2]}: no row of "
                             f"{SHORT.get(name, name)}'s tables (their methods: {', '.join(sorted(methods[ran_on]))})")
            continue
        if not protocols:
            lines.append(f"{where}: {SHORT.get(name, name)}'s tables name no protocol bench has")
            continue
        differing = [[f for f, mine, theirs in zip(PROTOCOL, ran_on, p) if mine != theirs] for p in protocols]
        fewest = min(map(len, differing))
        nearest = [p for p, d in zip(protocols, differing) if len(d) == fewest]
        fields = [f for i, f in enumerate(PROTOCOL) if any(p[i] != ran_on[i] for p in nearest)]
        said = [f"{SAID[f]} {ran_on[PROTOCOL.index(f)]} (the tables': "
                f"{', '.join(dict.fromkeys(p[PROTOCOL.index(f)] for p in nearest))})" for f in fields]
        lines.append(f"{where}: beside no published cell: its {', '.join(said)}")
    return lines


def cite(row: dict) -> str:
    return f"{SHORT.get(row['peer'], row['peer'])} {row['table'].replace('Table', 'Tab.')}"


def _cell(row: dict) -> str:
    if row["status"] == "no bench protocol":
        return "no bench protocol" + (f" ({row['note']})" if row["note"] else "")
    step = "" if row["step"] in ("summary", "") else f"step {row['step']} "
    what = row["metric"] if row["group"] == "summary" else f"{row['group']}" + (
        f" ({row['flavour'].split('_')[1]})" if "_" in row["flavour"] else "")
    return f"{row['dataset']} · {row['split']} · {step}{what}"


def render_peer(table: pd.DataFrame, fmt: str) -> str:
    """The comparison as csv, or per published table a section (markdown) or a booktabs tabular (LaTeX):
    one row per published cell and measured configuration, its source cited in every row and under the section."""
    if fmt == "csv":
        return table.drop(columns=["mapped"]).to_csv(index=False, float_format="%.4f")
    headers = ("method (as printed)", "published cell", "published", "source", "bench cell", "measured", "Δ")
    out = []
    for (paper, number), part in table.groupby(["paper", "table"], sort=False):
        rows = []
        for r in part.to_dict("records"):
            measured = ("--" if pd.isna(r["mean"]) else f"{r['measured_split']}: {r['mean']:.2f}"
                        + ("" if pd.isna(r["std"]) else f" ± {r['std']:.2f}") + f" (n={int(r['n'])})"
                       + (f" [not {SHORT.get(r['peer'], r['peer'])}'s run: {r['departs']}]" if r["departs"] else ""))
            rows.append((r["row"], r["column"], f"{r['value']:.2f}", cite(r), _cell(r),
                         r["status"] or measured, "--" if pd.isna(r["diff"]) else f"{r['diff']:+.2f}"))
        sources = "; ".join(dict.fromkeys(part["source"]))
        text = tabulate(rows, headers=headers, tablefmt="latex_booktabs" if fmt == "latex" else "github",
                        disable_numparse=True)
        if fmt == "latex":
            from bench.reporting.table import escape_latex

            out.append(f"% {paper}, {number}. Source: {sources}\n\\paragraph{{{escape_latex(paper)}, "
                       f"{escape_latex(number)}}} Source: {escape_latex(sources)}.\n\n{text}\n")
        else:
            out.append(f"## {paper}, {number}\n\nSource: {sources}.\n\n{text}\n")
    return "\n".join(out)


def summary_line(name: str, table: pd.DataFrame) -> str:
    """What the comparison holds, and what is missing when no cell has a measurement."""
    n, ref = len(table), int((table["status"] == "no bench protocol").sum())
    done = int((table["status"] == "").sum())
    line = f"--compare {name}: {n} rows, {done} beside a measured cell, {ref} reference only (no bench protocol)"
    departing = int((table["departs"] != "").sum()) if "departs" in table else 0
    if departing:
        line += (f"; {departing} of the measured cells are not {SHORT.get(name, name)}'s own run of the protocol, "
                 f"marked [not {SHORT.get(name, name)}'s run: ...] (`bench run --grid {name}-tables` runs them as it did)")
    if not done:
        wanted = sorted({f"{d}/{s}" for d, s in zip(table["dataset"], table["split"]) if d and s})
        line += (f"; no run of this report is on a protocol of {SHORT[name]}'s tables ({', '.join(wanted)}, with "
                 f"the tables' backbone, K and evaluation): every measured cell is empty. Run the mixed grid "
                 f"(`bench run --grid cgcd`) or its splits")
    return line


def write_peer_compare(name: str, frame: pd.DataFrame, formats: Sequence[str], out: Path,
                       suffix: dict[str, str]) -> list[Path]:
    """`compare_<name>.<ext>` in each text format; says on stderr what it holds (and what is missing)."""
    import sys

    from bench.core.storage import write_atomic

    table, left = compare_peer(name, frame), left_out(name, frame)
    paths = []
    for fmt in formats:
        paths.append(Path(out) / f"compare_{name}.{suffix[fmt]}")
        text = render_peer(table, fmt)
        if fmt == "markdown" and left:  # what the report ran that no published cell is beside, and why
            text += "\n## Measured, beside no published cell\n\n" + "".join(f"- {line}\n" for line in left)
        write_atomic(paths[-1], text)
    print(f"bench: {summary_line(name, table)}" + ("" if paths else f"; compare_{name} is written in latex, "
          "markdown or csv (--format), the html site does not show it"), file=sys.stderr)
    for line in left:
        print(f"bench: --compare {name} leaves out {line}", file=sys.stderr)
    return paths

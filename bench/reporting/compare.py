"""`bench report --compare paper`: the paper's numbers (results/paper/*.csv) beside the measured ones; `--compare A B`:
the paired difference of two methods of the report (`paired_table`, `compare_methods`).

What `--compare` names is read here (`compare_request`), before anything of the report is read: `paper`; one name
alone, a mixed-setting peer's published tables (`happy`, `promptccd`, `vb-cgcd`: these are also methods' slugs, and
one name alone is always the peer's tables); two names, two methods of the report, each as `--methods` takes it
(a name or slug, `:preset`) or as the tables label it (`EwC [equations]`, `Baseline++ · pixels`). Which row of the
report each of the two means is settled once the runs are loaded, before anything is written (`paired_labels`)."""
from __future__ import annotations

from pathlib import Path
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
from tabulate import tabulate

from bench.core.resources import resource_dir
from bench.errors import BenchError, did_you_mean
from bench.config.spec import DEFAULT_PRESET, method_label
from bench.reporting.layouts import ABLATION_ROWS, PAPER_CSV_BACKBONES
from bench.reporting.table import source_text

DATASETS = {"C10": "cifar10", "C100": "cifar100", "T200": "tinyimagenet", "B200": "cub200", "H683": "herbarium19"}
METHODS = {"Kmeans": "K-means"}
PAPER_DIR = resource_dir("paper")


def paper_reference(paper_dir: Path = PAPER_DIR, default_backbone: str = "dino-vitb16") -> pd.DataFrame:
    """One row per (split, dataset, label, backbone, metric) the paper reports: A and F in %."""
    frames = []
    for name in ("table2_reference_methods.csv", "table5_sota_comparison.csv", "appendix_table_cassle.csv"):
        t = pd.read_csv(paper_dir / name)
        frames.append(t.assign(label=t["method"].replace(METHODS), backbone=default_backbone))
    rows = {f"({chr(ord('a') + i)})": method_label(*row) for i, row in enumerate(ABLATION_ROWS)}
    t3 = pd.read_csv(paper_dir / "table3_self_ablation.csv")
    frames.append(t3.assign(label=t3["row"].map(rows), backbone=default_backbone))
    t4 = pd.read_csv(paper_dir / "table4_backbone_ablation.csv")
    frames.append(t4.assign(label=t4["method"], backbone=t4["backbone"].map(PAPER_CSV_BACKBONES)))
    ref = pd.concat(frames, ignore_index=True)
    ref["dataset"] = ref["dataset"].map(DATASETS)
    ref = ref.melt(id_vars=["split", "dataset", "label", "backbone"], value_vars=["forgetting", "accuracy"],
                   var_name="metric", value_name="paper")
    ref["metric"] = ref["metric"].map({"forgetting": "F", "accuracy": "A"})
    return ref.drop_duplicates(["split", "dataset", "label", "backbone", "metric"]).reset_index(drop=True)


def compare(scores: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Measured mean ± std beside the paper's value and the difference (measured − paper)."""
    merged = scores.assign(split=scores["split"].astype(str), dataset=scores["dataset"].astype(str),
                           label=scores["label"].astype(str)).merge(
        reference, on=["split", "dataset", "label", "backbone", "metric"], how="left")
    merged["diff"] = merged["mean"] - merged["paper"]
    protocol = [c for c in ("source", "features") if c in merged]  # the paper: W/O (K-means' A: W), fresh views
    return merged[["split", "dataset", "label", "backbone", "metric", "mean", "std", "n", "paper", "diff", *protocol]]


def render_compare(table: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        return table.to_csv(index=False, float_format="%.4f")
    rows = []
    for r in table.to_dict("records"):
        measured = f"{r['mean']:.1f}" + ("" if pd.isna(r["std"]) else f" ± {r['std']:.1f}")
        paper = "--" if pd.isna(r["paper"]) else f"{r['paper']:.1f}"
        diff = "--" if pd.isna(r["diff"]) else f"{r['diff']:+.1f}"
        flavour = source_text(r["source"]) if isinstance(r.get("source"), str) else "--"
        rows.append((r["split"], r["dataset"], r["label"], r["backbone"], r["metric"], measured, paper, diff, flavour,
                     r.get("features", "--")))
    # the paper's cells are task-agnostic (K-means' A: one match) with fresh views every epoch:
    # a bank-mode cell is not that protocol, and says so
    headers = ("split", "dataset", "method", "backbone", "metric", "measured", "paper", "Δ", "flavour", "features")
    return tabulate(rows, headers=headers, tablefmt="latex_booktabs" if fmt == "latex" else "github",
                    disable_numparse=True) + "\n"


TAKES = "--compare takes paper, a peer's tables (one name alone: happy, promptccd or vb-cgcd) or two methods"


@dataclass(frozen=True)
class Named:
    """One of the two names of `--compare A B`, as given, with the registered method and preset it names (None for a
    name that is no registered method's: the label of a method no longer registered, matched as written)."""

    given: str
    method: str | None = None
    preset: str = DEFAULT_PRESET


def compare_request(compare: Sequence[str] | None) -> tuple[str | None, tuple[Named, ...]]:
    """(the peer whose tables `--compare` names, the two methods it names): (None, ()) for none or `paper`; a
    BenchError, before anything is read, for a single name that is neither paper nor a peer, or another count."""
    from bench.reporting.peers import PEERS, peer_name

    names = tuple(compare or ())
    if len(names) == 1:
        if names[0].lower() not in ("paper", *PEERS) and _method_of(names[0]).method is not None:
            raise BenchError(f"{TAKES}; got the one method {names[0]!r}: name another to compare it with "
                             f"(`--compare {names[0]} k-means`)")
        return peer_name(names), ()
    if len(names) > 2 or (names and len({n.lower() for n in names}) < 2):
        raise BenchError(f"{TAKES} (two different ones); got {' '.join(names)}")
    return None, tuple(_method_of(n) for n in names)


def _method_of(given: str) -> Named:
    """`baseline-pp`, `Baseline++`, `ewc:equations`, `EwC [equations]`, `Baseline++ · pixels`: the method and
    preset named (a label's ` · ...` is matched as written, `paired_labels`)."""
    from bench.config.spec import method_slugs, split_method

    base = given.split(" · ")[0].strip()
    if base.endswith("]") and " [" in base:  # a label: `EwC [equations]`
        name, preset = base[:-1].split(" [", 1)
    else:
        name, preset = split_method(base)
    slugs = method_slugs()
    method = name if name in slugs.values() else slugs.get(name.lower())
    return Named(given, method, preset)


def paired_labels(frame: pd.DataFrame, names: Sequence[Named]) -> tuple[str, str]:
    """The report's row label each of `--compare A B`'s names means: the label as written, or the one row of the
    method and preset it names; a BenchError naming the report's labels when one means none or several."""
    labels = list(dict.fromkeys(frame["label"].astype(str)))
    found = []
    for named in names:
        rows = [named.given] if named.given in labels else [] if named.method is None else [
            label for label in labels if label.split(" · ")[0] == method_label(named.method, named.preset)]
        if len(rows) != 1:
            what = (f"names {len(rows)} rows of the report ({', '.join(rows)}): give one of them as written" if rows
                    else f"is no row of the report{did_you_mean(named.given, labels)}")
            raise BenchError(f"--compare {named.given!r} {what}; its rows: {', '.join(labels)} (each also by its "
                             f"method's slug, `--compare baseline-pp k-means`, where it is the method's only row)")
        found.append(rows[0])
    if found[0] == found[1]:
        raise BenchError(f"--compare {names[0].given!r} and {names[1].given!r} name one row, {found[0]}: name two")
    return found[0], found[1]


def paired_table(frame: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """A − B per cell over the seeds both ran (`--compare A B`, as `paired_labels` named them), or a BenchError
    naming the labels."""
    from bench.reporting.aggregate import seed_values
    from bench.reporting.stats import paired_differences

    values = seed_values(frame)
    known = list(dict.fromkeys(values["label"]))
    if len(labels) != 2 or any(label not in known for label in labels):
        raise BenchError(f"{TAKES}; got {' '.join(labels)}; labels: {', '.join(known)}")
    return paired_differences(values, *labels)


def compare_methods(frame: pd.DataFrame, labels: Sequence[str], out: Path, suffix: str) -> Path:
    """`bench report --compare A B`: A − B per cell over the seeds both ran, with its 95% CI."""
    from bench.core.storage import write_atomic

    first, second = labels
    table = paired_table(frame, labels)
    path = out / f"compare_{first}_vs_{second}.{suffix}".replace(" ", "_").replace("/", "_")
    if suffix == "csv":
        write_atomic(path, table.to_csv(index=False, float_format="%.4f"))
    else:
        rows = [(r.split, r.dataset, r.metric, r.n, f"{r.diff:+.1f}",
                 "--" if r.n < 2 else f"{r.ci_low:+.1f} … {r.ci_high:+.1f}",
                 "yes" if r.beyond_noise else "no") for r in table.itertuples()]
        text = tabulate(rows, headers=("split", "dataset", "metric", "shared seeds", f"{first} − {second}", "95% CI",
                                       "beyond noise"), tablefmt="latex_booktabs" if suffix == "tex" else "github",
                        disable_numparse=True)
        write_atomic(path, text + "\n")
        print(text)
    return path


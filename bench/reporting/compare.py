"""`bench report --compare paper`: the paper's numbers (results/paper/*.csv) beside the measured ones; `--compare A B`:
the paired difference of two methods of the report (`paired_table`, `compare_methods`)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
from tabulate import tabulate

from bench.core.resources import resource_dir
from bench.errors import BenchError
from bench.config.spec import method_label
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


def paired_table(frame: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """A − B per cell over the seeds both ran (`--compare A B`), or a BenchError naming the labels."""
    from bench.reporting.aggregate import seed_values
    from bench.reporting.stats import paired_differences

    values = seed_values(frame)
    known = list(dict.fromkeys(values["label"]))
    if len(labels) != 2 or any(label not in known for label in labels):
        raise BenchError(f"--compare takes `paper`, a peer (happy, promptccd, vb-cgcd) or two method labels of the "
                         f"report; got {' '.join(labels)}; "
                         f"labels: {', '.join(known)}")
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


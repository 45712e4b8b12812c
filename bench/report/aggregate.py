"""From the long per-step table to per-(split, dataset, method) scores: mean, std and seed count."""
from __future__ import annotations

import re
from typing import Mapping, Sequence

import pandas as pd

KEYS = ["split", "dataset", "label"]


def _split_order(splits: Sequence[str]) -> list[str]:
    """'2-step' < '5-step' < '10-step' (numeric, not lexicographic)."""
    def key(name: str) -> tuple[int, str]:
        m = re.match(r"(\d+)", name)
        return (int(m.group(1)) if m else 10**9, name)
    return sorted(dict.fromkeys(splits), key=key)


def _categorical(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None) -> pd.DataFrame:
    order = dict(order or {})
    frame = frame.copy()
    for column in KEYS:
        present = list(dict.fromkeys(frame[column]))
        wanted = _split_order(present) if column == "split" and column not in order else list(order.get(column, present))
        categories = [c for c in wanted if c in present] + [c for c in present if c not in wanted]
        frame[column] = pd.Categorical(frame[column], categories=categories, ordered=True)
    return frame


def backbone_label(label: str, backbone: str, default_backbone: str) -> str:
    """Runs of another backbone than the grid's default (Tab. 4) get a label of their own, so that
    they are never averaged with the default backbone's runs of the same method."""
    return label if backbone == default_backbone else f"{label} · {backbone}"


def final_scores(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """A and F of every (split, dataset, method label): the `summary` rows in each method's primary
    flavour, averaged over seeds. Columns: split, dataset, label, metric, mean, std (NaN for one
    seed), n (seeds)."""
    rows = frame[(frame["group"] == "summary") & (frame["flavour"] == frame["primary_flavour"])
                 & frame["metric"].isin(["A", "F"])]
    rows = _categorical(rows, order)
    # what a label stands for, kept for the tables' row headers (Tab. 3's marks, Tab. 4's backbones)
    identity = {c: (c, "first") for c in ("backbone", "method", "preset") if c in rows}
    out = (rows.groupby(KEYS + ["metric"], observed=True)
           .agg(mean=("value", "mean"), std=("value", lambda v: v.std(ddof=1)), n=("value", "count"),
                **identity).reset_index())
    return out.sort_values(KEYS + ["metric"]).reset_index(drop=True)


def step_curves(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Accuracy on all classes seen so far (`all`/`acc`, primary flavour) after every step, over seeds."""
    rows = frame[(frame["group"] == "all") & (frame["metric"] == "acc") & (frame["flavour"] == frame["primary_flavour"])]
    rows = _categorical(rows, order)
    out = (rows.groupby(KEYS + ["step"], observed=True)["value"]
           .agg(mean="mean", std=lambda v: v.std(ddof=1), n="count").reset_index())
    return out.sort_values(KEYS + ["step"]).reset_index(drop=True)

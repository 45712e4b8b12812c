"""From the long per-step table to per-(split, dataset, method) scores: mean, std and seed count."""
from __future__ import annotations

import re
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from bench.reporting.stats import ci95_half_width

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


# What a row of a table is besides its label: runs of one (label, dataset, split, backbone) that also
# share their configuration, so that only their seeds differ.
CELL = ["label", "dataset", "split", "backbone"]
UNSET = "<unset>"  # a key one configuration has and another lacks


def flat_config(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"method": {"epochs": 3}}` → `{"method.epochs": 3}`: keys as `--cfg-options` names them."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            flat.update(flat_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _value_text(value: Any) -> str:
    """A value as `--cfg-options` takes it back: strings bare, everything else as a Python literal."""
    return value if isinstance(value, str) else repr(value)


def distinguishing_keys(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fewest flat keys whose values tell `configs` (distinct flat configurations) apart: labels
    stay short when one change (method.epochs) drags others along. Subsets of up to three keys are
    tried, smallest first and in key order; past that, every key that differs."""
    union = sorted({k for c in configs for k in c})
    differing = [k for k in union if len({repr(c.get(k, UNSET)) for c in configs}) > 1]
    for size in range(1, min(len(differing), 3) + 1):
        for keys in combinations(differing, size):
            if len({tuple(repr(c.get(k, UNSET)) for k in keys) for c in configs}) == len(configs):
                return list(keys)
    return differing


def config_labels(frame: pd.DataFrame, configs: Mapping[str, Mapping[str, Any]]) -> pd.Series:
    """Every row's label, followed by ` · key=value, ...` where its cell (label, dataset, split,
    backbone) holds runs of several configurations (`config_hash` → flat config): such runs are rows
    of their own, never averaged as if they were seeds. Cells of one configuration keep their label."""
    cell = [c for c in CELL if c in frame]
    runs = frame[cell + ["config_hash"]].astype(str).drop_duplicates()
    renamed: dict[tuple[str, ...], str] = {}
    for key, group in runs.groupby(cell, sort=False):
        hashes = list(dict.fromkeys(group["config_hash"]))
        if len(hashes) < 2:
            continue
        keys = distinguishing_keys([configs[h] for h in hashes])
        texts = {h: ", ".join(f"{k}={_value_text(configs[h].get(k, UNSET))}" for k in keys) for h in hashes}
        if len(set(texts.values())) < len(hashes):  # values alike as text (1 and "1"): the hash tells them apart
            texts = {h: f"{t}, config {h}" for h, t in texts.items()}
        renamed.update({(*key, h): f"{key[0]} · {texts[h]}" for h in hashes})
    if not renamed:
        return frame["label"]
    index = pd.MultiIndex.from_frame(frame[cell + ["config_hash"]].astype(str))
    return pd.Series([renamed.get(k, k[0]) for k in index], index=frame.index, dtype=object)


REPORTED = ("A", "F")


def reported_sources(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with `reported_A` and `reported_F` ("flavour/metric" of the summary row each reported
    value is read from). Runs written before methods declared them per metric carry one
    `primary_flavour` for both, which is what they were reported in then."""
    if all(f"reported_{m}" in frame for m in REPORTED):
        return frame
    return frame.assign(**{f"reported_{m}": frame["primary_flavour"] + f"/{m}" for m in REPORTED})


def final_scores(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """A and F of every (split, dataset, method label): for each, the `summary` row its method
    declares (`Method.reported`, e.g. K-means' A is `w/A_sample`), averaged over seeds. Columns:
    split, dataset, label, metric, mean, std (NaN for one seed), n (seeds), source (flavour/metric)."""
    frame = reported_sources(frame)
    summary = frame[frame["group"] == "summary"]
    source = summary["flavour"] + "/" + summary["metric"]
    parts = [summary[source == summary[f"reported_{m}"]].assign(metric=m, source=source) for m in REPORTED]
    rows = _categorical(pd.concat(parts, ignore_index=True), order)
    # what a label stands for, kept for the tables' row headers (Tab. 3's marks, Tab. 4's backbones)
    # and captions (how features were computed)
    identity = {c: (c, "first") for c in ("backbone", "method", "preset", "features") if c in rows}
    out = (rows.groupby(KEYS + ["metric"], observed=True)
           .agg(mean=("value", "mean"), std=("value", lambda v: v.std(ddof=1)), n=("value", "count"),
                source=("source", "first"), **identity).reset_index())
    out["ci95"] = [ci95_half_width(std, n) for std, n in zip(out["std"], out["n"])]
    if "seed" in rows:  # each cell's values by seed: the tables test a best value against the runner-up's
        seeds = rows.groupby(KEYS + ["metric"], observed=True)[["seed", "value"]].apply(
            lambda g: dict(zip(g["seed"].astype(int), g["value"].astype(float)))).rename("by_seed").reset_index()
        out = out.merge(seeds, on=KEYS + ["metric"], how="left")
    return out.sort_values(KEYS + ["metric"]).reset_index(drop=True)


def seed_values(frame: pd.DataFrame) -> pd.DataFrame:
    """The reported A and F of every run: split, dataset, label, metric, seed, value."""
    frame = reported_sources(frame)
    summary = frame[frame["group"] == "summary"]
    source = summary["flavour"] + "/" + summary["metric"]
    parts = [summary[source == summary[f"reported_{m}"]].assign(metric=m) for m in REPORTED]
    out = pd.concat(parts, ignore_index=True)
    return out[["split", "dataset", "label", "metric", "seed", "value"]].astype({"split": str, "dataset": str, "label": str})


def step_curves(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Accuracy on all classes seen so far after every step, over seeds, in the flavour and weighting
    of each method's reported A (`all`/`acc`, or `acc_sample` for a sample-weighted A)."""
    frame = reported_sources(frame)
    flavour, summary_metric = frame["reported_A"].str.split("/").str[0], frame["reported_A"].str.split("/").str[1]
    metric = summary_metric.map({"A": "acc", "A_sample": "acc_sample"})
    rows = frame[(frame["group"] == "all") & (frame["metric"] == metric) & (frame["flavour"] == flavour)]
    rows = _categorical(rows, order)
    out = (rows.groupby(KEYS + ["step"], observed=True)["value"]
           .agg(mean="mean", std=lambda v: v.std(ddof=1), n="count").reset_index())
    return out.sort_values(KEYS + ["step"]).reset_index(drop=True)


def step_forgetting(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """The paper's forgetting after every step, over seeds: a_0 − a_k, a_0 the task-specific accuracy
    on task 0 after step 0 and a_k the accuracy on task 0 after step k in the flavour of each method's
    reported F (0 at step 0); for runs of the mixed setting, its own (`_mixed_forgetting`). Its value after the
    last step is the run's F."""
    frame = reported_sources(frame)
    rows = frame[(frame["group"] == "task_0") & (frame["metric"] == "acc")]
    first = rows[(rows["step"] == 0) & (rows["flavour"] == "task")]
    parts = [_mixed_forgetting(frame)]
    if len(first):
        a0 = first.set_index("run_id")["value"].astype(float)
        later = rows[(rows["step"] >= 1) & (rows["flavour"] == rows["reported_F"].str.split("/").str[0])]
        parts += [first.assign(value=0.0), later.assign(value=later["run_id"].map(a0).astype(float) - later["value"])]
    both = pd.concat([p for p in parts if len(p)]) if any(len(p) for p in parts) else pd.DataFrame()
    if both.empty:  # runs recorded without per-task rows: nothing to draw
        return pd.DataFrame(columns=[*KEYS, "step", "mean", "std", "n"])
    both = _categorical(both, order)
    out = (both.groupby(KEYS + ["step"], observed=True)["value"]
           .agg(mean="mean", std=lambda v: v.std(ddof=1), n="count").reset_index())
    return out.sort_values(KEYS + ["step"]).reset_index(drop=True)


def _mixed_forgetting(frame: pd.DataFrame) -> pd.DataFrame:
    """The mixed setting's forgetting after every step (its runs' F, `bench.protocol.mixed`): the labelled
    classes' accuracy after the labelled step (`all` at step 0) minus their accuracy after step t (`old` hard,
    on the test images: flavour `inductive_hard` where the steps were scored transductively); 0 at step 0."""
    mixed = frame[frame["reported_F"] == "cgcd/F"]
    first = mixed[(mixed["step"] == 0) & (mixed["group"] == "all") & (mixed["flavour"] == "cgcd") & (mixed["metric"] == "acc")]
    old = mixed[(mixed["step"] >= 1) & (mixed["group"] == "old") & (mixed["metric"] == "acc")]
    transductive = set(old.loc[old["flavour"] == "inductive_hard", "run_id"])
    old = old[old["flavour"] == np.where(old["run_id"].isin(transductive), "inductive_hard", "cgcd_hard")]
    if first.empty:
        return first
    a0 = first.set_index("run_id")["value"].astype(float)
    return pd.concat([first.assign(value=0.0), old.assign(value=old["run_id"].map(a0).astype(float) - old["value"])])


def accuracy_matrices(frame: pd.DataFrame, order: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """The accuracy matrix of every (split, dataset, method label) of class-iNCD runs, over seeds: R[t, k], the
    accuracy on task k's test images after step t (k <= t), in the flavour of each method's reported A (`wo`,
    `wo_refit` or `w`), one row per (step, task) with `mean` and seeds `n` (mammoth's and avalanche's matrix)."""
    frame = reported_sources(frame)
    flavour = frame["reported_A"].str.split("/").str[0]
    rows = frame[frame["group"].str.fullmatch(r"task_\d+") & (frame["metric"] == "acc") & (frame["flavour"] == flavour)]
    if rows.empty:
        return pd.DataFrame(columns=[*KEYS, "step", "task", "mean", "n"])
    rows = _categorical(rows.assign(task=rows["group"].str[5:].astype(int)), order)
    out = rows.groupby(KEYS + ["step", "task"], observed=True)["value"].agg(mean="mean", n="count").reset_index()
    return out.sort_values(KEYS + ["step", "task"]).reset_index(drop=True)


def backward_transfer(matrix: pd.DataFrame) -> float:
    """BWT of one method's matrix (its rows of `accuracy_matrices`): the mean over tasks k < T−1 of R[T−1, k] −
    R[k, k] (negative: forgetting); NaN with a single step."""
    at = {(int(r.step), int(r.task)): float(r.mean) for r in matrix.itertuples()}
    last = max((t for t, _ in at), default=0)
    changes = [at[(last, k)] - at[(k, k)] for k in range(last) if (last, k) in at and (k, k) in at]
    return float(np.mean(changes)) if changes else float("nan")


NOT_RECORDED = "not recorded"  # a version column of a run written before runs recorded it


def _version_values(frame: pd.DataFrame, column: str) -> pd.Series:
    """`column` of every row as a string, "not recorded" where the run predates the column."""
    if column not in frame:
        return pd.Series(NOT_RECORDED, index=frame.index)
    return frame[column].astype("string").fillna(NOT_RECORDED).astype(str)


def mixed_versions(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """One line per table cell (split, dataset, label) whose runs differ in a version column (torch,
    CUDA, the weights file...): averaging those would mix what the versions changed into the seeds'
    spread. Columns absent from every run are ignored (runs recorded before them)."""
    present = [c for c in columns if c in frame]
    if frame.empty or not present:
        return []
    values = frame[KEYS + ["run_id"]].astype(str).assign(**{c: _version_values(frame, c) for c in present})
    lines = []
    for cell, runs in values.drop_duplicates().groupby(KEYS, sort=False):
        differing = [f"{c} {' | '.join(sorted(runs[c].unique()))}" for c in present if runs[c].nunique() > 1]
        if differing:
            lines.append(f"{' / '.join(cell)}: its {runs['run_id'].nunique()} runs differ in "
                         f"{'; '.join(differing)} (averaged; `bench report --by COLUMN` splits them)")
    return lines


def split_by(frame: pd.DataFrame, column: str, columns: Sequence[str]) -> pd.DataFrame:
    """The frame with each label split by `column` (one of `columns`): `<label> · <column>=<value>`,
    so that runs of different versions are rows of their own, as other backbones are."""
    if column not in columns:
        raise ValueError(f"cannot split by {column!r}; choose from {', '.join(columns)}")
    return frame.assign(label=frame["label"].astype(str) + f" · {column}=" + _version_values(frame, column))

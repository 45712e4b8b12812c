"""Reading finished runs: the only part of reporting that touches the run directories."""
from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from bench.errors import first_line
from bench.reporting.aggregate import config_labels, flat_config
from bench.config.spec import RunSpec

# what a mixed-setting run ran, from its spec (in its split's label too: `happy-5-stage · draw 0 · K silhouette`), as
# columns of their own: K given (`known`) or `estimated` and by what, the epoch selection, the evaluation; empty (NaN or
# None) for a class-iNCD run, which has none of them
SETTING_COLUMNS = ("k_mode", "k_estimator", "selection", "evaluation")
COLUMNS = ["run_id", "method", "preset", "label", "dataset", "split", "n_steps", "backbone", "seed",
           "reported_A", "reported_F", "features", "step", "group", "flavour", "metric", "value", "config_hash",
           *SETTING_COLUMNS]


def _warn(message: str) -> None:
    print(f"bench: warning: {message}", file=sys.stderr)


@dataclass(frozen=True)
class Unplaced:
    """A finished run that no row of a report holds, and why: reports name it, never drop it silently."""

    run: str  # its directory's name: the run id it was started as
    why: str


ORDER_KEY = "split.class_order_seed"  # a run's class order: with `pool_orders`, a sample like a seed


def pooled_split(split: pd.Series) -> pd.Series:
    """`5-step · order 3` → `5-step · class orders`: every class order one cell (`--pool-orders`)."""
    return split.astype(str).str.replace(r" · order \d+$", " · class orders", regex=True)


def load_runs(run_dirs: Iterable[Path], warn: Callable[[str], None] = _warn,
              pool_orders: bool = False) -> tuple[pd.DataFrame, list[Unplaced]]:
    """All `metrics.parquet` of the runs that are DONE, concatenated, with each run's `config_hash`
    and its label extended by what differs where one cell holds runs of several configurations
    (`aggregate.config_labels`); and the finished runs that cannot be placed, each named in a warning
    (the next `bench run` re-runs it), never with a traceback. Unfinished runs are skipped silently.

    A run's configuration is read from its own spec.json, checked to hash to its directory's name:
    that file is what decided the run's numbers, and every run ever written has one, so runs recorded
    before this check report as they did."""
    tables, configs, unplaced = [], {}, []
    added: dict[str, dict[str, Any]] = {}  # run id -> what it adds to each of its rows
    legacy: dict[str, str] = {}  # run id -> its features, for a run whose metrics do not say them
    for d in map(Path, run_dirs):
        if not (d / "DONE").exists():
            continue
        try:
            spec = _own_spec(d)
            table = _read_metrics(d)
        except _NotPlaced as err:
            unplaced.append(Unplaced(d.name, str(err)))
            warn(f"skipping run {d.name}: {err}; `bench run` re-runs it")
            continue
        config = flat_config(spec.identity()["config"])
        if pool_orders:  # the order is then a sample of the cell, not a configuration of its own
            config.pop(ORDER_KEY, None)
        config_hash = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
        configs[config_hash] = config
        added[d.name] = {"config_hash": config_hash, **setting_columns(spec.config)}
        if "features" not in table.column_names:
            legacy[d.name] = _legacy_features(spec)
        tables.append(table)
    if not tables:
        return pd.DataFrame(columns=COLUMNS), unplaced
    frame = _frame_of(tables)
    # set once on all rows (`_read_metrics` checked that each run's rows carry its id): a column set on each run's
    # frame cost more than reading the frame (docs/performance.md)
    run = frame["run_id"].astype(str)
    frame = frame.assign(**{column: run.map({r: a[column] for r, a in added.items()})
                            for column in ("config_hash", *SETTING_COLUMNS)})
    if legacy:  # the runs whose metrics do not say their features: what their specs say
        features = run.map(legacy)
        frame["features"] = features.where(run.isin(legacy), frame["features"]) if "features" in frame else features
    if {"method", "preset"} <= set(frame.columns):
        frame["label"] = _current_label(frame)
    if pool_orders:  # before labelling: rows are told apart within the pooled cell
        frame["split"] = pooled_split(frame["split"])
    return frame.assign(label=config_labels(frame, configs)), unplaced


def setting_columns(config: Mapping[str, Any]) -> dict[str, str | None]:
    """`SETTING_COLUMNS` of a run's config: its mixed setting's K mode and estimator, selection and evaluation."""
    setting = config.get("setting") or {}
    if setting.get("name", "incd") == "incd":
        return dict.fromkeys(SETTING_COLUMNS)
    k = setting.get("k", "known")
    return {"k_mode": "known" if k == "known" else "estimated", "k_estimator": None if k == "known" else k,
            "selection": setting.get("selection", "last"), "evaluation": setting.get("evaluation", "inductive")}


def load_metrics(run_dirs: Iterable[Path], warn: Callable[[str], None] = _warn) -> pd.DataFrame:
    """The metrics frame of `load_runs`, for callers that need not count the runs left out."""
    return load_runs(run_dirs, warn)[0]


def warn_unreadable_predictions(run_dirs: Iterable[Path], run_ids: Iterable[str],
                                warn: Callable[[str], None] = _warn) -> list[str]:
    """The reported runs (`run_ids`, among `run_dirs`) whose `predictions.npz` exists but cannot be opened (a
    truncated or overwritten file), each named in a warning: what a report draws from stored predictions (the image
    bootstrap, the per-class table, training curves) leaves them out, and their metrics are reported as usual.
    Runs recorded before predictions were kept have none and are not named."""
    from bench.runs.predictions import PREDICTIONS, NewerSchema, opened

    ids, damaged = set(run_ids), []
    for d in map(Path, run_dirs):
        path = d / PREDICTIONS
        if d.name not in ids or not path.exists():
            continue
        try:
            with opened(path):
                pass
        except NewerSchema:  # readable, by a newer bench: the bootstrap's note says so
            continue
        except Exception as err:  # numpy and zipfile raise many types (BadZipFile, EOFError, ...)
            damaged.append(d.name)
            warn(f"run {d.name}: cannot read its {path} ({first_line(err)}); left out of the image bootstrap, the "
                 f"per-class table and the training curves, its metrics reported")
    return damaged


class _NotPlaced(Exception):
    """Why a finished run's files cannot be put in a report's row."""


def _own_spec(run: Path) -> RunSpec:
    """The run's spec.json, refused unless it describes this very run (an edited file no longer does)."""
    path = run / "spec.json"
    try:
        spec = RunSpec.from_json(path.read_text())
    except Exception as err:  # missing, not JSON, not a spec's fields: all mean the same here
        raise _NotPlaced(f"cannot read {path} ({first_line(err)})") from None
    if spec.run_id != run.name:
        raise _NotPlaced(f"its {path} describes another run ({spec.run_id}: {spec.describe()}), "
                         f"not the one that ran here (edited?)")
    return spec


def _read_metrics(run: Path) -> Any:
    """The run's metrics.parquet as an arrow table (`_frame_of` makes one frame of them all), refused when damaged
    or when it holds another run's rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = run / "metrics.parquet"
    try:
        table = pq.read_table(path)
        missing = {"run_id", "group", "flavour", "metric", "value"} - set(table.column_names)
        if missing:
            raise ValueError(f"missing columns {', '.join(sorted(missing))}")
        ids = {str(v) for v in pc.unique(table.column("run_id")).to_pylist()}
    except Exception as err:  # pyarrow and OS errors of many kinds: the file is what matters
        raise _NotPlaced(f"cannot read {path} ({first_line(err)})") from None
    others = sorted(ids - {run.name})
    if others:
        raise _NotPlaced(f"its {path} holds the rows of run {', '.join(others)}")
    return table


def _frame_of(tables: list[Any]) -> pd.DataFrame:
    """The runs' metrics as one frame, converted from arrow once: a conversion per run cost twice its reading
    (docs/performance.md). Where their columns' types cannot be unified (a column of numbers in one run, of text in
    another), each is converted alone and pandas concatenates them, as before."""
    import pyarrow as pa

    try:
        return pa.concat_tables(tables, promote_options="permissive").to_pandas().reset_index(drop=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError):
        return pd.concat([table.to_pandas() for table in tables], ignore_index=True)


# Before issue 20 the default preset was `paper` (the paper's text, today's `equations`) and the
# authors' configuration was the `code` variant, labelled "EwC [code]": a run's label is made again
# from its method and preset, so such runs land in the rows they belong to today.
LEGACY_PRESETS = {"paper": "equations"}


def _current_label(frame: pd.DataFrame) -> pd.Series:
    """Each row's label made again from its method and preset; a row without them (a run recorded before metrics
    had them, beside newer ones) keeps its own."""
    from bench.config.spec import method_label

    known = frame["method"].notna() & frame["preset"].notna()
    pairs = frame.loc[known, ["method", "preset"]].drop_duplicates()
    labels = {(m, p): method_label(m, LEGACY_PRESETS.get(p, p)) for m, p in zip(pairs["method"], pairs["preset"])}
    given = frame["label"] if "label" in frame else [None] * len(frame)
    made = [labels[(m, p)] if k else old for m, p, k, old in zip(frame["method"], frame["preset"], known, given)]
    return pd.Series(made, index=frame.index, dtype=object)


def _legacy_features(spec: RunSpec) -> str:
    """How a run written before metrics recorded it computed its features, from its spec."""
    from bench.core.runs_on import RunsOn
    from bench.config.spec import features_protocol

    try:
        from bench.registries import METHODS, load_all

        load_all()
        cls = METHODS.get(spec.method)
        return features_protocol(spec.config, cls.runs_on if cls else RunsOn())
    except Exception:  # a config of another era must not hide the run's metrics
        return "unknown"

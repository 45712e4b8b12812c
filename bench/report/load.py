"""Reading finished runs: the only part of reporting that touches the run directories."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from bench.errors import first_line

COLUMNS = ["run_id", "method", "preset", "label", "dataset", "split", "n_steps", "backbone", "seed",
           "reported_A", "reported_F", "features", "step", "group", "flavour", "metric", "value"]


def _warn(message: str) -> None:
    print(f"bench: warning: {message}", file=sys.stderr)


def load_metrics(run_dirs: Iterable[Path], warn: Callable[[str], None] = _warn) -> pd.DataFrame:
    """All `metrics.parquet` of the runs that are DONE, concatenated. Unfinished runs are skipped
    silently; a finished run whose metrics cannot be read is skipped with a warning naming the file
    (the next `bench run` re-runs it), never with a traceback."""
    frames = []
    for d in map(Path, run_dirs):
        if not (d / "DONE").exists():
            continue
        path = d / "metrics.parquet"
        try:
            frame = pd.read_parquet(path)
            missing = {"run_id", "group", "flavour", "metric", "value"} - set(frame.columns)
            if missing:
                raise ValueError(f"missing columns {', '.join(sorted(missing))}")
        except Exception as err:  # pyarrow and OS errors of many kinds: the file is what matters
            warn(f"skipping run {d.name}: cannot read {path} ({first_line(err)}); `bench run` re-runs it")
            continue
        if "features" not in frame:
            frame["features"] = _legacy_features(d)
        if {"method", "preset"} <= set(frame.columns):
            frame["label"] = _current_label(frame)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)


# Before issue 20 the default preset was `paper` (the paper's text, today's `equations`) and the
# authors' configuration was the `code` variant, labelled "EwC [code]": a run's label is made again
# from its method and preset, so such runs land in the rows they belong to today.
LEGACY_PRESETS = {"paper": "equations"}


def _current_label(frame: pd.DataFrame) -> pd.Series:
    from bench.spec import method_label

    return pd.Series([method_label(m, LEGACY_PRESETS.get(p, p)) for m, p in zip(frame["method"], frame["preset"])],
                     index=frame.index, dtype=object)


def _legacy_features(run: Path) -> str:
    """How a run written before metrics recorded it computed its features, from its spec.json."""
    from bench.spec import features_protocol

    try:
        spec = json.loads((run / "spec.json").read_text())
        from registries import METHODS, load_all

        load_all()
        cls = METHODS.get(spec["method"])
        traits = {"inputs": cls.inputs, "trains_on_views": cls.trains_on_views,
                  "warms_up_on_features": cls.warms_up_on_features} if cls else {}
        return features_protocol(spec["config"], **traits)
    except Exception:  # an unreadable spec must not hide the run's metrics
        return "unknown"

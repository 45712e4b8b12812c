"""Reading finished runs: the only part of reporting that touches the run directories."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

COLUMNS = ["run_id", "method", "preset", "label", "dataset", "split", "n_steps", "backbone", "seed",
           "primary_flavour", "step", "group", "flavour", "metric", "value"]


def load_metrics(run_dirs: Iterable[Path]) -> pd.DataFrame:
    """All `metrics.parquet` of the runs that are DONE, concatenated (unfinished runs are skipped)."""
    frames = [pd.read_parquet(Path(d) / "metrics.parquet") for d in run_dirs if (Path(d) / "DONE").exists()]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)

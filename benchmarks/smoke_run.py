"""What the benchmarks that time whole runs share: one run of the smoke grid's recipe (generated
images, 2-step) with the options a benchmark sets, timed, and its final task-agnostic A.

Imported by the scripts beside it (`python benchmarks/<script>.py` puts this folder on the path).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from bench.protocol.runner import execute

from bench.runs.rundir import METRICS
from bench.config.grids import expand, load_grid


def stage_options(method: str, epochs: int, batch_size: int = 64) -> dict[str, int]:
    """Every training step of `method` at `epochs` epochs and `batch_size` (the methods these
    benchmarks time)."""
    finetuned = {"method.warmup_epochs": epochs, "method.epochs": epochs, "method.batch_size": batch_size}
    return {"EwC": finetuned, "LwF": finetuned, "DER": finetuned,
            "Joint (unfrozen)": {"method.epochs": epochs, "method.stage1_epochs": epochs,
                                 "method.stage2_epochs": epochs, "method.stage1_batch_size": batch_size,
                                 "method.stage2_batch_size": batch_size},
            "Baseline": {"method.epochs": epochs, "method.batch_size": batch_size}}[method]


def timed_run(method: str, seed: int, backbone: str, options: Mapping[str, Any], location: Mapping[str, Any],
              results: Path) -> tuple[float, float]:
    """Run `method` on the synthetic dataset, 2-step, under `results`: wall seconds and final A (W/O)."""
    (spec,) = expand(load_grid("smoke"), methods=[method], datasets=["synthetic"], splits=["2-step"], seeds=[seed],
                     backbones=[backbone], options=dict(options), location=dict(location))
    start = time.perf_counter()
    out = execute(spec, results)
    seconds = time.perf_counter() - start
    metrics = pd.read_parquet(out / METRICS)
    a = metrics[(metrics["group"] == "summary") & (metrics["flavour"] == "wo") & (metrics["metric"] == "A")]["value"]
    return seconds, float(a.iloc[0])

"""The metric row: one value of a run's `metrics.parquet` (docs/results.md), what the evaluator computes and
the checkpoint and the metrics file keep."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricRow:
    """One value: at step `step`, of group `group` (task_k, old, new, all, summary, ...), under flavour
    `flavour` (wo, w, wo_refit, task, cgcd, ...), metric `metric` (acc, A, F, ...); accuracies in percent."""

    step: int
    group: str
    flavour: str
    metric: str
    value: float

"""`provenance.json` beside a run's predictions: where and with what the run made its numbers (its metrics'
host, device, SLURM job, times and version columns), so that metrics rebuilt from the predictions (a damaged
`metrics.parquet`, `bench.protocol.recompute`) keep the training's, not `unknown`. A file of its own: the
predictions of two runs that computed the same stay equal byte for byte."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from bench.core.storage import atomic_path

PROVENANCE = "provenance.json"
# the metrics' columns it keeps
PROVENANCE_COLUMNS = ("bench_version", "git_commit", "host", "slurm_job_id", "started_at", "ended_at", "duration_s",
                      "device", "gpu", "torch_version", "torchvision_version", "timm_version", "numpy_version", "cuda_version",
                      "cudnn_version", "weights_sha256", "tail_precision", "threads", "method_sha256")


def provenance_of(frame: Any) -> dict[str, Any]:
    """The provenance columns of a run's metrics frame (one value each)."""
    first = frame.iloc[0] if len(frame) else {}
    return {k: (first[k].item() if hasattr(first[k], "item") else first[k]) for k in PROVENANCE_COLUMNS if k in frame}


def write_provenance(out: Path, run_id: str, provenance: Mapping[str, Any]) -> None:
    with atomic_path(Path(out) / PROVENANCE) as tmp:
        tmp.write_text(json.dumps({"run_id": run_id, **provenance}, indent=1, default=str))


def read_provenance(out: Path, run_id: str) -> dict[str, Any] | None:
    """The provenance kept for run `run_id` in `out`, None when there is none (runs finished before it was kept),
    it cannot be read, or it names another run (copied in)."""
    try:
        data = json.loads((Path(out) / PROVENANCE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop("run_id", None) != run_id:
        return None
    return {k: v for k, v in data.items() if k in PROVENANCE_COLUMNS}

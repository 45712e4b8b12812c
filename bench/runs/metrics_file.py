"""A run's `metrics.parquet`: its metric rows, what identifies the run, and where and with what it was
computed (`bench.core.provenance`), so that a report can group, label and warn without opening anything else."""
from __future__ import annotations

import socket
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import torch

from bench.config.spec import RunSpec, features_protocol
from bench.core.provenance import git_commit, gpu_of, method_sha256, provenance, slurm_job_id, utc_now
from bench.core.resources import VERSION
from bench.core.runs_on import RunsOn
from bench.core.storage import atomic_path
from bench.runs.rows import MetricRow
from bench.runs.rundir import METRICS


def metrics_frame(spec: RunSpec, rows: list[MetricRow], device: torch.device, started_at: str, duration: float,
                  mapping_images: str, reported: Mapping[str, tuple[str, str]], weights: Any = False) -> pd.DataFrame:
    """The run's rows with its identity and provenance columns, including the versions that decide its
    numbers (`bench.core.provenance`; `weights`: what the backbone was loaded from). `reported`: the
    (flavour, metric) of the summary rows that are its A and F (its setting's, `bench.protocol.steps.reported_of`)."""
    from bench.registries import METHODS

    frame = pd.DataFrame([asdict(r) for r in rows])
    cls = METHODS.get(spec.method)
    sources = reported_sources(reported, rows)
    identity = dict(run_id=spec.run_id, method=spec.method, preset=spec.preset, label=spec.label,
                    dataset=spec.dataset, split=spec.split_label, n_steps=spec.n_steps, backbone=spec.backbone,
                    seed=spec.seed, reported_A=sources["A"], reported_F=sources["F"],
                    features=features_protocol(spec.config, cls.runs_on),
                    mapping_images=mapping_images)
    columns = dict(
        bench_version=VERSION, git_commit=git_commit(), host=socket.gethostname(),
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else device.type, gpu=gpu_of(device),
        slurm_job_id=slurm_job_id(), started_at=started_at, ended_at=utc_now(), duration_s=float(duration),
        **provenance(device, weights), tail_precision=tail_precision(spec, cls.runs_on, device),
        threads=str(torch.get_num_threads()),  # the run's own (bench.core.numerics.fix): a sum's order follows it
        method_sha256=method_sha256(cls))
    for key, value in {**identity, **columns}.items():
        frame[key] = value
    frame = frame[list(identity) + ["step", "group", "flavour", "metric", "value"] + list(columns)]
    return frame.astype({"step": "int64", "n_steps": "int64", "seed": "int64", "value": "float64"})


def write_metrics(out: Path, frame: pd.DataFrame) -> None:
    with atomic_path(out / METRICS) as tmp:  # removed if the write fails (a full disk)
        frame.to_parquet(tmp, index=False)


def tail_precision(spec: RunSpec, runs_on: RunsOn, device: torch.device) -> str:
    """What the trained blocks computed in: `precision.tails` on CUDA, fp32 on the CPU, "" for a method
    without trained blocks. Runs finished on CUDA before the key existed computed in bf16 and keep
    their ids (the key is left out of them at fp32): this column tells them apart."""
    if not runs_on.trains_blocks:
        return ""
    return spec.config.get("precision", {}).get("tails", "fp32") if device.type == "cuda" else "fp32"


def reported_sources(declared: Mapping[str, tuple[str, str]], rows: list[MetricRow]) -> dict[str, str]:
    """"flavour/metric" of the summary row each reported metric is: what the method declares, or its
    frozen-map `wo` row where the run has no `wo_refit` rows (stored predictions recorded before the
    re-fitted maps were kept, rebuilt into a metrics file)."""
    present = {(r.flavour, r.metric) for r in rows if r.group == "summary"}
    return {name: "/".join(source if source in present else ("wo", source[1])) for name, source in declared.items()}

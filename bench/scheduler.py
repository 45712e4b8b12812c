"""Runs pending RunSpecs through submitit and reports progress as they finish.

`local` runs each spec in its own subprocess (at most `max_parallel` at a time, each with its
share of the CPU threads); `debug` runs them in this process, one after the other. A failing run
never stops the others: its error is in its run directory, and the outcome lists it.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

import submitit

from bench.runner import ERROR, RunBusy, execute, run_dir
from bench.spec import RunSpec

CLUSTERS = ("local", "debug")
BUSY = "busy"  # the run is being run by another process: neither done here nor failed


@dataclass
class Outcome:
    done: list[RunSpec] = field(default_factory=list)
    failed: list[tuple[RunSpec, str]] = field(default_factory=list)
    busy: list[RunSpec] = field(default_factory=list)


def job(spec_json: str, results: str, threads: int) -> str:
    """The callable each submitit job runs (importable, so it pickles by reference)."""
    import torch

    torch.set_num_threads(max(1, threads))
    try:
        execute(RunSpec.from_json(spec_json), Path(results), echo=True)
    except RunBusy:
        return BUSY
    return "done"


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "").strip()


def run_specs(specs: list[RunSpec], results: Path, *, cluster: str, max_parallel: int | None = None,
              progress: Callable[[str], None] = print) -> Outcome:
    if cluster not in CLUSTERS:
        raise ValueError(f"unknown cluster {cluster!r}; choose from {', '.join(CLUSTERS)}")
    folder = Path(results) / "submitit" / datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    executor.update_parameters(timeout_min=24 * 60)
    cores = os.cpu_count() or 1
    parallel = 1 if cluster == "debug" else max(1, min(max_parallel or cores, len(specs)))
    threads = max(1, cores // parallel)
    outcome = Outcome()
    queue = list(specs)
    running: list[tuple[RunSpec, submitit.Job, float]] = []
    total, finished = len(specs), 0
    while queue or running:
        while queue and len(running) < parallel:
            spec = queue.pop(0)
            running.append((spec, executor.submit(job, spec.to_json(), str(results), threads), time.monotonic()))
        for item in list(running):
            spec, handle, start = item
            if cluster != "debug" and not handle.done():
                continue
            running.remove(item)
            finished += 1
            error = handle.exception()  # runs a debug job; never drops into pdb, unlike result()
            seconds = time.monotonic() - start
            if error is None and handle.result() == BUSY:
                outcome.busy.append(spec)
                progress(f"[{finished:>{len(str(total))}}/{total}] skipped {spec.describe()}: being run by another process")
            elif error is None:
                outcome.done.append(spec)
                progress(f"[{finished:>{len(str(total))}}/{total}] done    {spec.describe()}  ({seconds:.1f}s)")
            else:
                err_file = run_dir(results, spec) / ERROR
                reason = _first_line(err_file.read_text()) if err_file.exists() else _first_line(str(error))
                outcome.failed.append((spec, reason))
                progress(f"[{finished:>{len(str(total))}}/{total}] FAILED  {spec.describe()}: {reason}")
        if running and cluster != "debug":
            time.sleep(0.2)
    return outcome

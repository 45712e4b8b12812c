"""Runs pending RunSpecs through submitit and reports progress as they finish.

`local` runs them on a pool of warm worker processes (`bench.execution.workers`: at most `max_parallel` at a
time, by default one per available core; each run sets its own threads, `bench.core.numerics`); `debug` runs
them in this process, one after the other, through submitit's debug executor. A failing run never
stops the others: its error is in its run directory, and the outcome lists it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Sequence

import submitit

from bench.protocol.runner import execute
from bench.runs.rundir import RunBusy
from bench.config.spec import RunSpec
from bench.execution.workers import BUSY, CLUSTERS, ELSEWHERE, failure_reason, pool_shape, run_pool


@dataclass
class Outcome:
    done: list[RunSpec] = field(default_factory=list)
    failed: list[tuple[RunSpec, str]] = field(default_factory=list)
    busy: list[RunSpec] = field(default_factory=list)
    elsewhere: list[RunSpec] = field(default_factory=list)  # found finished by another process (a `bench worker`)


def job(spec_json: str, results: str) -> str:
    """The callable each submitit job runs (importable, so it pickles by reference); the runner sets the
    run's own threads."""
    started: list[Path] = []  # the runner calls this under the run's lock only when it runs it
    try:
        execute(RunSpec.from_json(spec_json), Path(results), echo=True, claim=started.append)
    except RunBusy:
        return BUSY
    return "done" if started else ELSEWHERE


def run_specs(specs: list[RunSpec], results: Path, *, cluster: str, max_parallel: int | None = None,
              progress: Callable[[str], None] = print, gpus: Sequence[str] = ()) -> Outcome:
    """Run `specs` on `cluster`; `gpus`: the local pool's GPU slots (`bench.execution.gpus.gpu_slots`), one
    worker each (`max_parallel` is then their number)."""
    if cluster not in CLUSTERS:
        raise ValueError(f"unknown cluster {cluster!r}; choose from {', '.join(CLUSTERS)}")
    folder = Path(results) / "submitit" / datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    outcome = Outcome()
    total, count = len(specs), [0]

    def finished(spec: RunSpec, kind: str, seconds: float, reason: str) -> None:
        count[0] += 1
        head = f"[{count[0]:>{len(str(total))}}/{total}]"
        if kind == BUSY:
            outcome.busy.append(spec)
            progress(f"{head} skipped {spec.describe()}: being run by another process")
        elif kind == ELSEWHERE:
            outcome.elsewhere.append(spec)
            progress(f"{head} done elsewhere {spec.describe()}: finished by another process meanwhile")
        elif kind == "done":
            outcome.done.append(spec)
            progress(f"{head} done    {spec.describe()}  ({seconds:.1f}s)")
        else:
            outcome.failed.append((spec, reason))
            progress(f"{head} FAILED  {spec.describe()}: {reason}")

    if cluster == "local":
        workers, slots = pool_shape(len(specs), max_parallel, gpus)
        run_pool(specs, Path(results), workers=workers, folder=folder, finished=finished, slots=slots)
        return outcome
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    executor.update_parameters(timeout_min=24 * 60)
    for spec in specs:  # debug: in this process, one after the other
        start = time.monotonic()
        handle = executor.submit(job, spec.to_json(), str(results))
        error = handle.exception()  # runs the job; never drops into pdb, unlike result()
        if error is None:
            finished(spec, handle.result(), time.monotonic() - start, "")
        else:
            finished(spec, "failed", 0.0, failure_reason(Path(results), spec, error))
    return outcome

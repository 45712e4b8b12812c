"""Warm local workers: `--cluster local` runs a grid on a pool of long-lived processes.

A fresh Python per run pays the import of the whole stack (torch, timm, pandas, scikit-learn,
mmengine: about 6 s on a 2-core machine) and a full garbage collection at exit for a run that may do
one second of work. Here each worker (a `concurrent.futures.ProcessPoolExecutor` process, started by
a fork server) imports the stack once, when it starts, and executes many runs.

A run that kills its worker (a segfault, the out-of-memory killer) breaks the pool: every run then
in flight fails with `BrokenProcessPool`. Each run marks itself in flight with a file that outlives
its process, so the culprit is known: if one run was in flight it is recorded as failed (its
`error.txt` says so) and a fresh pool takes the rest; if several were, each of them is run again
alone, and the one that breaks its pool alone is the culprit. Ctrl-C stops the pool; finished runs
stay finished and every unfinished one resumes from its last checkpoint on the next `bench run`.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable

from bench.errors import first_line
from bench.numerics import available_cores  # noqa: F401  (sizes the pool; imported from here by callers)
from bench.spec import RunSpec

CLUSTERS = ("local", "debug")  # what runs on this machine (bench.scheduler); "slurm" is bench.slurm's
BUSY = "busy"  # the run is being run by another process: neither done here nor failed
CRASHED = ("its worker process died while running it (a crash such as a segfault, the out-of-memory killer, "
           "or SIGBUS from a disk that filled under a memory-mapped file: check the free space of --results and "
           "--cache-dir); the other runs went on")
NO_START = "the local worker processes died before running it, twice (try --cluster debug to see why)"


def _warm() -> None:
    """Each worker, once: the stack imported. Its threads are each run's own (set by the runner), never
    a share of the cores: that would make a run's numbers depend on what ran beside it."""
    import torch  # noqa: F401

    import registries
    import bench.runner  # noqa: F401

    registries.load_all()


def _execute(spec_json: str, results: str, inflight: str) -> tuple[str, float]:
    """One run in a warm worker, and its seconds; `inflight/<run id>` holds the worker's pid while it runs."""
    from bench.runner import RunBusy, execute

    spec = RunSpec.from_json(spec_json)
    marker = Path(inflight) / spec.run_id
    marker.write_text(str(os.getpid()))
    start = time.monotonic()
    try:
        execute(spec, Path(results), echo=False)  # its log is in its run directory; the grid prints progress
    except RunBusy:
        return BUSY, time.monotonic() - start
    finally:
        marker.unlink(missing_ok=True)
    return "done", time.monotonic() - start


def run_pool(specs: list[RunSpec], results: Path, *, workers: int, folder: Path,
             finished: Callable[[RunSpec, str, float, str], None]) -> None:
    """Run `specs` on `workers` warm processes; `finished(spec, kind, seconds, reason)` is called as
    each ends, with kind "done", "busy" or "failed"."""
    inflight = folder / "inflight"
    inflight.mkdir(parents=True, exist_ok=True)
    queue, alone, idle_breaks = list(specs), [], 0
    while queue or alone:
        batch, size = ([alone.pop(0)], 1) if alone else (queue, workers)
        left = _pass(batch, results, size, inflight, finished)
        culprits = [s for s in batch if (inflight / s.run_id).exists()]
        for spec in culprits:
            (inflight / spec.run_id).unlink()
        if len(culprits) == 1 or (culprits and size == 1):
            _record_crash(results, culprits[0], CRASHED, finished)
        elif culprits:
            alone += culprits  # which of them broke the pool: each runs again alone
        left = [s for s in left if s not in culprits]
        idle_breaks = idle_breaks + 1 if left and not culprits else 0
        if idle_breaks == 2:  # twice a pool broke with no run in flight: its workers cannot start
            for spec in left:
                _record_crash(results, spec, NO_START, finished)
            left = []
        if batch is queue:
            queue = left
        else:  # a lone run whose pool broke before it started goes again
            alone = left + alone


def _pass(specs: list[RunSpec], results: Path, workers: int, inflight: Path,
          finished: Callable[[RunSpec, str, float, str], None]) -> list[RunSpec]:
    """One pool over `specs`; returns the runs a broken pool left unfinished."""
    context = multiprocessing.get_context("forkserver")
    left: list[RunSpec] = []
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_warm)
    try:
        started = time.monotonic()
        futures = {pool.submit(_execute, s.to_json(), str(results), str(inflight)): s for s in specs}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                spec = futures[future]
                try:
                    kind, seconds = future.result()
                except BrokenProcessPool:
                    left.append(spec)
                    continue
                except Exception as err:  # the run's own error: execute wrote error.txt
                    finished(spec, "failed", time.monotonic() - started, failure_reason(results, spec, err))
                    continue
                finished(spec, kind, seconds, "")
    except KeyboardInterrupt:  # interrupt the runs in flight too (a terminal's Ctrl-C reaches them anyway)
        for marker in inflight.iterdir():
            try:
                os.kill(int(marker.read_text()), signal.SIGINT)
            except (OSError, ValueError):
                pass
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return left


def _record_crash(results: Path, spec: RunSpec, why: str, finished: Callable[[RunSpec, str, float, str], None]) -> None:
    from bench.rundir import ERROR, run_dir

    out = run_dir(results, spec)
    out.mkdir(parents=True, exist_ok=True)
    (out / ERROR).write_text(f"WorkerCrashed: {why}\n")
    finished(spec, "failed", 0.0, f"WorkerCrashed: {why}")


def failure_reason(results: Path, spec: RunSpec, err: BaseException) -> str:
    """The first line of the run's `error.txt`, or of the error itself where the run wrote none."""
    from bench.rundir import ERROR, run_dir

    error = run_dir(results, spec) / ERROR
    text = error.read_text() if error.exists() else ""
    return next((line.strip() for line in text.splitlines() if line.strip()), first_line(err))

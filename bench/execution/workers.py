"""Warm local workers: `--cluster local` runs a grid on a pool of long-lived processes.

A fresh Python per run pays the import of the whole stack (torch, timm, pandas, scikit-learn,
mmengine: about 6 s on a 2-core machine) and a full garbage collection at exit for a run that may do
one second of work. Here each worker (a `concurrent.futures.ProcessPoolExecutor` process, started by
a fork server) imports the stack once, when it starts, and executes many runs.

A run that kills its worker (a segfault, the out-of-memory killer) breaks the pool: every run then
in flight fails with `BrokenProcessPool`. Each run marks itself in flight with a file that outlives
its process, so the culprit is known: if one run was in flight it is recorded as failed (its
`error.txt` says so) and a fresh pool takes the rest; if several were, each of them is run again
alone, and the one that breaks its pool alone is the culprit.

Ctrl-C, SIGTERM or SIGHUP (not under nohup) stops the pool (`_stop`): no queued run starts, the runs in flight
are interrupted and their workers killed within GRACE_S seconds; finished runs stay finished and every unfinished
one resumes from its last checkpoint on the next `bench run`. A second one ends bench at once. Workers and their
fork server end with bench however it ends, a SIGKILL included (`bench.execution.lifeline`); the in-flight markers
a SIGKILL leaves are swept by the next pool (`sweep_stale`).
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bench.errors import first_line
from bench.execution.gpus import take_slot
from bench.execution.lifeline import die_with_parent, identity, watch
from bench.core.numerics import available_cores  # sizes the pool (`pool_shape`)
from bench.config.spec import RunSpec

CLUSTERS = ("local", "debug")  # what runs on this machine (bench.execution.scheduler); "slurm" is bench.execution.slurm's
BUSY = "busy"  # the run is being run by another process: neither done here nor failed
ELSEWHERE = "done elsewhere"  # another process (a `bench worker`) finished the run before this one reached it
CRASHED = ("its worker process died while running it (a crash such as a segfault, the out-of-memory killer, "
           "or SIGBUS from a disk that filled under a memory-mapped file: check the free space of --results and "
           "--cache-dir); the other runs went on")
NO_START = "the local worker processes died before running it, twice (try --cluster debug to see why)"
CANCELLED = "cancelled"  # the pool was stopping when a worker took the run from its queue: not started
STOP = "stop"  # beside inflight/: once it exists, a worker starts no further run
GRACE_S = 3.0  # how long runs in flight may take to unwind after Ctrl-C before their workers are killed
POLL_S = 0.2  # how often the pool looks for a stop request between finished runs
INTERRUPTED = ("bench: interrupted; finished runs are kept, the others resume from their last step on the next "
               "`bench run`")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # SIGTERM (`timeout`, `kill`) stops as Ctrl-C does


class Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the runs; `signum` says which (bench exits with 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame: Any) -> None:
    raise Stopped(signum)


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM raises `Stopped` as Ctrl-C raises KeyboardInterrupt (`--cluster debug`: the run in this
    process unwinds and resumes later); the handler before is restored after. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_at_once(signum: int, frame: Any) -> None:
    """The second Ctrl-C: bench ends now, without waiting for anything (its workers die with it)."""
    os.write(2, f"\n{INTERRUPTED}\n".encode())
    os._exit(128 + signum)


def _warm() -> None:
    """Each worker, once: the stack imported. Its threads are each run's own (set by the runner), never
    a share of the cores: that would make a run's numbers depend on what ran beside it."""
    import torch  # noqa: F401

    import bench.registries as registries
    import bench.protocol.runner  # noqa: F401

    registries.load_all()


_stopping = False  # this worker was interrupted: it starts no further run
_in_run = False  # a run is executing in this worker: an interrupt unwinds it


def _start_worker(parent: int, include: tuple[str, ...], slots: Any = None) -> None:
    """Each worker, first: it ends with bench (pid `parent`), an interrupt stops it; it takes its GPU from
    the pool's queue of `slots` (`bench.execution.gpus`: none without GPUs) and bench's plugin folders
    `include` (told, never read from an environment the fork server may have had before); then `_warm`,
    which imports them and the entry points."""
    from bench.registries import plugins

    take_slot(slots)  # before anything touches CUDA: the one GPU this worker sees
    die_with_parent()  # its parent is the fork server, which dies with bench (bench.execution.forkserver_lifeline)
    watch(parent)
    signal.signal(signal.SIGINT, _on_interrupt)
    plugins.use(include, warn=False)  # bench has warned of a broken plugin once; a failed run says it again
    _warm()


def _on_interrupt(signum: int, frame: Any) -> None:
    """Ctrl-C in a worker (the terminal's, or bench's as it stops): the run in flight unwinds once (it
    resumes from its last checkpoint); an idle worker only remembers, so that it starts nothing more
    and prints no traceback."""
    global _stopping
    first, _stopping = not _stopping, True
    if first and _in_run:
        raise KeyboardInterrupt


def _execute(spec_json: str, results: str, inflight: str) -> tuple[str, float]:
    """One run in a warm worker, and its seconds; `inflight/<run id>` holds the worker's pid while it runs."""
    global _in_run
    from bench.protocol.runner import execute
    from bench.runs.rundir import RunBusy

    spec = RunSpec.from_json(spec_json)
    marker = Path(inflight) / spec.run_id
    # the marker before the stop check: bench, stopping, writes the stop file and then reads the markers,
    # so either this worker sees the stop file or bench sees this run in flight and interrupts it
    marker.write_text(str(os.getpid()))
    start = time.monotonic()
    try:
        _in_run = True
        if _stopping or (Path(inflight).parent / STOP).exists():
            return CANCELLED, 0.0
        started: list[Path] = []  # the runner calls this under the run's lock only when it runs it
        execute(spec, Path(results), echo=False, claim=started.append)  # its log is in its run directory
    except RunBusy:
        return BUSY, time.monotonic() - start
    finally:
        _in_run = False
        marker.unlink(missing_ok=True)
    return "done" if started else ELSEWHERE, time.monotonic() - start


OWNER = "owner"  # beside inflight/: the pid and start token of the bench that runs the pool


def sweep_stale(pools: Path) -> list[Path]:
    """The in-flight folders under `pools` (`<results>/submitit/`) that a bench which has ended left behind
    (SIGKILL, SIGHUP, a power cut: its markers could not be removed), removed with their stop files; the
    folders removed. A folder whose bench still runs (its pid with the same start token) is left alone."""
    import shutil

    removed = []
    for owner in sorted(Path(pools).glob(f"*/{OWNER}")):
        try:
            pid, token = owner.read_text().split()
        except (OSError, ValueError):
            continue  # being written, or not ours: left alone
        if identity(int(pid)) == token:
            continue
        shutil.rmtree(owner.parent / "inflight", ignore_errors=True)
        for name in (STOP, OWNER):
            (owner.parent / name).unlink(missing_ok=True)
        removed.append(owner.parent)
    return removed


def pool_shape(runs: int, max_parallel: int | None, slots: Sequence[str]) -> tuple[int, list[str]]:
    """How many workers a local pool of `runs` runs starts, and their GPU slots: one per slot, none idle holding
    a GPU; without slots `max_parallel` (default one per available core), never more than the runs."""
    used = list(slots)[:runs]
    return len(used) or max(1, min(max_parallel or available_cores(), runs)), used


def run_pool(specs: list[RunSpec], results: Path, *, workers: int, folder: Path,
             finished: Callable[[RunSpec, str, float, str], None], slots: Sequence[str] = ()) -> None:
    """Run `specs` on `workers` warm processes (one per GPU slot where `slots` are given: each worker sees
    its slot's GPU alone); `finished(spec, kind, seconds, reason)` is called as each ends, with kind "done",
    "busy" or "failed". The in-flight markers of pools whose bench ended without removing them go first
    (`sweep_stale`); this pool's go with it, however it ends short of a SIGKILL."""
    if slots and workers != len(slots):
        raise ValueError(f"{workers} workers for {len(slots)} GPU slots: one worker per slot")
    sweep_stale(folder.parent)
    inflight = folder / "inflight"
    inflight.mkdir(parents=True, exist_ok=True)
    (folder / OWNER).write_text(f"{os.getpid()} {identity(os.getpid())}")
    try:
        _run_pool(specs, results, workers, inflight, finished, tuple(slots))
    finally:  # the markers of runs that ended were removed one by one; a stopped pool's are stale now
        import shutil

        shutil.rmtree(inflight, ignore_errors=True)
        for name in (STOP, OWNER):
            (folder / name).unlink(missing_ok=True)


def _run_pool(specs: list[RunSpec], results: Path, workers: int, inflight: Path,
              finished: Callable[[RunSpec, str, float, str], None], slots: tuple[str, ...]) -> None:
    queue, idle_breaks = list(specs), 0
    alone: list[RunSpec] = []
    while queue or alone:
        batch, size = ([alone.pop(0)], 1) if alone else (queue, workers)
        # a lone run takes the first slot (its pool has one worker); a full pass, one worker per slot
        left = _pass(batch, results, size, inflight, finished, slots[:size])
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
          finished: Callable[[RunSpec, str, float, str], None], slots: tuple[str, ...] = ()) -> list[RunSpec]:
    """One pool over `specs`; returns the runs a broken pool left unfinished. Ctrl-C or SIGTERM stops
    it (`_stop`) and raises `Stopped`."""
    context = multiprocessing.get_context("forkserver")
    if threading.current_thread() is threading.main_thread():
        # the fork server's parent-death signal fires when the thread that starts it ends: only the
        # main thread (which starts it in submit) lives as long as bench
        context.set_forkserver_preload(["__main__", "bench.execution.forkserver_lifeline"])
    from bench.registries.plugins import active_dirs

    left: list[RunSpec] = []
    # a pool per pass, for this command's plugins: no pool outlives the plugin set it was started with
    queue = None
    if slots:  # each worker of this pool takes one slot as it starts (a broken pool's successor gets them anew)
        queue = context.Queue()
        for slot in slots:
            queue.put(slot)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                               initargs=(os.getpid(), tuple(str(d) for d in active_dirs()), queue))
    with _stop_requests(pool, inflight) as asked:
        started = time.monotonic()
        futures = {pool.submit(_execute, s.to_json(), str(results), str(inflight)): s for s in specs}
        pending = set(futures)
        while pending and not asked:
            done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                spec = futures[future]
                try:
                    kind, seconds = future.result()
                except BrokenProcessPool:
                    left.append(spec)
                    continue
                except KeyboardInterrupt:  # a Ctrl-C that reached a worker alone: stop as if bench had it
                    asked.append(signal.SIGINT)
                    continue
                except Exception as err:  # the run's own error: execute wrote error.txt
                    finished(spec, "failed", time.monotonic() - started, failure_reason(results, spec, err))
                    continue
                if kind == CANCELLED:  # likewise: its worker was interrupted before it started
                    asked.append(signal.SIGINT)
                    continue
                finished(spec, kind, seconds, "")
        if asked:
            _stop(pool, inflight)
            raise Stopped(asked[0])
    pool.shutdown(wait=True)
    return left


@contextmanager
def _stop_requests(pool: ProcessPoolExecutor, inflight: Path) -> Iterator[list[int]]:
    """The signals asking the pool to stop, as a list the pool polls: handlers that raise nothing, so
    that no interrupt lands inside the executor's own bookkeeping (where it used to hang bench). The
    second signal ends bench at once. Main thread only (elsewhere no signal is delivered)."""
    asked: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield asked
        return

    def handler(signum: int, frame: Any) -> None:
        if asked:
            _kill_workers(pool, inflight)
            exit_at_once(signum, frame)
        asked.append(signum)

    # SIGHUP (the terminal closed) stops the pool too, unless bench was started to outlive its terminal (nohup)
    hangup = (signal.SIGHUP,) if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN else ()
    previous = {sig: signal.signal(sig, handler) for sig in (*STOP_SIGNALS, *hangup)}
    try:
        yield asked
    finally:  # the command line installs its own second-signal exit while it winds down (bench.cli)
        for sig, before in previous.items():
            signal.signal(sig, before)


def _stop(pool: ProcessPoolExecutor, inflight: Path) -> None:
    """No queued run starts (the stop file, which a worker checks after marking its run in flight);
    the runs in flight are interrupted (they log it and release their run directory; the terminal's
    Ctrl-C may have done so already) and given GRACE_S seconds; then every worker is killed."""
    (inflight.parent / STOP).touch()
    for pid in _inflight_pids(inflight):
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + GRACE_S
    while _inflight_pids(inflight) and time.monotonic() < deadline:
        time.sleep(0.05)
    _kill_workers(pool, inflight)
    pool.shutdown(wait=True, cancel_futures=True)  # its workers are dead: only its threads to join


def _inflight_pids(inflight: Path) -> set[int]:
    """The workers running a run now (a crashed worker's marker outlives it: not counted)."""
    pids = set()
    for marker in inflight.iterdir():
        try:
            pid = int(marker.read_text())
        except (OSError, ValueError):  # gone, or being written
            continue
        if identity(pid) is not None:
            pids.add(pid)
    return pids


def _kill_workers(pool: ProcessPoolExecutor, inflight: Path) -> None:
    """SIGKILL every worker of `pool`: what it was doing is checkpointed or discarded."""
    try:
        pids = set(getattr(pool, "_processes", None) or {})  # CPython's pid -> process map of the pool
    except RuntimeError:  # changed while read (the pool's thread): the workers in flight still go
        pids = set()
    for pid in pids | _inflight_pids(inflight):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _record_crash(results: Path, spec: RunSpec, why: str, finished: Callable[[RunSpec, str, float, str], None]) -> None:
    from bench.runs.rundir import ERROR, run_dir

    out = run_dir(results, spec)
    out.mkdir(parents=True, exist_ok=True)
    (out / ERROR).write_text(f"WorkerCrashed: {why}\n")
    finished(spec, "failed", 0.0, f"WorkerCrashed: {why}")


def failure_reason(results: Path, spec: RunSpec, err: BaseException) -> str:
    """The first line of the run's `error.txt`, or of the error itself where the run wrote none."""
    from bench.runs.rundir import ERROR, run_dir

    error = run_dir(results, spec) / ERROR
    text = error.read_text() if error.exists() else ""
    return next((line.strip() for line in text.splitlines() if line.strip()), first_line(err))

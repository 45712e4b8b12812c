"""Pull-based workers: `bench worker --grid NAME [selection] --results DIR` claims the grid's pending runs one at a
time and runs them until none is left, so that anything able to start N copies of one command (a SLURM array, a
Kubernetes Indexed Job, SkyPilot, a shell loop over a few machines) runs a grid without knowing its run list.

A claim is the run directory's lock (`bench.runs.runstore.locked`, an exclusive `flock` held while the run runs):
a second worker finds the run busy and moves on, and finds it done once the lock is free, so every run is
started once. The lock dies with its process, SIGKILL included, so a killed worker's run is claimed by another,
which resumes it from its last checkpoint. Each claim is one line of the run's `attempts.txt`; a run claimed
`max_attempts` times by workers that died running it (the out-of-memory killer, a segfault) is recorded as failed
instead of being tried forever, and a run that failed is left to `--retry-failed`, which retries the runs that had
failed before the worker started, once, with `max_attempts` claims of its own. A worker stopped cleanly (SIGTERM,
as a cluster preempts it, or Ctrl-C) did not crash: the line it adds after its claim (`stopped`) takes that claim
out of the count.

Locks must be shared between the machines: `check_locks` refuses a filesystem where `flock` fails or is not
exclusive, and docs/slurm.md#pull-based-workers says which filesystems were tested and which share locks only
within a node (NFS mounted `nolock`, Lustre mounted `localflock`), where workers on several nodes must not share
a results folder.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from bench.config.spec import RunSpec
from bench.core.provenance import utc_now
from bench.errors import BenchError, first_line
from bench.runs.rundir import ERROR, RunBusy, is_done, run_dir

# in the run directory: one line per claim, `<utc time> <host>:<pid>`; `<utc time> <host>:<pid> stopped <signal>`
# after a claim whose worker was stopped cleanly, `<utc time> <host>:<pid> retried` where --retry-failed starts over
ATTEMPTS = "attempts.txt"
STOPPED, RETRIED = "stopped", "retried"
MAX_ATTEMPTS = 3
POLL_S = 5.0  # how often a worker with nothing to claim looks again while other workers hold runs


class NotClaimed(RunBusy):
    """The worker leaves the run alone: it failed (here or in another worker), or was given up."""


@dataclass
class Work:
    """What one worker did, and where the selection stands when it stopped."""

    ran: list[RunSpec] = field(default_factory=list)
    failed: list[tuple[RunSpec, str]] = field(default_factory=list)  # failed in this worker, with why
    left_failed: list[RunSpec] = field(default_factory=list)  # failed in any worker, not done at the end


def filesystem_of(path: Path) -> str:
    """The type of the filesystem holding `path` (from /proc/mounts: the longest mount point above it)."""
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    target = str(Path(path).resolve())
    best = max((m for m in mounts if target == m[0] or target.startswith(m[0].rstrip("/") + "/")),
               key=lambda m: len(m[0]), default=None)
    return best[1] if best else "unknown"


def check_locks(results: Path) -> None:
    """Workers agree on who runs what through `flock` on the results folder: refuse one where a lock cannot be
    taken, or where a second one is granted (not exclusive), naming its filesystem."""
    results.mkdir(parents=True, exist_ok=True)
    probe = results / ".lock-probe"
    fs = filesystem_of(results)
    with probe.open("a") as first, probe.open("a") as second:
        try:
            fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            raise BenchError(f"--results {results}: its filesystem ({fs}) refuses file locks ({err.strerror}); "
                             f"bench worker shares runs between workers through them: put the results on a "
                             f"filesystem with working flock (a local disk, NFSv4, Lustre mounted with -o flock)") from None
        try:
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        raise BenchError(f"--results {results}: its filesystem ({fs}) grants a second exclusive lock on a locked "
                         f"file, so two workers could run the same run; put the results on a filesystem with "
                         f"working flock")


def crashed_claims(text: str) -> int:
    """How many claims of an `attempts.txt` (its text) ended without the run finishing or its worker stopping
    cleanly, since --retry-failed last started the count over: the workers that died running it, or are running it."""
    count = 0
    for line in text.splitlines():
        mark = line.split()[2:3]
        if not mark:  # a claim (the only kind of line before stops and retries were written)
            count += 1
        elif mark == [STOPPED]:
            count = max(count - 1, 0)
        elif mark == [RETRIED]:
            count = 0
    return count


def work(specs: Sequence[RunSpec], results: Path, *, retry_failed: bool = False, max_attempts: int = MAX_ATTEMPTS,
         poll_s: float = POLL_S, say: Callable[[str], None] = print) -> Work:
    """Claim and run `specs` one at a time until every one is done or failed; while the only runs left are held
    by other workers, wait for them (one may die, and its run is then this worker's to resume)."""
    from bench.protocol.runner import execute

    me, started = f"{socket.gethostname()}:{os.getpid()}", time.time()
    outcome, claimed = Work(), []
    in_flight: list[Path] = []  # the run directory this worker has claimed and is running, if any

    def failed(out: Path) -> bool:
        """Failed, and not this worker's to retry (`retry_failed` retries what failed before it started)."""
        error = out / ERROR
        return error.exists() and not (retry_failed and error.stat().st_mtime < started)

    def claim(out: Path) -> None:
        error = out / ERROR
        if failed(out):
            raise NotClaimed("failed")  # in another worker since this one looked
        attempts = out / ATTEMPTS
        if error.exists():  # failed before this worker started, and retried (--retry-failed): claims counted anew
            with attempts.open("a") as fh:
                fh.write(f"{utc_now()} {me} {RETRIED}\n")
        tries = crashed_claims(attempts.read_text()) if attempts.exists() else 0
        if tries >= max_attempts:
            error.write_text(f"WorkerCrashed: claimed {tries} times by workers that did not finish it (each died "
                             f"while running it: the out-of-memory killer, a segfault, a node lost); "
                             f"`bench worker --retry-failed` tries it again\n")
            raise NotClaimed("given up")
        with attempts.open("a") as fh:
            fh.write(f"{utc_now()} {me}\n")
        claimed.append(spec.run_id)
        in_flight[:] = [out]
        say(f"[{me}] started {spec.run_id} {spec.describe()}")

    while True:
        held = 0
        for spec in specs:
            if is_done(results, spec) or failed(run_dir(results, spec)):
                continue
            clock = time.monotonic()
            try:
                execute(spec, results, echo=False, claim=claim)
            except KeyboardInterrupt as stop:  # SIGTERM (`Stopped`: a preempted job or pod) or Ctrl-C: not a crash
                for out in in_flight:
                    with (out / ATTEMPTS).open("a") as fh:
                        fh.write(f"{utc_now()} {me} {STOPPED} {stop.args[0] if stop.args else 'SIGINT'}\n")
                raise
            except NotClaimed:
                continue
            except RunBusy:
                held += 1
                continue
            except Exception as err:  # its error.txt says why; the worker goes on with the others
                outcome.failed.append((spec, first_line(err)))
                say(f"[{me}] FAILED  {spec.run_id} {spec.describe()}: {first_line(err)}")
                continue
            finally:
                in_flight.clear()
            if claimed and claimed[-1] == spec.run_id:  # run here, not found done under the lock
                outcome.ran.append(spec)
                say(f"[{me}] done    {spec.run_id} {spec.describe()} ({time.monotonic() - clock:.1f}s)")
        if not held:
            break
        time.sleep(poll_s)
    outcome.left_failed = [s for s in specs if not is_done(results, s) and (run_dir(results, s) / ERROR).exists()]
    return outcome

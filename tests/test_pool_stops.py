"""A local pool that stops when asked (bench/execution/workers.py, bench/execution/lifeline.py), driven through a real
`bench run --cluster local --workers 2`: Ctrl-C or SIGTERM starts no queued run, stops the runs in
flight (they resume on the next `bench run`) and exits within seconds; a second Ctrl-C exits at once;
SIGKILL to bench alone takes its workers and fork server with it; a reader that leaves fails nothing."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
# bench and its workers import the bench that PYTHONPATH names (this tree's unless told otherwise), not an
# installed one; they run in the test's directory, so that the current directory does not decide it either
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT)}
# four runs of a few seconds each on two workers: two in flight, two queued when the signal comes
GRID = ["--grid", "smoke", "--methods", "Baseline", "--backbone", "pixels", "--splits", "5-step",
        "--seeds", "0", "1", "2", "3", "--cfg-options", "method.epochs=300", "dataset.num_classes=10",
        "dataset.train_per_class=40"]
EXIT_S = 8.0  # "within seconds": GRACE_S for the runs in flight to unwind, and the slack of a loaded machine


def bench(results: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench.cli", "run", *GRID, "--cluster", "local", "--workers", "2",
            "--results", str(results), *extra]


@contextmanager
def started(results: Path) -> Iterator[subprocess.Popen]:
    """`bench run` in a session of its own (its pid is the session id its workers inherit), as a shell runs
    it; whatever the test did, nothing of that session outlives it."""
    proc = subprocess.Popen(bench(results), env=ENV, cwd=results, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=as_from_a_terminal)
    try:
        yield proc
    finally:
        kill_session(proc.pid)
        proc.kill()


def as_from_a_terminal() -> None:
    """SIGHUP as a shell's child has it: the suite itself may run under nohup, whose ignored SIGHUP bench would
    inherit and rightly keep (workers.py: a pool started to outlive its terminal is not stopped by it)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def started_runs(results: Path) -> set[str]:
    """The runs whose log says they started (runner.py's first line: `run <id>: ...`)."""
    return {log.parent.name for log in results.glob("runs/*/log.txt")
            if re.search(r"^\S+ run [0-9a-f]+: ", log.read_text(), re.M)}


def wait_for(condition, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def session(sid: int) -> list[int]:
    """The live processes of session `sid` (bench's workers, fork server and resource tracker inherit it),
    from /proc: psutil is not a dependency. Zombies have ended."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] not in "ZX":
            pids.append(int(stat.parent.name))
    return pids


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def kill_session(sid: int) -> None:
    for pid in session(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
# ctrl-c in the default run; the same stop sent as each signal in `pytest -m scale` (.ci/run runs it): 15-35 s each
@pytest.mark.parametrize("how", ["ctrl-c", *(pytest.param(signal, marks=pytest.mark.scale)
                                             for signal in ("sigint-to-bench", "sigterm-to-bench", "sighup-to-bench"))])
def test_a_stop_request_starts_no_queued_run_and_exits_within_seconds(tmp_path, how):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it), SIGINT or SIGTERM to bench alone:
    the two queued runs never start, the two in flight stop, bench exits within seconds with the
    message, and nothing of it stays behind."""
    with started(tmp_path) as proc:
        wait_for(lambda: len(started_runs(tmp_path)) == 2)
        wait_for(lambda: list(tmp_path.glob("runs/*/checkpoint.pt")))  # mid-run: the runs are busy
        before = started_runs(tmp_path)
        sig = {"sigterm-to-bench": signal.SIGTERM, "sighup-to-bench": signal.SIGHUP}.get(how, signal.SIGINT)
        os.killpg(proc.pid, sig) if how == "ctrl-c" else os.kill(proc.pid, sig)
        sent = time.monotonic()
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        wait_for(lambda: not session(proc.pid), timeout=5)  # the workers and the fork server ended too
    assert took < EXIT_S, f"{took:.1f}s\n{out}"
    assert proc.returncode == 128 + sig, out
    assert "interrupted; finished runs are kept" in out and "Traceback" not in out, out
    assert started_runs(tmp_path) == before, out  # no queued run started after the signal
    assert not list(tmp_path.glob("submitit/*/inflight")), out  # no stale in-flight marker survives it
    for run in before:
        out_dir = tmp_path / "runs" / run
        assert not (out_dir / "DONE").exists() and not (out_dir / "error.txt").exists()  # interrupted, not failed


@pytest.mark.slow
# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_ctrl_c_leaves_the_runs_in_flight_to_resume_on_the_next_bench_run(tmp_path):
    with started(tmp_path) as proc:
        wait_for(lambda: list(tmp_path.glob("runs/*/checkpoint.pt")))
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    checkpointed = {path.parent for path in tmp_path.glob("runs/*/checkpoint.pt")}
    assert proc.returncode == 130 and checkpointed, out
    again = subprocess.run(bench(tmp_path), env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    runs = list(tmp_path.glob("runs/*"))
    assert len(runs) == 4 and all((run / "DONE").exists() for run in runs), again.stdout
    for run in checkpointed:
        assert re.search(r"resuming after step \d", (run / "log.txt").read_text()), run


@pytest.mark.slow
def test_a_second_ctrl_c_exits_at_once(tmp_path):
    with started(tmp_path) as proc:
        wait_for(lambda: list(tmp_path.glob("runs/*/checkpoint.pt")))
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.05)  # the first is being handled: the runs in flight are unwinding
        os.kill(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        wait_for(lambda: not session(proc.pid), timeout=5)
    assert took < EXIT_S and proc.returncode == 130, f"{took:.1f}s, status {proc.returncode}\n{out}"
    assert "Traceback" not in out, out


@pytest.mark.slow
# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_sigkill_to_bench_takes_its_workers_with_it(tmp_path):
    """The out-of-memory killer or `kill -9` on bench alone: its warm workers (and their fork server)
    do not go on running the queued runs and then idle for hours."""
    with started(tmp_path) as proc:
        wait_for(lambda: len(started_runs(tmp_path)) == 2)
        helpers = set(session(proc.pid)) - {proc.pid}
        assert len(helpers) >= 3  # two workers and the fork server, at least
        before = started_runs(tmp_path)
        proc.kill()  # SIGKILL to bench alone
        proc.wait()
        wait_for(lambda: not session(proc.pid), timeout=5)
        assert started_runs(tmp_path) == before  # nothing went on to the queued runs
    # its in-flight markers could not be removed; the next bench sweeps them before it starts its own pool
    assert list(tmp_path.glob("submitit/*/inflight/*"))
    again = subprocess.run(bench(tmp_path), env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not list(tmp_path.glob("submitit/*/inflight")) and not list(tmp_path.glob("submitit/*/owner"))


@pytest.mark.slow
def test_a_reader_gone_before_the_first_line_fails_no_run(tmp_path):
    """`bench run | true`: every run of the local pool finishes, and bench's own exit status
    (`PIPESTATUS[0]`) is 0 (`| head -1` with --cluster debug: tests/test_closed_stdout.py)."""
    argv = [sys.executable, "-m", "bench.cli", "run", "--grid", "smoke", "--methods", "Baseline", "K-means",
            "--backbone", "pixels", "--splits", "2-step", "--seeds", "0", "--cluster", "local",
            "--results", str(tmp_path)]
    reader = "true"
    command = f"{' '.join(argv)} | {reader}; exit ${{PIPESTATUS[0]}}"
    out = subprocess.run(["bash", "-c", command], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    runs = list(tmp_path.glob("runs/*"))
    assert len(runs) == 2 and all((run / "DONE").exists() for run in runs)
    assert not any((run / "error.txt").exists() for run in runs)


def test_the_watchdog_ends_a_worker_whose_bench_died_unreaped(tmp_path):
    """The guard that needs no parent-death signal (other systems, a fork server started from another
    thread): a process watching a parent that was SIGKILLed, and is a zombie nobody has reaped yet, ends
    within a few of its 0.5 s checks."""
    child = ("import os, sys, time; from bench.execution.lifeline import watch; watch(os.getppid()); "
             "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)")
    parent = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]]); "
              "time.sleep(60)")
    pid_file = tmp_path / "watcher.pid"
    proc = subprocess.Popen([sys.executable, "-c", parent, child, str(pid_file)], env=ENV, cwd=tmp_path)
    watcher = 0
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text(), timeout=30)
        watcher = int(pid_file.read_text())
        proc.kill()  # SIGKILL, and not reaped: a zombie until proc.wait()
        assert running(watcher)
        wait_for(lambda: not running(watcher), timeout=5)
    finally:
        proc.kill()
        proc.wait()
        if watcher and running(watcher):  # the watchdog failed: leave nothing behind
            os.kill(watcher, signal.SIGKILL)

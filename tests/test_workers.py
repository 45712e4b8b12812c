"""Warm local workers (bench/execution/workers.py): many runs per process, a run that kills its worker is
recorded as failed while the rest of the grid finishes (Ctrl-C, SIGTERM and SIGKILL: tests/test_pool_stops.py)."""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from bench.runs.rundir import DONE, ERROR, is_done, run_dir
from bench.execution.scheduler import run_specs
from bench.core.numerics import DEFAULT_THREADS
from tests.helpers import tiny_specs

QUICK = {"method.epochs": 2}


def test_a_pool_runs_many_runs_per_worker_each_on_its_own_gpu(tmp_path):
    """Two GPU slots, faked (`bench.execution.gpus`: the runs compute on the CPU here): a warm worker per slot,
    each seeing its slot's GPU alone (`CUDA_VISIBLE_DEVICES` in its runs' logs)."""
    specs = tiny_specs(methods=["Baseline", "K-means"], seeds=(0, 1, 2), **QUICK)
    outcome = run_specs(specs, tmp_path, cluster="local", gpus=["0", "1"], progress=lambda line: None)
    assert len(outcome.done) == 6 and not outcome.failed
    logs = [(run_dir(tmp_path, s) / "log.txt").read_text() for s in specs]
    placed = {re.search(r"\(CUDA_VISIBLE_DEVICES=(\w+)\), process (\d+), (\d+) thread", log).groups() for log in logs}
    pids = {pid for _, pid, _ in placed}
    assert len(pids) <= 2 < len(specs)  # two warm processes ran all six
    assert {threads for _, _, threads in placed} == {str(DEFAULT_THREADS)}  # each run its own count, not a share of the cores
    gpu_of = {pid: {gpu for gpu, p, _ in placed if p == pid} for pid in pids}
    assert all(len(held) == 1 for held in gpu_of.values())  # a worker keeps the GPU it was given
    assert len({gpu for gpu, _, _ in placed}) == len(pids) and {gpu for gpu, _, _ in placed} <= {"0", "1"}  # one each
    assert all(is_done(tmp_path, s) for s in specs)


def kill_whenever_it_runs(folder: Path, run_id: str, stop: threading.Event, kills: list[int]) -> None:
    """What the out-of-memory killer does to a run that always asks for too much: SIGKILL its worker
    every time the run is in flight."""
    while not stop.is_set():
        for marker in folder.glob(f"submitit/*/inflight/{run_id}"):
            try:
                pid = int(marker.read_text())
                os.kill(pid, signal.SIGKILL)
                kills.append(pid)
            except (OSError, ValueError):
                pass
        time.sleep(0.005)


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_a_run_that_kills_its_worker_is_recorded_as_failed_and_the_grid_finishes(tmp_path):
    specs = tiny_specs(methods=["Baseline", "K-means"], seeds=(0, 1, 2), **QUICK)
    target = specs[2]
    stop, kills = threading.Event(), []
    watcher = threading.Thread(target=kill_whenever_it_runs, args=(tmp_path, target.run_id, stop, kills), daemon=True)
    watcher.start()
    lines: list[str] = []
    try:
        outcome = run_specs(specs, tmp_path, cluster="local", max_parallel=2, progress=lines.append)
    finally:
        stop.set()
        watcher.join()
    assert kills  # the run was killed, at least once alone
    assert [s.run_id for s, _ in outcome.failed] == [target.run_id]
    assert "worker process died" in outcome.failed[0][1]
    assert sorted(s.run_id for s in outcome.done) == sorted(s.run_id for s in specs if s is not target)
    assert (run_dir(tmp_path, target) / ERROR).read_text().startswith("WorkerCrashed: ")
    assert not (run_dir(tmp_path, target) / DONE).exists()
    assert len(lines) == len(specs)  # one progress line per run, the crashed one included


@pytest.mark.parametrize("workers", ["0", "-2"])
def test_workers_must_be_positive(capsys, tmp_path, workers):
    from bench.cli import main

    code = main(["run", "--grid", "smoke", "--methods", "K-means", "--backbone", "pixels", "--workers", workers,
                 "--results", str(tmp_path)])
    assert code == 2 and f"--workers {workers}: must be an integer >= 1" in capsys.readouterr().err


def test_the_stale_in_flight_markers_of_an_ended_bench_are_swept_and_a_live_ones_kept(tmp_path):
    import os
    import subprocess

    from bench.execution.lifeline import identity
    from bench.execution.workers import OWNER, STOP, sweep_stale

    ended = subprocess.Popen(["true"])
    ended.wait()
    for name, pid, token in (("dead", ended.pid, "123"), ("live", os.getpid(), identity(os.getpid()))):
        (tmp_path / name / "inflight").mkdir(parents=True)
        (tmp_path / name / "inflight" / "abc123").write_text("4242")
        (tmp_path / name / STOP).touch()
        (tmp_path / name / OWNER).write_text(f"{pid} {token}")
    assert sweep_stale(tmp_path) == [tmp_path / "dead"]
    assert not (tmp_path / "dead" / "inflight").exists() and not (tmp_path / "dead" / STOP).exists()
    assert (tmp_path / "live" / "inflight" / "abc123").exists()  # its bench still runs: never touched

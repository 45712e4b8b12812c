"""Pull-based workers (bench/execution/pull.py, `bench worker`): claims through the run directory's lock, a run
started once however many workers ask, a killed worker's run resumed by another with the numbers of an
uninterrupted run, a failure neither retried forever nor by default. The tests of several worker processes are
system tests (`scale`: each worker imports the stack)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.execution import pull
from bench.runs.rundir import DONE, ERROR, METRICS, is_done, run_dir
from tests.helpers import tiny_specs
from tests.test_plugins import METHOD, PRESET

QUICK = {"method.epochs": 2}


def starts(results: Path, spec) -> int:
    log = run_dir(results, spec) / "log.txt"
    return log.read_text().count(f"run {spec.run_id}: ") if log.exists() else 0


def test_a_worker_runs_what_is_pending_and_leaves_failures_alone(tmp_path, monkeypatch):
    specs = tiny_specs(methods=["Baseline", "K-means"], seeds=(0, 1), **QUICK)
    failing = specs[3]
    run_dir(tmp_path, failing).mkdir(parents=True)
    (run_dir(tmp_path, failing) / ERROR).write_text("ValueError: failed in another worker\n")
    lines: list[str] = []
    done = pull.work(specs, tmp_path, say=lines.append)
    assert [s.run_id for s in done.ran] == [s.run_id for s in specs[:3]]
    assert [s.run_id for s in done.left_failed] == [failing.run_id] and starts(tmp_path, failing) == 0
    assert all(len((run_dir(tmp_path, s) / pull.ATTEMPTS).read_text().splitlines()) == 1 for s in specs[:3])
    assert sum("started" in line for line in lines) == 3
    # a second worker finds nothing to do
    assert not pull.work(specs, tmp_path, say=lines.append).ran
    # --retry-failed: a run that had failed before the worker started, once
    again = pull.work(specs, tmp_path, retry_failed=True, say=lines.append)
    assert [s.run_id for s in again.ran] == [failing.run_id] and is_done(tmp_path, failing)


def test_a_run_whose_workers_keep_dying_is_given_up(tmp_path):
    (spec,) = tiny_specs(**QUICK)
    out = run_dir(tmp_path, spec)
    out.mkdir(parents=True)
    (out / pull.ATTEMPTS).write_text("t host:1\nt host:2\n")  # two workers died running it
    done = pull.work([spec], tmp_path, max_attempts=2, say=lambda line: None)
    assert not done.ran and [s.run_id for s in done.left_failed] == [spec.run_id]
    assert (out / ERROR).read_text().startswith("WorkerCrashed: claimed 2 times by workers that did not finish it")
    assert starts(tmp_path, spec) == 0


def test_a_run_given_up_as_crashed_is_freed_by_retry_failed(tmp_path):
    """The advice the WorkerCrashed line gives holds: `--retry-failed` claims the run again, with claims of its own."""
    (spec,) = tiny_specs(**QUICK)
    out = run_dir(tmp_path, spec)
    out.mkdir(parents=True)
    (out / pull.ATTEMPTS).write_text("t host:1\nt host:2\nt host:3\n")  # three workers died running it
    assert not pull.work([spec], tmp_path, say=lambda line: None).ran
    assert "`bench worker --retry-failed` tries it again" in (out / ERROR).read_text()
    assert not pull.work([spec], tmp_path, say=lambda line: None).ran  # left alone without it
    again = pull.work([spec], tmp_path, retry_failed=True, say=lambda line: None)
    assert [s.run_id for s in again.ran] == [spec.run_id] and is_done(tmp_path, spec) and not (out / ERROR).exists()
    assert (out / pull.ATTEMPTS).read_text().splitlines()[3].endswith(" retried")


def test_a_worker_stopped_cleanly_is_not_a_crash(tmp_path, monkeypatch):
    """SIGTERM (a cluster preempting the worker) unwinds the run: that claim is not one of a worker that died, so
    a run preempted more often than --max-attempts is still resumed, not given up as WorkerCrashed."""
    from bench.execution.workers import Stopped, sigterm_stops
    from bench.methods.baseline import Baseline

    (spec,) = tiny_specs(**QUICK)
    real, stops = Baseline.learn, []

    def preempted(self, step):
        if step.index == 1 and len(stops) < pull.MAX_ATTEMPTS + 1:
            stops.append(step.index)
            os.kill(os.getpid(), signal.SIGTERM)  # as a cluster stops a job: the handler raises Stopped here
        return real(self, step)

    monkeypatch.setattr(Baseline, "learn", preempted)
    for _ in range(pull.MAX_ATTEMPTS + 1):
        with pytest.raises(Stopped), sigterm_stops():
            pull.work([spec], tmp_path, say=lambda line: None)
    out = run_dir(tmp_path, spec)
    assert not (out / ERROR).exists()
    done = pull.work([spec], tmp_path, say=lambda line: None)
    assert [s.run_id for s in done.ran] == [spec.run_id] and is_done(tmp_path, spec)
    lines = (out / pull.ATTEMPTS).read_text().splitlines()
    assert len(lines) == 2 * (pull.MAX_ATTEMPTS + 1) + 1 and sum(" stopped SIGTERM" in line for line in lines) == 4
    assert "resuming after step 0" in (out / "log.txt").read_text()  # step 1 kept through every stop


@pytest.mark.parametrize("cluster", ["debug", "local"])
def test_bench_run_says_what_it_ran_apart_from_what_workers_finished(tmp_path, capsys, monkeypatch, cluster):
    """`bench run` beside pull workers: the runs a worker finished before `bench run` reached them are not
    counted as its own."""
    from bench.cli import main
    from bench.execution import scheduler
    from bench.protocol.runner import execute
    from tests.helpers import TINY

    specs = tiny_specs(seeds=(0, 1, 2))
    real = scheduler.run_specs

    def workers_beside(pending, results, **options):  # two workers finish seeds 1 and 2 as bench run starts
        for spec in specs[1:]:
            execute(spec, results)
        return real(pending, results, **options)

    monkeypatch.setattr(scheduler, "run_specs", workers_beside)
    argv = ["run", "--grid", "smoke", "--methods", "Baseline", "--backbone", "pixels", "--splits", "2-step",
            "--seeds", "0", "1", "2", "--cluster", cluster, "--workers", "1", "--results", str(tmp_path),
            "--cfg-options", *(f"{k}={v}" for k, v in TINY.items())]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "running 3 on" in out
    assert "1 done here, 2 finished meanwhile by other processes (`bench worker` or another `bench run`" in out
    assert out.count("done elsewhere") == 2 and all(is_done(tmp_path, s) for s in specs)


def test_locks_that_do_not_hold_are_refused(tmp_path, monkeypatch):
    pull.check_locks(tmp_path)  # this machine's filesystem: exclusive flock
    monkeypatch.setattr(pull.fcntl, "flock", lambda fd, how: None)  # a filesystem that grants every lock
    with pytest.raises(BenchError, match=r"grants a second exclusive lock on a locked file, so two workers could run"):
        pull.check_locks(tmp_path)

    def refused(fd, how):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(pull.fcntl, "flock", refused)
    with pytest.raises(BenchError, match=r"refuses file locks \(No locks available\)"):
        pull.check_locks(tmp_path)


def worker(results: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.cli", "worker", "--results", str(results), "--poll", "0.3",
                             *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.mark.scale  # three processes importing the stack on two cores: about a minute
def test_three_workers_started_together_run_every_run_once(tmp_path):
    argv = ["--grid", "demo", "--seeds", "0"]
    procs = [worker(tmp_path, *argv) for _ in range(3)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    started = [m for out in outputs for m in re.findall(r"\] started (\w+) ", out)]
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(runs) == 8 and sorted(started) == runs  # each run started once, by one of the three
    for run in runs:
        assert (tmp_path / "runs" / run / DONE).exists()
        assert (tmp_path / "runs" / run / "log.txt").read_text().count(f"run {run}: ") == 1
    assert sum(bool(re.search(r"worker: ran [1-9]", out)) for out in outputs) >= 2  # the work was shared


SLOW_GRID = '''methods = ["Slow means"]
datasets = ["synthetic"]
splits = ["5-step"]
seeds = [0, 1]
backbone = "pixels"
dataset_options = dict(synthetic=dict(num_classes=10, image_size=4, train_per_class=10, test_per_class=5))
'''


def slow_plugin(folder: Path) -> Path:
    """A method that takes a second per step after the first: time to kill its worker mid-run."""
    (folder / "presets").mkdir(parents=True)
    (folder / "grids").mkdir()
    code = METHOD.format(name="Slow means", preset="slow_means").replace(
        "    def learn(self, step: Step) -> None:\n",
        "    def learn(self, step: Step) -> None:\n        import time\n        time.sleep(1.0 if step.index else 0)\n")
    (folder / "slow_means.py").write_text(code)
    (folder / "presets" / "slow_means.py").write_text(PRESET.format(max_iter=20))
    (folder / "grids" / "slow_grid.py").write_text(SLOW_GRID)
    return folder


@pytest.mark.scale
def test_a_worker_killed_mid_run_leaves_its_run_to_another(tmp_path):
    plugin = slow_plugin(tmp_path / "plugin")
    argv = ["--grid", "slow_grid", "--include", str(plugin)]
    results = tmp_path / "shared"
    procs = [worker(results, *argv) for _ in range(2)]
    deadline = time.monotonic() + 300
    runs = results / "runs"
    while not [c for c in runs.glob("*/checkpoint.pt")] and time.monotonic() < deadline:
        time.sleep(0.05)
    (checkpointed,) = [c.parent for c in runs.glob("*/checkpoint.pt")][:1]
    holder = int((checkpointed / pull.ATTEMPTS).read_text().split()[-1].split(":")[1])
    os.kill(holder, signal.SIGKILL)  # mid-run: its first step checkpointed, the next under way
    outputs = {p.pid: p.communicate(timeout=600)[0] for p in procs}
    survivor = next(p for p in procs if p.pid != holder)
    assert survivor.returncode == 0, outputs[survivor.pid]
    assert (checkpointed / DONE).exists() and re.search(r"resuming after step \d", (checkpointed / "log.txt").read_text())
    claims = (checkpointed / pull.ATTEMPTS).read_text().splitlines()
    assert [c.split(":")[-1] for c in claims] == [str(holder), str(survivor.pid)]
    # the same numbers as the run never interrupted, in a results folder of its own
    alone = worker(tmp_path / "alone", *argv)
    assert alone.wait(timeout=600) == 0
    cols = ["step", "group", "flavour", "metric", "value"]
    frames = [pd.read_parquet(folder / METRICS)[cols].sort_values(cols[:-1]).reset_index(drop=True)
              for folder in (checkpointed, tmp_path / "alone" / "runs" / checkpointed.name)]
    pd.testing.assert_frame_equal(*frames)


def test_bench_status_shows_a_run_a_worker_claimed_as_running(tmp_path):
    from bench.execution import slurm

    specs = tiny_specs(seeds=(0, 1))
    out = run_dir(tmp_path, specs[0])
    out.mkdir(parents=True)
    (out / pull.ATTEMPTS).write_text("t host:1\n")
    states = slurm.status(tmp_path, specs).states
    assert states["running"] == [specs[0]] and states["unsubmitted"] == [specs[1]]


def test_bench_worker_refuses_bad_input_in_one_line_before_claiming_anything(tmp_path, capsys):
    from bench.cli import main

    for argv, said in ((["--tracker", "tensorbord"], "unknown tracker 'tensorbord'"),
                       (["--max-attempts", "0"], "--max-attempts 0: must be an integer >= 1"),
                       (["--methods", "nope"], "unknown method 'nope'")):
        assert main(["worker", "--grid", "demo", "--results", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, err
    assert not (tmp_path / "runs").exists()

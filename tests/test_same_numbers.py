"""Same run, same numbers: a run's results do not depend on where, beside what, or after which
interruption it ran (bench/core/numerics.py). Its CPU compute threads are its own (`--threads`, default 1),
set by the runner on every path, stored in its checkpoint and resumed with; SLURM jobs size what still
follows the machine from SLURM_CPUS_PER_TASK."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch

import bench.runs.checkpoint as checkpoint
from bench.core import numerics
from bench.cli import main
from bench.protocol.runner import execute
from bench.runs.rundir import METRICS, run_dir
from bench.config.presets import load_preset
from bench.methods.baseline import Baseline
from bench.methods.ewc import EwC
from tests.helpers import TINY, killed_then_resumed, tiny_specs
from tests.test_incremental import TINY_VIT, tiny_vit_specs
from tests.test_pins import digest

KEYS = ["step", "group", "flavour", "metric"]


@pytest.fixture(autouse=True)
def ambient_threads():
    """The test process's own thread count back after each test, whatever a test set."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _metrics(out: Path) -> pd.DataFrame:
    frame = pd.read_parquet(out / METRICS)
    return frame.sort_values(KEYS)[KEYS + ["value"]].reset_index(drop=True)


def _debug_argv(results: Path) -> list[str]:
    """`bench run --cluster debug` for the run `tiny_vit_specs("EwC")` describes."""
    known = load_preset("EwC", "equations")[0]
    options = {k: v for k, v in {**TINY, **TINY_VIT}.items() if not k.startswith("method.") or k[7:] in known}
    return ["run", "--grid", "smoke", "--methods", "EwC:equations", "--datasets", "synthetic", "--splits", "2-step",
            "--seeds", "0", "--backbone", "timm:vit_tiny_patch16_224", "--cluster", "debug", "--results",
            str(results), "--cfg-options", *(f"{k}={v}" for k, v in options.items())]


def test_a_trained_block_run_has_the_same_numbers_wherever_it_ran(tmp_path, monkeypatch, capsys):
    """EwC on the tiny ViT: alone (2 threads in the process), as one of a pair in the pool (1 thread
    each), through `bench run --cluster debug`, and killed after step 1 then resumed in a process with
    another thread count, asking for another: the same metrics and the same trained state."""
    (spec,) = tiny_vit_specs("EwC")
    states: dict[str, list[dict[str, float]]] = {}
    target = [""]
    real_save = checkpoint.save_checkpoint
    monkeypatch.setattr(checkpoint, "save_checkpoint",
                        lambda path, state: states.setdefault(target[0], []).append(digest(state["method"]))
                        or real_save(path, state))
    outs = {}
    for name, ambient in (("alone", 2), ("in a pair", 1)):
        target[0] = name
        torch.set_num_threads(ambient)
        outs[name] = execute(spec, tmp_path / name)
        assert torch.get_num_threads() == ambient  # the caller's count back after the run

    target[0] = "debug"
    torch.set_num_threads(2)
    assert main(_debug_argv(tmp_path / "debug")) == 0, capsys.readouterr().err
    outs["debug"] = run_dir(tmp_path / "debug", spec)  # the same run id

    target[0] = "resumed"
    torch.set_num_threads(1)
    outs["resumed"] = killed_then_resumed(spec, tmp_path / "resumed", EwC, 1, monkeypatch,
                                          between=lambda: torch.set_num_threads(2),
                                          resumed_as=dataclasses.replace(spec, location={**spec.location, "threads": 2}))
    log = (outs["resumed"] / "log.txt").read_text()
    assert "resuming with 1 thread(s), the count its finished steps ran with, not the 2 asked for" in log

    for name, out in outs.items():
        assert "1 thread(s)" in (out / "log.txt").read_text(), name
        pd.testing.assert_frame_equal(_metrics(out), _metrics(outs["alone"]), obj=name)
        assert states[name][-1] == states["alone"][-1], name  # bit-identical trained state, not close


def test_the_threads_asked_for_are_what_the_run_computes_with(tmp_path, monkeypatch):
    """`--threads 2` (the location's `threads`): every step learns with 2 threads in a process set to 1,
    the log and checkpoint say 2, and the process has its 1 back afterwards."""
    (spec,) = tiny_specs(methods=["Baseline"], **{"method.epochs": 1})
    spec = dataclasses.replace(spec, location={**spec.location, "threads": 2})
    seen, stored = [], []
    real_learn, real_save = Baseline.learn, checkpoint.save_checkpoint
    monkeypatch.setattr(Baseline, "learn", lambda self, step: seen.append(torch.get_num_threads()) or real_learn(self, step))
    monkeypatch.setattr(checkpoint, "save_checkpoint", lambda path, state: stored.append(state["threads"]) or real_save(path, state))
    torch.set_num_threads(1)
    out = execute(spec, tmp_path)
    assert seen == [2, 2] and stored == [2, 2]
    assert "2 thread(s)" in (out / "log.txt").read_text()
    assert torch.get_num_threads() == 1


def test_a_slurm_job_sizes_from_its_cpus_per_task(monkeypatch):
    """A node that does not bind jobs to cores shows each job every core: SLURM_CPUS_PER_TASK is what
    the job was given."""
    monkeypatch.setattr(numerics.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "4")
    assert numerics.available_cores() == 4
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "²")  # a digit to str.isdigit, not to int(): not a count
    assert numerics.available_cores() == 64
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert numerics.available_cores() == 64  # outside SLURM: the affinity


def test_a_slurm_job_computes_with_the_runs_threads_not_the_nodes_cores(tmp_path, monkeypatch):
    """The job's compute threads are the run's (default 1), whatever the node shows or SLURM gives."""
    from bench.execution.slurm import SlurmRun

    monkeypatch.setattr(numerics.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
    (spec,) = tiny_specs(methods=["Baseline"], **{"method.epochs": 1})
    seen = []
    real_learn = Baseline.learn
    monkeypatch.setattr(Baseline, "learn", lambda self, step: seen.append(torch.get_num_threads()) or real_learn(self, step))
    assert SlurmRun()(spec.to_json(), str(tmp_path)) == "done"
    assert seen == [numerics.DEFAULT_THREADS] * 2


def test_every_thread_pool_a_run_can_reach_is_limited_even_where_it_loads_later():
    """threadpoolctl limits only the pools already loaded, and K-means' lazy import loads scikit-learn's
    OpenMP and scipy's OpenBLAS after the runner has set the threads: in a fresh process (as a warm
    worker's first run), every pool must still be at the run's count once `fix` has run."""
    import ast
    import subprocess
    import sys

    code = ("import torch, threadpoolctl; from bench.core import numerics; numerics.fix(1, torch.device('cpu')); "
            "import sklearn.cluster, scipy.linalg; "
            "print(sorted({(p['internal_api'], p['num_threads']) for p in threadpoolctl.threadpool_info()}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    pools = ast.literal_eval(out.strip().splitlines()[-1])
    assert pools and all(threads == 1 for _, threads in pools), pools

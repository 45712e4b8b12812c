"""The runner: what a run directory holds, resume after a kill, and the failure path."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench.runner import CHECKPOINT, DONE, ERROR, METRICS, execute, run_dir
from bench.scheduler import run_specs
from methods.baseline import Baseline
from registries import METHODS
from tests.helpers import tiny_specs

SCHEMA = ["run_id", "method", "preset", "label", "dataset", "split", "n_steps", "backbone", "seed",
          "primary_flavour", "step", "group", "flavour", "metric", "value", "bench_version", "git_commit", "host",
          "device", "slurm_job_id", "started_at", "ended_at", "duration_s"]


def test_a_finished_run_directory(tmp_path):
    (spec,) = tiny_specs()
    out = execute(spec, tmp_path)
    assert out == run_dir(tmp_path, spec)
    for name in ("spec.json", "config.py", "log.txt", METRICS, DONE):
        assert (out / name).is_file(), name
    assert not (out / CHECKPOINT).exists() and not (out / ERROR).exists()
    frame = pd.read_parquet(out / METRICS)
    assert list(frame.columns) == SCHEMA
    assert set(frame["step"]) == {0, 1}
    summary = frame[frame["group"] == "summary"]
    assert set(summary["metric"]) == {"A", "A_sample", "F", "F_max"}
    assert set(frame["run_id"]) == {spec.run_id}
    assert "epochs=5" in (out / "config.py").read_text()  # the smoke grid's setting


def metrics(out: Path) -> pd.DataFrame:
    frame = pd.read_parquet(out / METRICS)
    return frame[["step", "group", "flavour", "metric", "value"]].sort_values(["step", "group", "flavour", "metric"])


KILL_SCRIPT = """
import sys
from pathlib import Path
from bench.spec import RunSpec
from bench.runner import execute
execute(RunSpec.from_json(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
"""


@pytest.mark.slow
def test_resume_after_a_kill_gives_the_uninterrupted_metrics(tmp_path):
    (spec,) = tiny_specs(splits=["5-step"], **{"dataset.num_classes": 10, "method.epochs": 150})
    reference = metrics(execute(spec, tmp_path / "uninterrupted"))

    killed = tmp_path / "killed"
    (tmp_path / "spec.json").write_text(spec.to_json())
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(tmp_path / "spec.json"), str(killed)])
    checkpoint = run_dir(killed, spec) / CHECKPOINT
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert checkpoint.exists(), "the run ended before its first checkpoint; make it slower"
    assert not (run_dir(killed, spec) / DONE).exists()
    stopped_after = torch.load(checkpoint, weights_only=False)["step"]
    assert stopped_after < spec.n_steps - 1

    resumed = metrics(execute(spec, killed))
    assert f"resuming after step {stopped_after}" in (run_dir(killed, spec) / "log.txt").read_text()
    pd.testing.assert_frame_equal(resumed.reset_index(drop=True), reference.reset_index(drop=True))


class Exploding(Baseline):
    """Baseline that fails at its second step."""

    def learn(self, step):
        if step.index == 1:
            raise RuntimeError("boom at step 1")
        super().learn(step)


@pytest.fixture
def exploding():
    METHODS.register_module(name="_Exploding", module=Exploding, force=True)
    yield
    METHODS.module_dict.pop("_Exploding")


def test_a_failing_run_records_its_error_and_the_grid_goes_on(tmp_path, exploding):
    specs = tiny_specs(methods=["_Exploding", "Baseline"])
    outcome = run_specs(specs, tmp_path, cluster="debug", progress=lambda line: None)
    assert [s.method for s in outcome.done] == ["Baseline"]
    (failed, reason), = outcome.failed
    assert failed.method == "_Exploding" and "boom at step 1" in reason
    out = run_dir(tmp_path, failed)
    error = (out / ERROR).read_text()
    assert "RuntimeError: boom at step 1" in error and "Traceback" in error
    assert not (out / DONE).exists()
    assert (out / CHECKPOINT).exists()  # step 0's work is kept for the next attempt

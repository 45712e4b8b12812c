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

from bench.protocol.runner import execute

from bench.runs.rundir import CHECKPOINT, DONE, ERROR, METRICS, run_dir
from bench.execution.scheduler import run_specs
from bench.methods.baseline import Baseline
from bench.registries import METHODS
from tests.helpers import tiny_specs

SCHEMA = ["run_id", "method", "preset", "label", "dataset", "split", "n_steps", "backbone", "seed",
          "reported_A", "reported_F", "features", "mapping_images", "step", "group", "flavour", "metric", "value", "bench_version", "git_commit", "host",
          "device", "gpu", "slurm_job_id", "started_at", "ended_at", "duration_s", "torch_version", "torchvision_version",
          "timm_version", "numpy_version", "cuda_version", "cudnn_version", "weights_sha256", "tail_precision",
          "threads", "method_sha256"]


def test_a_finished_run_directory(tmp_path):
    (spec,) = tiny_specs()
    out = execute(spec, tmp_path)
    assert out == run_dir(tmp_path, spec)
    for name in ("spec.json", "config.py", "log.txt", METRICS, "predictions.npz", DONE):
        assert (out / name).is_file(), name
    assert not (out / CHECKPOINT).exists() and not (out / ERROR).exists()
    frame = pd.read_parquet(out / METRICS)
    assert list(frame.columns) == SCHEMA
    assert set(frame["step"]) == {0, 1}
    summary = frame[frame["group"] == "summary"]
    assert set(summary["metric"]) == {"A", "A_sample", "F", "F_max", "All", "Old", "New"}
    assert set(summary["flavour"]) == {"wo", "w", "wo_refit", "gcd", "gcd_sep"}
    assert set(frame["run_id"]) == {spec.run_id}
    assert "epochs=5" in (out / "config.py").read_text()  # the smoke grid's setting


def metrics(out: Path) -> pd.DataFrame:
    frame = pd.read_parquet(out / METRICS)
    return frame[["step", "group", "flavour", "metric", "value"]].sort_values(["step", "group", "flavour", "metric"])


KILL_SCRIPT = """
import sys
from pathlib import Path
from bench.config.spec import RunSpec
from bench.protocol.runner import execute
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
    stopped_after = torch.load(checkpoint, weights_only=True)["step"]
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


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_two_overlapping_bench_runs_never_run_a_run_twice(tmp_path):
    """Two `bench run` processes on overlapping selections, started together: every run is
    executed exactly once (the per-run lock), and both commands end cleanly."""
    common = [sys.executable, "-m", "bench.cli", "run", "--grid", "smoke", "--methods", "Baseline", "K-means",
              "--backbone", "pixels", "--cluster", "local", "--results",
              str(tmp_path), "--cfg-options", "features.views=2", "dataset.num_classes=6", "dataset.image_size=8",
              "method.epochs=200"]
    first = subprocess.Popen(common + ["--seeds", "0", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    second = subprocess.Popen(common + ["--seeds", "1", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = [p.communicate(timeout=300)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 6  # 2 methods × seeds {0, 1, 2}
    for run in runs:
        starts = [line for line in (run / "log.txt").read_text().splitlines() if f" run {run.name}: " in line]
        assert len(starts) == 1, (run, starts)
        assert (run / DONE).exists()

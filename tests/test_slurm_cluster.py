"""`bench` against a real SLURM cluster (slurm/start-local.sh starts one on a CI machine).

Skipped, with the reason, where no cluster answers. Everything goes through the `bench` command:
a grid as job arrays, a failing job whose error reaches `bench status`, cancel, a requeue that
resumes, 100 runs in one array, and plugins (a folder and an installed package) in the jobs.
"""
from __future__ import annotations

import shutil
import subprocess
import time

import pandas as pd
import pytest

from bench.cli import main
from bench.protocol.runner import execute
from bench.runs.rundir import CHECKPOINT, METRICS, run_dir
from bench.execution.slurm import latest_jobs
from bench.config.grids import load_grid
from tests.helpers import tiny_specs
from tests.test_plugins import GRID, ROOT, bench_in_subprocess, install_plugin_package, run_config, write_plugin


def _cluster_up() -> str:
    if shutil.which("sinfo") is None:
        return "no SLURM client on PATH (start one with slurm/start-local.sh)"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as err:
        return f"sinfo failed: {err}"
    if out.returncode != 0 or not {"idle", "mixed", "allocated"} & set(out.stdout.split()):
        return f"no SLURM node is up: {out.stderr.strip() or out.stdout.strip()}"
    return ""


REASON = _cluster_up()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(bool(REASON), reason=REASON)]

TINY = ["features.views=2", "dataset.num_classes=6", "dataset.image_size=8",
        "dataset.train_per_class=10", "dataset.test_per_class=5"]
SLOW = ["method.epochs=3000", "features.views=2", "dataset.num_classes=10", "dataset.image_size=8",
        "dataset.train_per_class=30", "dataset.test_per_class=5"]


def bench(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


@pytest.mark.scale  # 40 s on two cores, every method of the smoke grid through SLURM: .ci/run's `pytest -m scale` step
def test_smoke_grid_runs_as_a_job_array(capsys, tmp_path):
    code, out = bench(capsys, "run", "--grid", "smoke", "--cluster", "slurm", "--profile", "local", "--wait",
                      "--results", str(tmp_path), "--cfg-options", *TINY)
    n = len(load_grid("smoke").blocks[0].methods)  # every method of the smoke grid, ResTune and FRoST included
    assert code == 0, out
    assert f"submitted {n} runs in 1 job array(s)" in out  # the local profile gives all the same resources
    code, out = bench(capsys, "status", "--grid", "smoke", "--results", str(tmp_path), "--cfg-options", *TINY)
    assert f"{n} done" in out
    code, out = bench(capsys, "run", "--grid", "smoke", "--cluster", "slurm", "--profile", "local",
                      "--results", str(tmp_path), "--cfg-options", *TINY)
    assert f"all {n} runs already done, nothing to submit" in out


def test_a_failing_job_reaches_status_with_its_error(capsys, tmp_path):
    # a weights file that exists but is not one is refused before anything is submitted (one line)
    (tmp_path / "w.pth").write_bytes(b"not a checkpoint")
    refused = ["--grid", "smoke", "--methods", "K-means", "--backbone", "timm:vit_tiny_patch16_224",
               "--results", str(tmp_path / "refused"), "--cfg-options", *TINY, f"backbone.pretrained={tmp_path / 'w.pth'}"]
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", "--wait", *refused)
    assert code == 2 and not (tmp_path / "refused" / "runs").exists()
    # a plugin method that fails as it learns: its job fails, and its error reaches `bench status`
    plugins = write_plugin(tmp_path / "plugins", name="Boom", preset="boom")
    method = plugins / "toy_method.py"
    method.write_text(method.read_text().replace("    def learn(self, step: Step) -> None:\n",
                                                 "    def learn(self, step: Step) -> None:\n"
                                                 "        raise RuntimeError('planted failure')\n"))
    argv = ["--include", str(plugins), "--grid", "smoke", "--methods", "Boom", "--backbone", "pixels",
            "--results", str(tmp_path), "--cfg-options", *TINY]
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", "--wait", *argv)
    assert code == 1, out
    code, out = bench(capsys, "status", *argv)
    assert "1 failed" in out
    assert "RuntimeError: planted failure" in out and "log.txt" in out
    failed_dir = next((tmp_path / "runs").iterdir())
    assert "Traceback" in (failed_dir / "error.txt").read_text()

    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", "--retry-failed", "--dry-run", *argv)
    assert "1 would be submitted" in out


def test_cancel_stops_queued_and_running_jobs(capsys, tmp_path):
    argv = ["--grid", "smoke", "--methods", "Baseline", "--splits", "5-step", "--results", str(tmp_path),
            "--cfg-options", *SLOW, "method.epochs=100000"]
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", *argv)
    assert code == 0
    wait_for(lambda: "1 running" in bench(capsys, "status", *argv)[1], 120, "the job to start")
    code, out = bench(capsys, "cancel", *argv)
    assert "cancelled 1 job(s)" in out
    wait_for(lambda: "1 cancelled" in bench(capsys, "status", *argv)[1], 120, "sacct to report CANCELLED")


@pytest.mark.scale  # 45-60 s of a real requeue on two cores: .ci/run's `pytest -m scale` step runs it
def test_a_requeued_job_resumes_and_ends_with_the_uninterrupted_metrics(capsys, tmp_path):
    import submitit

    argv = ["--grid", "smoke", "--methods", "Baseline", "--splits", "5-step", "--backbone", "pixels",
            "--results", str(tmp_path / "slurm"), "--cfg-options", *SLOW]
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", *argv)
    assert code == 0, out
    (spec,) = tiny_specs(methods=["Baseline"], splits=["5-step"],
                         **{k: eval(v) for k, v in (o.split("=") for o in SLOW)})
    out_dir = run_dir(tmp_path / "slurm", spec)
    wait_for(lambda: (out_dir / CHECKPOINT).exists(), 300, "the first checkpoint")
    job = latest_jobs(tmp_path / "slurm")[spec.run_id]
    signalled = time.monotonic()
    # USR2 alone, as SLURM sends it before a time limit. (The simulated preemption, SIGTERM then USR2
    # from two scancel calls, can deliver SIGTERM after USR2 and kill submitit's `scontrol requeue`.)
    submitit.SlurmJob(folder=job["folder"], job_id=job["job_id"])._interrupt(timeout=True)
    wait_for(lambda: "resuming after step" in (out_dir / "log.txt").read_text(), 300, "the requeued job to resume")
    print(f"\nrequeue: signal to resumed run {time.monotonic() - signalled:.1f}s")
    wait_for(lambda: (out_dir / "DONE").exists(), 600, "the requeued run to finish")

    reference = execute(spec, tmp_path / "reference")
    cols = ["step", "group", "flavour", "metric", "value"]
    a = pd.read_parquet(out_dir / METRICS)[cols].sort_values(cols[:-1]).reset_index(drop=True)
    b = pd.read_parquet(reference / METRICS)[cols].sort_values(cols[:-1]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
@pytest.mark.scale  # 140 s on two cores: .ci/run's `pytest -m scale` step runs it
def test_a_hundred_runs_in_one_array(capsys, tmp_path):
    # K-means on the pixel backbone: each job imports and builds no timm model, so the test measures the
    # array (100 runs, one submission), not 100 model builds on two cores
    argv = ["--grid", "smoke", "--methods", "K-means", "--backbone", "pixels", "--seeds", *map(str, range(100)),
            "--results", str(tmp_path), "--cfg-options", *TINY]
    start = time.monotonic()
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", *argv)
    assert code == 0 and "submitted 100 runs in 1 job array(s)" in out, out
    submitted = time.monotonic() - start
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", "--wait", *argv)
    assert "(100 already queued or running)" in out or "all 100 runs already done" in out
    wait_for(lambda: "100 done" in bench(capsys, "status", *argv)[1], 900, "all 100 runs")
    print(f"\n100-run array: submitted in {submitted:.1f}s, all done after {time.monotonic() - start:.1f}s")
    assert len(list((tmp_path / "runs").iterdir())) == 100


def test_a_profile_the_cluster_cannot_satisfy_is_one_line(capsys, tmp_path):
    """sbatch refuses 100 TB of memory: its reason, the profile's resources and how to change them."""
    code = main(["run", "--grid", "smoke", "--cluster", "slurm", "--profile", "local", "--results", str(tmp_path),
                 "--slurm-options", "mem_gb=100000000", "--cfg-options", *TINY])
    _, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("bench: error: sbatch refused the job array: ") and "profile 'local' asked for" in line
    assert "mem_gb=100000000" in line and "--slurm-options" in line
    assert not latest_jobs(tmp_path)  # nothing recorded as submitted


def test_plugins_from_a_folder_and_an_installed_package_run_as_jobs(tmp_path):
    """A grid of two plugin methods, one from `--include DIR` and one from an installed package's entry
    point, as one job array: each job imports both (the folder carried by the job, the entry point from
    the job's environment) and runs with its own plugin's preset."""
    folder = write_plugin(tmp_path / "plugin")  # "Toy means", preset max_iter=20
    (folder / "grids" / "both.py").write_text(GRID.format(name="Toy means").replace(
        "methods = ['Toy means']", "methods = ['Toy means', 'Toy entry']"))
    site = install_plugin_package(tmp_path)  # "Toy entry", preset max_iter=5
    results = tmp_path / "results"
    code = (f"from bench.cli import main; raise SystemExit(main(['run', '--grid', 'both', '--include', {str(folder)!r}, "
            f"'--cluster', 'slurm', '--profile', 'local', '--wait', '--results', {str(results)!r}]))")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg-cache"), "PYTHONPATH": f"{site}:{ROOT}"}
    out = bench_in_subprocess(code, env, tmp_path)
    assert len(list(results.glob("runs/*/DONE"))) == 2, out
    assert run_config(results, "Toy means")["method"]["max_iter"] == 20
    assert run_config(results, "Toy entry")["method"]["max_iter"] == 5


@pytest.mark.slow
@pytest.mark.scale  # the demo grid's first seed twice, packed through SLURM and on the local pool: about a minute
def test_the_demo_grid_packed_runs_in_a_few_array_tasks_with_the_unpacked_numbers(capsys, tmp_path):
    argv = ["--grid", "demo", "--seeds", "0", "--results", str(tmp_path / "packed")]
    code, out = bench(capsys, "run", "--cluster", "slurm", "--profile", "local", "--pack", "3", "--wait", *argv)
    assert code == 0, out
    assert "submitted 8 runs in 1 job array(s)" in out and "in 3 packed task(s)" in out, out
    jobs = latest_jobs(tmp_path / "packed")
    assert len({j["job_id"] for j in jobs.values()}) == 3 and all(j["packed"] for j in jobs.values())
    code, out = bench(capsys, "status", *argv)
    assert "8 done" in out
    code, out = bench(capsys, "run", "--seeds", "0", "--results", str(tmp_path / "unpacked"))  # the local pool
    assert code == 0, out
    cols = ["step", "group", "flavour", "metric", "value"]
    for run in sorted((tmp_path / "packed" / "runs").iterdir()):
        a, b = (pd.read_parquet(root / "runs" / run.name / METRICS)[cols].sort_values(cols[:-1]).reset_index(drop=True)
                for root in (tmp_path / "packed", tmp_path / "unpacked"))
        pd.testing.assert_frame_equal(a, b)

"""Packed SLURM jobs (bench/execution/packing.py): several runs per array task, planned N at a time or by the cost
model; a task run in this process resumes what it had not finished after a kill and does not retry a failure;
`bench status` and `bench cancel` speak of runs. The packed grid on a real cluster: tests/test_slurm_cluster.py."""
from __future__ import annotations

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.execution import cost, packing, slurm
from bench.execution.packing import SlurmPack, pack_runs
from bench.registries import METHODS
from bench.runs.rundir import DONE, ERROR, METRICS, run_dir
from tests.helpers import tiny_specs

QUICK = {"method.epochs": 2}


def test_n_runs_per_task_keep_a_datasets_runs_together():
    specs = tiny_specs(methods=["Baseline", "K-means"], seeds=(0, 1, 2, 3, 4))
    tasks = pack_runs(specs, 4)
    assert [len(t) for t in tasks] == [4, 4, 2] and sorted(s.run_id for t in tasks for s in t) == sorted(
        s.run_id for s in specs)
    with pytest.raises(BenchError, match="--pack 0: give the runs per array task"):
        packing.parse_pack("0")
    assert packing.parse_pack("auto") == "auto" and packing.parse_pack("7") == 7


def test_auto_packs_fill_the_target_length_by_the_cost_model():
    frozen = tiny_specs(methods=["Baseline"], seeds=range(10))  # the feature bank's floor each: 60 s
    assert [len(t) for t in pack_runs(frozen, "auto", hours=0.05)] == [3, 3, 3, 1]  # 180 s per task
    # the profile's time limit caps the target: 80% of 2 minutes holds one run of 60 s
    assert [len(t) for t in pack_runs(frozen, "auto", hours=4, timeout_min=2)] == [1] * 10
    # a run on tokens is priced by its trained blocks' epochs; one longer than the target is a task of its own
    (ewc,) = tiny_specs(methods=["EwC"], backbone="timm:vit_tiny_patch16_224")
    ewc = ewc.__class__(**{**ewc.__dict__, "dataset": "cifar100"})
    assert cost.run_seconds(ewc) > 2 * cost.FLOOR_S
    tasks = pack_runs([ewc, *frozen[:2]], "auto", hours=2 * cost.FLOOR_S / 3600)
    assert sorted(len(t) for t in tasks) == [1, 2]


def test_the_cost_model_prices_the_papers_runs():
    """One EwC run on CIFAR-100, 2-step, ViT-B/16, by hand: 100 epochs × 2 views × 50,000 images through one
    block, plus 100 × 2 × 50,000 × 3 (a trained block's forward and backward), no extra term, at the model's
    full (12-block) forwards a second."""
    (spec,) = tiny_specs(methods=["EwC"], backbone="timm:vit_tiny_patch16_224")
    paper = spec.__class__(**{**spec.__dict__, "dataset": "cifar100", "backbone": "dino-vitb16"})
    units = 100 * 2 * 50000 * 1 + 100 * 2 * 50000 * 3
    assert cost.run_seconds(paper) == pytest.approx(cost.FLOOR_S + units / (cost.THROUGHPUT * 12), rel=1e-9)
    assert cost.run_seconds(paper, throughput=1000.0) == pytest.approx(cost.FLOOR_S + units / 12000, rel=1e-9)
    assert cost.run_seconds(spec.__class__(**{**spec.__dict__, "dataset": "nowhere"})) is None


def pack_of(specs, results, pack=None):
    pack = pack or SlurmPack()
    return pack, lambda: pack([s.to_json() for s in specs], str(results))


def starts(results, spec) -> int:
    log = run_dir(results, spec) / "log.txt"
    return log.read_text().count(f"run {spec.run_id}: ") if log.exists() else 0


def test_a_killed_task_resumes_only_what_it_had_not_finished(tmp_path, monkeypatch):
    from bench.protocol import runner

    specs = tiny_specs(methods=["Baseline"], splits=["5-step"], seeds=(0, 1, 2), **QUICK, **{"dataset.num_classes": 10})
    baseline, real_learn, real_execute = METHODS.get("Baseline"), METHODS.get("Baseline").learn, runner.execute
    running = [None]

    def execute(spec, *args, **kwargs):
        running[0] = spec.run_id
        return real_execute(spec, *args, **kwargs)

    def learn(self, step):  # the second run is killed as its third step starts, and its task with it
        if running[0] == specs[1].run_id and step.index == 2:
            raise KeyboardInterrupt("the task's time is up")
        return real_learn(self, step)

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(baseline, "learn", learn)
    _, task = pack_of(specs, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        task()
    assert [(run_dir(tmp_path, s) / DONE).exists() for s in specs] == [True, False, False]
    monkeypatch.setattr(baseline, "learn", real_learn)
    _, requeued = pack_of(specs, tmp_path)  # a requeue: the same task, the same runs
    assert requeued() == "done"
    assert all((run_dir(tmp_path, s) / DONE).exists() for s in specs)
    assert [starts(tmp_path, s) for s in specs] == [1, 2, 1]  # the first not again, the second resumed
    assert "resuming after step 1" in (run_dir(tmp_path, specs[1]) / "log.txt").read_text()
    # and with the numbers of a run never interrupted
    reference = real_execute(specs[1], tmp_path / "reference")
    cols = ["step", "group", "flavour", "metric", "value"]
    a = pd.read_parquet(run_dir(tmp_path, specs[1]) / METRICS)[cols].sort_values(cols[:-1]).reset_index(drop=True)
    b = pd.read_parquet(reference / METRICS)[cols].sort_values(cols[:-1]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_a_failing_run_does_not_stop_its_task_and_a_requeue_does_not_retry_it(tmp_path, monkeypatch):
    specs = tiny_specs(methods=["Baseline", "K-means"], **QUICK)
    kmeans = METHODS.get("K-means")
    monkeypatch.setattr(kmeans, "learn", lambda self, step: (_ for _ in ()).throw(ValueError("broken on purpose")))
    pack, task = pack_of(specs, tmp_path)
    with pytest.raises(RuntimeError, match="1 of the task's 2 runs failed"):
        task()
    assert (run_dir(tmp_path, specs[0]) / DONE).exists()
    assert "broken on purpose" in (run_dir(tmp_path, specs[1]) / ERROR).read_text()
    assert pack.failed == [specs[1].run_id]
    with pytest.raises(RuntimeError):
        pack([s.to_json() for s in specs], str(tmp_path))  # the requeued task (self pickled with `failed`)
    assert starts(tmp_path, specs[1]) == 1


def test_status_and_cancel_speak_of_the_runs_of_a_packed_task(tmp_path, monkeypatch):
    specs = tiny_specs(methods=["Baseline"], seeds=(0, 1, 2))
    slurm.record(tmp_path, ({"run_id": s.run_id, "job_id": "7_0", "folder": "f", "grid": "smoke", "packed": True}
                            for s in specs))
    run_dir(tmp_path, specs[0]).mkdir(parents=True)
    (run_dir(tmp_path, specs[0]) / DONE).write_text("")  # finished: done whatever its task does
    (tmp_path / "submitit" / "packs").mkdir(parents=True)
    (tmp_path / "submitit" / "packs" / "7_0.current").write_text(specs[1].run_id)
    monkeypatch.setattr(slurm, "sacct_states", lambda ids: {"7_0": "RUNNING"})
    monkeypatch.setattr(slurm, "is_done", lambda results, spec: (run_dir(results, spec) / DONE).exists())
    states = {k: [s.run_id for s in v] for k, v in slurm.status(tmp_path, specs).states.items()}
    assert states == {"done": [specs[0].run_id], "running": [specs[1].run_id], "pending": [specs[2].run_id]}

    cancelled = []
    monkeypatch.setattr(slurm.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(slurm.subprocess, "run", lambda argv, **kw: cancelled.append(argv))
    # one of the task's two unfinished runs: taken out of it, the task goes on with the other
    assert slurm.cancel(tmp_path, specs[2:]) == [] and cancelled == []
    assert slurm.status(tmp_path, specs).counts()["cancelled"] == 1
    assert packing.skipped(tmp_path, "7_0") == {specs[2].run_id}
    # both: the task itself is cancelled
    assert slurm.cancel(tmp_path, specs[1:2]) == ["7_0"] and cancelled == [["scancel", "7_0"]]

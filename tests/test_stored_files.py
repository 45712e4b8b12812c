"""A run's stored files name the run they belong to: another run's `predictions.npz` or `checkpoint.pt`
copied into a run directory is refused in one line (never recomputed or resumed as this run's), and
files written before they named their run are accepted as before. Damaged predictions are one line too."""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from bench.cli import main
from bench.runs.predictions import PREDICTIONS, Keys
from bench.protocol.runner import execute
from bench.protocol.recompute import rebuild_metrics
from bench.runs.rundir import CHECKPOINT, METRICS, run_dir
from bench.methods.baseline import Baseline
from tests.helpers import TINY, tiny_specs


@pytest.fixture
def two_runs(tmp_path):
    """Two finished runs (seeds 0 and 1 of Baseline, 2-step) under `tmp_path`."""
    specs = tiny_specs(seeds=(0, 1))
    return [execute(spec, tmp_path) for spec in specs]


def recompute(tmp_path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["metrics", "recompute", "--results", str(tmp_path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_predictions_name_their_run(two_runs):
    for run in two_runs:
        with np.load(run / PREDICTIONS) as stored:
            assert str(stored["run_id"]) == run.name


def test_another_runs_predictions_are_not_recomputed_as_this_runs_metrics(two_runs, tmp_path, capsys):
    mine, other = two_runs
    before = (mine / METRICS).read_bytes()
    shutil.copy(other / PREDICTIONS, mine / PREDICTIONS)
    code, out, err = recompute(tmp_path, capsys)
    assert code == 1 and "Traceback" not in err
    (line,) = [line for line in out.splitlines() if line.startswith(mine.name)]
    assert line.startswith(f"{mine.name}: skipped: {mine / PREDICTIONS} belongs to run {other.name}, not to this run "
                           f"{mine.name}")
    assert "1 unchanged" in out and "1 skipped" in out  # the other run is still recomputed
    assert (mine / METRICS).read_bytes() == before


@pytest.mark.parametrize("how", ["recompute", "rebuild"])
def test_lost_metrics_are_not_rebuilt_from_another_runs_predictions(two_runs, tmp_path, capsys, how):
    mine, other = two_runs
    shutil.copy(other / PREDICTIONS, mine / PREDICTIONS)
    (mine / METRICS).unlink()
    if how == "recompute":
        code, out, _ = recompute(tmp_path, capsys)
        assert code == 1
        (line,) = [line for line in out.splitlines() if line.startswith(mine.name)]
        assert f"belongs to run {other.name}, not to this run {mine.name}" in line and "not rebuilt" in line
    else:  # what `bench run` and the workers do first with a finished run whose metrics are lost
        assert rebuild_metrics(mine) is None
        log = (mine / "log.txt").read_text()
        assert f"belongs to run {other.name}, not to this run {mine.name}" in log and "running again" in log
    assert not (mine / METRICS).exists()


RUN_ARGV = ["run", "--grid", "smoke", "--methods", "Baseline", "--backbone", "pixels", "--splits", "2-step",
            "--seeds", "0", "1", "--cluster", "debug", "--cfg-options", *(f"{k}={v}" for k, v in TINY.items())]


@pytest.mark.parametrize("command", ["metrics recompute", "run"])
@pytest.mark.parametrize("damage", ["another run's", "columns missing"])
def test_metrics_that_are_not_this_runs_are_rebuilt_from_its_own_predictions(two_runs, tmp_path, capsys, command,
                                                                             damage):
    """Another run's metrics.parquet copied into a run (or one without a run's columns) is not this run's
    result: recompute never writes this run's values under that run's identity, and `bench run` does not
    count the run as done. Both rebuild it from its own predictions and keep the file aside."""
    mine, other = two_runs
    original = pd.read_parquet(mine / METRICS)
    if damage == "another run's":
        shutil.copy(other / METRICS, mine / METRICS)
        why = f"it holds the rows of run {other.name}, not of this run {mine.name}"
    else:
        original.drop(columns=["value"]).to_parquet(mine / METRICS, index=False)
        why = "it has no column value"
    foreign = (mine / METRICS).read_bytes()
    capsys.readouterr()
    argv = RUN_ARGV if command == "run" else ["metrics", "recompute"]
    assert main([*argv, "--results", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if command == "run":
        assert f"run {mine.name}: {mine / METRICS} could not be read ({why}" in err and "all 2 runs already done" in out
    else:
        (line,) = [line for line in out.splitlines() if line.startswith(mine.name)]
        assert line.startswith(f"{mine.name}: {METRICS} unreadable ({why}") and "rebuilt" in line
        assert "1 unchanged, 1 rebuilt" in out
    rebuilt = pd.read_parquet(mine / METRICS)
    assert set(rebuilt["run_id"]) == {mine.name}
    keys = ["step", "group", "flavour", "metric"]
    pd.testing.assert_series_equal(rebuilt.set_index(keys)["value"].sort_index(),
                                   original.set_index(keys)["value"].sort_index())
    (aside,) = mine.glob(f"damaged-*/{METRICS}")
    assert aside.read_bytes() == foreign  # kept, never deleted
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 0  # a finished run of its own from now on
    assert "0 changed, 2 unchanged, 0 rebuilt" in capsys.readouterr().out


def test_predictions_written_before_they_named_their_run_are_recomputed_as_before(two_runs, tmp_path, capsys):
    for run in two_runs:
        with np.load(run / PREDICTIONS) as stored:
            legacy = {k: stored[k] for k in stored.files if k != Keys.run_id}
        np.savez_compressed(run / PREDICTIONS, **legacy)
    code, out, _ = recompute(tmp_path, capsys)
    assert code == 0 and "0 changed, 2 unchanged" in out


def test_damaged_predictions_holding_objects_are_one_line_and_the_other_runs_still_recompute(two_runs, tmp_path,
                                                                                             capsys):
    damaged, intact = two_runs
    with np.load(damaged / PREDICTIONS) as stored:
        arrays = {k: stored[k] for k in stored.files}
    arrays[Keys.val_labels(0)] = np.array([{"not": "labels"}, None], dtype=object)
    np.savez_compressed(damaged / PREDICTIONS, **arrays)  # np.load(allow_pickle=False) refuses it
    before = (damaged / METRICS).read_bytes()
    code, out, err = recompute(tmp_path, capsys)
    assert code == 1 and "Traceback" not in err
    (line,) = [line for line in out.splitlines() if line.startswith(damaged.name)]
    assert line.startswith(f"{damaged.name}: skipped: cannot read {damaged / PREDICTIONS} (ValueError: Object arrays")
    assert "1 unchanged" in out and "1 skipped" in out
    assert (damaged / METRICS).read_bytes() == before


def interrupted(spec, results, monkeypatch) -> None:
    """Run `spec` under `results` until it is killed as its second step starts (a checkpoint after step 1)."""
    real = Baseline.learn

    def killed(self, step):
        if step.index == 1:
            raise KeyboardInterrupt("killed")
        return real(self, step)

    monkeypatch.setattr(Baseline, "learn", killed)
    with pytest.raises(KeyboardInterrupt):
        execute(spec, results)
    monkeypatch.setattr(Baseline, "learn", real)


def test_another_seeds_checkpoint_is_set_aside_and_the_run_starts_over(tmp_path, monkeypatch):
    mine, other = tiny_specs(seeds=(1, 0))
    reference = pd.read_parquet(execute(mine, tmp_path / "uninterrupted") / METRICS)
    results = tmp_path / "results"
    interrupted(other, results, monkeypatch)
    run_dir(results, mine).mkdir(parents=True)
    shutil.copy(run_dir(results, other) / CHECKPOINT, run_dir(results, mine) / CHECKPOINT)
    out = execute(mine, results)
    log = (out / "log.txt").read_text()
    assert "resuming" not in log
    (line,) = [line for line in log.splitlines() if "belongs to run" in line]
    assert line.endswith(f"{out / CHECKPOINT} belongs to run {other.run_id}, not to this run {mine.run_id}: moved to "
                         f"{next(out.glob('damaged-*')).name}/, starting from step 1")
    assert list(out.glob(f"damaged-*/{CHECKPOINT}"))
    got = pd.read_parquet(out / METRICS)
    pd.testing.assert_series_equal(got["value"], reference["value"])  # this run's own training, not seed 0's


def test_a_checkpoint_written_before_checkpoints_named_their_run_is_resumed(tmp_path, monkeypatch):
    (spec,) = tiny_specs()
    interrupted(spec, tmp_path, monkeypatch)
    path = run_dir(tmp_path, spec) / CHECKPOINT
    state = torch.load(path, weights_only=True)
    assert state.pop("run_id") == spec.run_id
    torch.save(state, path)
    execute(spec, tmp_path)
    assert "resuming after step 0" in (run_dir(tmp_path, spec) / "log.txt").read_text()

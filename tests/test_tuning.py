"""Tuning without the test set (issue 54): the `validation` tuning protocol (`tuning.holdout`) holds part of each
class's training images out and scores them in place of the test set, which the run never reads."""
from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest

from bench.data.base import ImageSet, LoadedDataset
from bench.errors import BenchError
from bench.protocol.runner import execute
from bench.runs.predictions import Keys, opened
from tests.helpers import tiny_specs


def _dataset(per_class: list[int]) -> LoadedDataset:
    labels = np.repeat(np.arange(len(per_class)), per_class)
    images = np.arange(len(labels) * 4, dtype=np.uint8).reshape(len(labels), 2, 2, 1)
    test = ImageSet(np.full((3, 2, 2, 1), 255, np.uint8), np.array([0, 1, 2]))
    return LoadedDataset(name="x", class_names=[str(c) for c in range(len(per_class))], train=ImageSet(images, labels),
                         test=test, extra={"domain": {"train": labels % 2, "test": np.zeros(3, np.int8)}})


def test_the_held_out_images_are_each_class_share_of_its_training_images_and_replace_the_test_set():
    data = _dataset([10, 4, 1])
    held = data.with_held_out_test(0.25, seed=3)
    # round(0.25 n) of each class, at least one, one always left to train on (a class of one image keeps it)
    assert np.bincount(held.test.labels, minlength=3).tolist() == [2, 1, 0]
    assert np.bincount(held.train.labels, minlength=3).tolist() == [8, 3, 1]
    seen = {bytes(x) for x in held.train.images} | {bytes(x) for x in held.test.images}
    assert len(seen) == 15 and not any(bool((x == 255).all()) for x in held.test.images)  # no test image at all
    assert not {bytes(x) for x in held.train.images} & {bytes(x) for x in held.test.images}
    again = data.with_held_out_test(0.25, seed=3)
    assert np.array_equal(again.test.images, held.test.images)
    assert not np.array_equal(data.with_held_out_test(0.25, seed=4).test.images, held.test.images)
    # each image's domain follows it
    assert held.extra["domain"]["test"].tolist() == (held.test.labels % 2).tolist()


def test_a_run_on_the_validation_protocol_scores_held_out_training_images_and_says_so(tmp_path):
    (plain,) = tiny_specs(methods=["K-means"])
    (tuned,) = tiny_specs(methods=["K-means"], **{"tuning.holdout": 0.25})
    assert tuned.run_id != plain.run_id and plain.split_label == "2-step"
    assert tuned.split_label == "2-step · validation 0.25"  # never averaged with test-set runs
    out = execute(tuned, tmp_path)
    with opened(out / "predictions.npz") as stored:
        labels = stored[Keys.test_labels(1)]
    # 6 classes of 12 training images: 3 of each held out, scored in place of the 6 test images of each class
    assert np.bincount(labels).tolist() == [3] * 6
    assert "whose images this run never reads" in (out / "log.txt").read_text()


@pytest.mark.parametrize("options, said", [
    ({"tuning.holdout": 1.5}, "bad config value tuning.holdout=1.5: must be a fraction in [0, 1)"),
    ({"tuning.holdout": 0.2, "setting.draw": "happy"}, "Happy's replayed draw"),
])
def test_a_tuning_protocol_that_cannot_hold_out_is_refused(options, said):
    splits = ["happy-5-stage"] if "setting.draw" in options else ["2-step"]
    with pytest.raises(BenchError, match=said.replace("[", r"\[").replace(")", r"\)").replace("(", r"\(")):
        tiny_specs(methods=["K-means"], splits=splits, **options)


# `bench tune`: Optuna studies whose trials are ordinary runs on the validation protocol
TINY = {"dataset.num_classes": 6, "dataset.image_size": 8, "dataset.train_per_class": 12, "dataset.test_per_class": 6,
        "features.views": 2}


def _selection(tmp_path, **given):
    from bench.config.selection import Selection

    return Selection("smoke", methods=["K-means"], datasets=["synthetic"], splits=["2-step"], seeds=[0],
                     backbones=["pixels"], results=tmp_path / "results", cfg_options=TINY, **given)


def _runner(fail_at=(), kill_at=()):
    """A trial runner as `bench tune`'s (`launch` in this process), failing or killed (Ctrl-C) at given calls."""
    from bench.execution.launch import RunOptions, launch

    calls = []

    def run(selection):
        calls.append(selection)
        if len(calls) in kill_at:
            raise KeyboardInterrupt("killed")
        if len(calls) in fail_at:
            raise RuntimeError("CUDA error: out of memory")
        return launch(selection, RunOptions(cluster="debug"))

    return run, calls


SPACE = {"method.init": {"choices": ["random", "k-means++"]}, "method.max_iter": {"low": 5, "high": 50, "int": True}}


def test_a_study_runs_its_trials_as_runs_on_held_out_images_and_resumes_after_a_kill(tmp_path, capsys):
    import optuna

    from bench.tuning.space import parse_space
    from bench.tuning.study import TuneOptions, tune

    params = parse_space(SPACE, "test")
    run, calls = _runner(kill_at=(2,))
    with pytest.raises(KeyboardInterrupt):
        tune(_selection(tmp_path), params, TuneOptions(trials=3, final=False), run)
    journal = tmp_path / "results" / "tuning" / "smoke-K-means-synthetic-2-step-validation.journal"
    assert journal.exists()
    run, calls = _runner()
    outcome = tune(_selection(tmp_path), params, TuneOptions(trials=3, final=False), run)
    # the killed trial (number 1) ran again first, then one new trial: three in all, none twice
    assert [t["number"] for t in outcome.trials] == [1, 2]
    study = optuna.load_study(study_name="smoke-K-means-synthetic-2-step-validation", storage=optuna.storages.journal.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3 and outcome.best is not None
    # every trial's runs scored held-out training images, with the trial's values in their run ids
    specs = [json.loads(p.read_text()) for p in (tmp_path / "results" / "runs").glob("*/spec.json")]
    assert {s["config"]["tuning"]["holdout"] for s in specs} == {0.2}
    assert {(s["config"]["method"]["init"], s["config"]["method"]["max_iter"]) for s in specs} == \
        {(t.params["method.init"], t.params["method.max_iter"]) for t in study.trials}
    assert outcome.best_value == max(t.value for t in study.trials)


def test_the_best_values_run_once_on_the_reported_protocol_marked_with_their_study(tmp_path, capsys):
    from bench.tuning.space import parse_space
    from bench.tuning.study import TuneOptions, tune

    run, calls = _runner()
    outcome = tune(_selection(tmp_path), parse_space(SPACE, "test"), TuneOptions(trials=2), run)
    assert len(calls) == 3 and outcome.final is not None  # two trials, then the reported runs once
    specs = [json.loads(p.read_text()) for p in (tmp_path / "results" / "runs").glob("*/spec.json")]
    final = [s for s in specs if s["config"]["tuning"].get("study")]
    assert len(final) == 1 and final[0]["config"]["tuning"]["holdout"] == 0.0  # the test set, as reported
    assert final[0]["config"]["tuning"] == {"holdout": 0.0, "holdout_seed": 0, "study": outcome.study,
                                            "study_protocol": "validation 0.2", "study_trials": 2}
    assert {k: final[0]["config"]["method"][k.split(".")[1]] for k in outcome.best} == outcome.best
    assert "the reported runs with them: A" in capsys.readouterr().out


def test_the_transfer_protocol_tunes_on_another_class_order_or_dataset_never_on_the_reported_test_set(tmp_path):
    from bench.tuning.space import parse_space
    from bench.tuning.study import TuneOptions, trial_selection, tune

    run, calls = _runner()
    outcome = tune(_selection(tmp_path), parse_space(SPACE, "test"),
                   TuneOptions(trials=1, protocol="transfer", source="order:3"), run)
    trial, final = calls
    assert trial.cfg_options["split.class_order_seed"] == 3 and trial.cfg_options["tuning.holdout"] == 0.2
    assert "split.class_order_seed" not in final.cfg_options and "tuning.holdout" not in final.cfg_options
    assert final.cfg_options["tuning.study_protocol"] == "transfer from class order 3, validation 0.2"
    assert outcome.study.endswith("transfer-from-order-3")
    other = trial_selection(_selection(tmp_path), {"method.max_iter": 5}, TuneOptions(1, "transfer", source="digits"))
    assert other.datasets == ("digits",) and "tuning.holdout" not in other.cfg_options  # scored on digits' test set
    for options, said in [(TuneOptions(1, "transfer"), "give --transfer-from DATASET or --transfer-from order:N"),
                          (TuneOptions(1, "transfer", source="synthetic"), "the reported runs are on synthetic"),
                          (TuneOptions(1, "transfer", source="order:x"), "order:N with N a class-order seed"),
                          (TuneOptions(1, source="digits"), "only the transfer protocol tunes elsewhere")]:
        with pytest.raises(BenchError, match=said):
            tune(_selection(tmp_path), parse_space(SPACE, "test"), options, run)
    assert len(calls) == 2  # nothing more ran


def test_a_failing_trial_is_recorded_failed_and_the_study_goes_on(tmp_path, capsys):
    from bench.tuning.space import parse_space
    from bench.tuning.study import TuneOptions, tune

    run, _ = _runner(fail_at=(1,))
    outcome = tune(_selection(tmp_path), parse_space(SPACE, "test"), TuneOptions(trials=2), run)
    assert [t["value"] is None for t in outcome.trials] == [True, False]
    assert "trial 0: " in capsys.readouterr().out and "RuntimeError: CUDA error: out of memory" in outcome.trials[0]["why"]


@pytest.mark.parametrize("space, said", [
    ({"method.lr": {"low": 0.5, "high": 0.1}}, "an inverted range [0.5, 0.1]"),
    ({"method.lr": {"low": 0.1, "high": 0.1}}, "an empty range [0.1, 0.1]"),
    ({"method.lr": {"low": 0, "high": 0.1, "log": True}}, "a log range needs low > 0"),
    ({"method.init": {"choices": []}}, "choices is a non-empty list"),
    ({"lr": {"low": 0.1, "high": 0.2}}, "'lr' is not a config key"),
    ({"method.lr": {"low": 0.1, "high": 0.2, "step": 1}}, "a range has low and high"),
])
def test_a_bad_search_space_is_one_line(space, said):
    from bench.tuning.space import parse_space

    with pytest.raises(BenchError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse_space(space, "test")


def test_bad_tuning_requests_are_refused_before_anything_runs(tmp_path):
    from bench.tuning.space import parse_space, read_space_file
    from bench.tuning.study import TuneOptions, tune

    params = parse_space(SPACE, "test")
    run, calls = _runner()
    with pytest.raises(BenchError, match="a budget of 0 trials"):
        tune(_selection(tmp_path), params, TuneOptions(trials=0), run)
    with pytest.raises(BenchError, match="unknown tuning protocol 'test-set'; known: transfer, validation"):
        tune(_selection(tmp_path), params, TuneOptions(trials=1, protocol="test-set"), run)
    with pytest.raises(BenchError, match="has no option|did you mean|method.max_iters"):
        tune(_selection(tmp_path), parse_space({"method.max_iters": {"low": 5, "high": 9, "int": True}}, "t"),
             TuneOptions(trials=1), run)
    with pytest.raises(BenchError, match="tunes one method"):
        tune(_selection(tmp_path, ).__class__("smoke", methods=["K-means", "Baseline"], datasets=["synthetic"],
                                              splits=["2-step"], seeds=[0], backbones=["pixels"],
                                              results=tmp_path / "results", cfg_options=TINY), params,
             TuneOptions(trials=1), run)
    assert calls == [] and not (tmp_path / "results" / "runs").exists()
    tune(_selection(tmp_path), params, TuneOptions(trials=1), run)
    with pytest.raises(BenchError, match="was made for another space"):
        tune(_selection(tmp_path), parse_space({"method.max_iter": {"low": 5, "high": 9, "int": True}}, "t"),
             TuneOptions(trials=2), run)
    # a study named by hand holds one selection's runs: another selection on it is refused
    tune(_selection(tmp_path), params, TuneOptions(trials=1, study="shared"), run)
    other = _selection(tmp_path).__class__("smoke", methods=["K-means"], datasets=["synthetic"], splits=["2-step"],
                                           seeds=[1], backbones=["pixels"], results=tmp_path / "results",
                                           cfg_options=TINY)
    with pytest.raises(BenchError, match="study shared .* was made for another selection"):
        tune(other, params, TuneOptions(trials=2, study="shared"), run)
    (tmp_path / "space.yaml").write_text("method.lr: [unclosed\n")
    with pytest.raises(BenchError, match="not YAML"):
        read_space_file(tmp_path / "space.yaml")


# `bench tune --batch N`: N trials at once, run in one process where the method learns them together
PAIRS = [{"method.lr": 0.05, "method.temperature": 0.1}, {"method.lr": 0.3, "method.temperature": 0.07},
         {"method.lr": 0.01, "method.temperature": 0.2}]


@pytest.mark.parametrize("split, classes", [("2-step", 6), ("happy-5-stage", 10)])  # class-iNCD; mixed (a labelled step)
def test_runs_stepped_together_equal_each_run_alone(tmp_path, split, classes):
    import pandas as pd

    from bench.protocol.batched import batches, execute_batch

    specs = [spec for pair in PAIRS for spec in tiny_specs(splits=[split], **{"tuning.holdout": 0.25, "dataset.num_classes": classes, **pair})]
    assert [len(group) for group in batches(specs)] == [3]
    alone = [execute(spec, tmp_path / "alone") for spec in specs]
    start = time.monotonic()
    together = execute_batch(specs, tmp_path / "together")
    wall = time.monotonic() - start
    # each run records its own seconds (its share of the batch), not the batch's: together they are its wall time
    own = [float(pd.read_parquet(out / "metrics.parquet")["duration_s"].iloc[0]) for out in together]
    assert sum(own) <= wall and min(own) > 0
    finals = set()
    for one, many in zip(alone, together):
        assert one.name == many.name and (many / "DONE").exists()
        assert sorted(p.name for p in one.iterdir()) == sorted(p.name for p in many.iterdir())
        assert "stepped in one process with 2 other run(s)" in (many / "log.txt").read_text()
    assert "feature bank shared with the runs stepped together" in (together[-1] / "log.txt").read_text()
    for one, many in zip(alone, together):
        a, b = pd.read_parquet(one / "metrics.parquet"), pd.read_parquet(many / "metrics.parquet")
        assert a[["group", "flavour", "metric", "step"]].equals(b[["group", "flavour", "metric", "step"]])
        np.testing.assert_allclose(b["value"].to_numpy(float), a["value"].to_numpy(float), rtol=1e-5)
        with opened(one / "predictions.npz") as x, opened(many / "predictions.npz") as y:
            assert sorted(x) == sorted(y)
            for key in x:
                if np.asarray(x[key]).dtype.kind == "f":
                    np.testing.assert_allclose(y[key], x[key], rtol=1e-5, atol=1e-7)
                else:
                    assert np.array_equal(x[key], y[key]), key
            finals.add(round(float(np.asarray(x[Keys.epoch_loss(0, 0)])[-1]), 5))
    assert len(finals) == 3  # the trials did train differently


def test_a_batch_of_trials_runs_together_and_a_method_without_batched_learning_one_at_a_time(tmp_path, capsys):
    from bench.execution.launch import RunOptions, launch_batched
    from bench.tuning.space import parse_space
    from bench.tuning.study import TuneOptions, tune

    batched: list[int] = []

    def run_batch(selections):
        batched.append(len(selections))
        return launch_batched(selections, RunOptions(cluster="debug"))

    space = parse_space({"method.lr": {"low": 0.01, "high": 0.5, "log": True},
                         "method.temperature": {"low": 0.05, "high": 0.2}}, "test")
    run, calls = _runner()
    baseline = replace(_selection(tmp_path), methods=["Baseline"])
    outcome = tune(baseline, space, TuneOptions(trials=5, batch=4, final=False), run, run_batch=run_batch)
    # 5 trials: a batch of 4, then the one left, in this process too; none through the one-trial runner
    assert batched == [4, 1] and calls == [] and [t["number"] for t in outcome.trials] == list(range(5))
    assert all(t["value"] is not None for t in outcome.trials) and outcome.best is not None
    logs = [p.read_text() for p in (tmp_path / "results" / "runs").glob("*/log.txt")]
    assert len(logs) == 5 and sum("stepped in one process with 3 other run(s)" in log for log in logs) == 4
    # K-means learns no heads: its trials run one at a time through the ordinary runner, and the study works
    run, calls = _runner()
    outcome = tune(_selection(tmp_path), parse_space(SPACE, "test"), TuneOptions(trials=2, batch=4, final=False), run,
                   run_batch=run_batch)
    assert len(calls) == 2 and batched == [4, 1] and outcome.best is not None
    assert "K-means does not learn trials together" in capsys.readouterr().out
    with pytest.raises(BenchError, match="--batch 0: give --batch N with N >= 1"):
        tune(_selection(tmp_path), parse_space(SPACE, "test"), TuneOptions(trials=2, batch=0), run)


def test_a_killed_batch_resumes_each_run_from_its_checkpoint_to_the_numbers_of_the_run_alone(tmp_path, monkeypatch):
    import pandas as pd

    from bench.methods.baseline import Baseline
    from bench.protocol.batched import execute_batch

    specs = [spec for pair in PAIRS for spec in tiny_specs(**{"tuning.holdout": 0.25, **pair})]
    alone = execute(specs[1], tmp_path / "alone")
    real = Baseline.learn_batched.__func__  # type: ignore[attr-defined]

    def killed(cls, methods, steps):
        if steps[0].index == 1:
            raise KeyboardInterrupt("killed before step 1")
        return real(cls, methods, steps)

    monkeypatch.setattr(Baseline, "learn_batched", classmethod(killed))
    with pytest.raises(KeyboardInterrupt):
        execute_batch(specs, tmp_path / "batched")
    monkeypatch.setattr(Baseline, "learn_batched", classmethod(real))
    outs = execute_batch(specs, tmp_path / "batched")
    assert all("resuming after step 0" in (out / "log.txt").read_text() for out in outs)
    a, b = pd.read_parquet(alone / "metrics.parquet"), pd.read_parquet(outs[1] / "metrics.parquet")
    np.testing.assert_allclose(b["value"].to_numpy(float), a["value"].to_numpy(float), rtol=1e-5)


def test_two_tuners_share_a_study_and_only_a_dead_tuners_trials_are_taken_over(tmp_path):
    import socket
    import subprocess
    import sys

    import optuna

    from bench.tuning.space import parse_space
    from bench.tuning.study import OWNER, TuneOptions, tune

    params = parse_space(SPACE, "test")
    run, calls = _runner()
    outcome = tune(_selection(tmp_path), params, TuneOptions(trials=1, final=False), run)
    journal = tmp_path / "results" / "tuning" / f"{outcome.study}.journal"
    study = optuna.load_study(study_name=outcome.study, storage=optuna.storages.journal.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        theirs, killed = study.ask(), study.ask()  # another tuner's trial, running; a killed tuner's
        theirs.set_user_attr(OWNER, f"{socket.gethostname()}:{live.pid}")
        killed.set_user_attr(OWNER, f"{socket.gethostname()}:{dead.pid}")
        outcome = tune(_selection(tmp_path), params, TuneOptions(trials=4, final=False), run)
    finally:
        live.kill()
    numbers = [t["number"] for t in outcome.trials]
    # the killed tuner's trial ran again here; the live one's was left to it and counted in the budget
    assert killed.number in numbers and theirs.number not in numbers and len(numbers) == 2
    states = {t.number: t.state.name for t in study.get_trials()}
    assert states[theirs.number] == "RUNNING" and states[killed.number] == "COMPLETE"

"""Which epoch a mixed-setting step keeps (bench/protocol/epoch_selection.py): the best-scoring epoch's parameters
are restored, a tie keeps the later epoch, `last` changes nothing; the held-out validation images are
never trained on; an oracle run is marked as such in its results; the selections are recomputable."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from bench.protocol.epoch_selection import EpochSelection
from bench.splits.manifests import Manifest, draw, hold_out
from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.splits.settings import protocol_for
from tests.helpers import tiny_specs

MIXED = {"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4}


def test_the_best_scoring_epoch_is_restored_and_a_tie_keeps_the_later_one():
    w = torch.nn.Parameter(torch.zeros(2))
    scores = iter([1.0, 3.0, 2.0, 3.0, 0.5])  # epochs 0..4: best 3.0 at epochs 1 and 3
    selection = EpochSelection("val", lambda logits: next(scores))
    with selection.over([w], lambda x: x) as after_epoch:
        for epoch in range(5):
            with torch.no_grad():
                w.fill_(epoch)  # the parameters as each epoch leaves them
            after_epoch(epoch)
    assert w.tolist() == [3.0, 3.0] and selection.chosen == [(3, 5)]


def test_happys_rule_keeps_the_first_best_epoch():
    """Happy-CGCD saves a session's checkpoint only on a strictly higher score: a tie keeps the earlier epoch."""
    w = torch.nn.Parameter(torch.zeros(2))
    scores = iter([1.0, 3.0, 2.0, 3.0, 0.5])
    selection = EpochSelection("happy", lambda logits: next(scores))
    with selection.over([w], lambda x: x) as after_epoch:
        for epoch in range(5):
            with torch.no_grad():
                w.fill_(epoch)
            after_epoch(epoch)
    assert w.tolist() == [1.0, 1.0] and selection.chosen == [(1, 5)]


def test_last_yields_no_callback_and_leaves_the_parameters():
    w = torch.nn.Parameter(torch.ones(3))
    with EpochSelection().over([w], lambda x: x) as after_epoch:
        assert after_epoch is None
        with torch.no_grad():
            w.mul_(5)
    assert w.tolist() == [5.0] * 3
    with pytest.raises(ValueError, match="choose from last, val, oracle, happy"):
        EpochSelection("best")


def test_a_held_out_validation_is_a_fraction_of_each_labelled_class_and_in_no_step():
    labels = np.repeat(np.arange(12), 20)
    protocol = protocol_for(tiny_specs(splits=["happy-5-stage"], **MIXED)[0].config["setting"], 12, labels)
    drawn = draw(protocol, labels, seed=0)
    held = hold_out(drawn, labels, 0.25, seed=0)
    first = drawn.steps[0]
    # 16 labelled images per labelled class (0.8 of 20): 4 of each held out
    assert np.unique(labels[held.validation], return_counts=True)[1].tolist() == [4] * len(protocol.labelled_classes)
    assert set(held.validation) <= set(first) and not set(held.validation) & set(np.concatenate(held.steps))
    assert sorted([*held.steps[0], *held.validation]) == sorted(first)
    assert all(np.array_equal(a, b) for a, b in zip(held.steps[1:], drawn.steps[1:]))  # the rest unchanged
    again = Manifest.from_json(held.to_json())
    assert np.array_equal(again.validation, held.validation) and "validation" not in drawn.to_json()


def test_an_oracle_run_keeps_its_best_test_epoch_and_says_so(tmp_path):
    options = {**MIXED, "method.epochs": 6}
    (last,) = tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **options)
    (oracle,) = tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **options, **{"setting.selection": "oracle"})
    assert oracle.run_id != last.run_id
    frames = {name: pd.read_parquet(execute(spec, tmp_path) / "metrics.parquet")
              for name, spec in (("last", last), ("oracle", oracle))}

    def labelled_stage(frame: pd.DataFrame) -> float:
        return frame[(frame.step == 0) & (frame.group == "all")].value.item()

    # the same training; the oracle keeps the step-0 epoch best on the test images, never worse than the last
    assert labelled_stage(frames["oracle"]) >= labelled_stage(frames["last"])
    chosen = frames["oracle"][frames["oracle"].group == "selected_epoch"]
    assert sorted(chosen.step.unique()) == list(range(6)) and chosen.value.between(1, 6).all()
    assert set(frames["oracle"].split) == {"happy-5-stage · draw 0 · ORACLE ON TEST"}
    assert "selected_epoch" not in set(frames["last"].group)
    # every epoch's score is kept with the predictions, and the kept epoch is one of the best scored
    out = tmp_path / "runs" / oracle.run_id
    from bench.runs.predictions import PREDICTIONS, Keys, opened

    with opened(out / PREDICTIONS) as stored:
        scored = stored[Keys.epoch_score(0, 0)]
    assert scored[:, 0].tolist() == [0, 1, 2, 3, 4, 5]
    kept = int(chosen[chosen.step == 0].value.iloc[0]) - 1
    assert scored[kept, 1] == scored[:, 1].max()


def test_a_method_that_trains_no_epochs_is_not_said_to_have_read_the_test_labels(tmp_path):
    (spec,) = tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **MIXED, **{"setting.selection": "oracle"})
    steps = [line for line in (execute(spec, tmp_path) / "log.txt").read_text().splitlines() if "selection" in line
             or "kept epochs" in line]
    # was: "step 0: kept epochs - (no epochs) by oracle (ORACLE ON TEST)", for a method that selected nothing
    assert len(steps) == 6 and all("no epochs to select" in line and "ORACLE" not in line for line in steps), steps


def test_a_val_run_holds_out_labelled_images_and_its_selections_are_recomputable(tmp_path):
    (spec,) = tiny_specs(methods=["Baseline++"], splits=["happy-5-stage"], **MIXED,
                         **{"method.epochs": 3, "method.ktrfr_epochs": 3, "setting.selection": "val"})
    out = execute(spec, tmp_path)
    manifest = Manifest.from_json((out / "split.json").read_text())
    assert len(manifest.validation) > 0 and not set(manifest.validation) & set(np.concatenate(manifest.steps))
    stored = pd.read_parquet(out / "metrics.parquet")
    chosen = stored[stored.group == "selected_epoch"]
    # Baseline++: step 0 trains one loop (its head), every later step two (its head, then the student)
    assert chosen.groupby("step").size().tolist() == [1, 2, 2, 2, 2, 2]
    again = pd.DataFrame([dataclasses.asdict(r) for r in replay(out / "predictions.npz")])
    keys = ["step", "group", "flavour", "metric"]
    merged = stored[keys + ["value"]].merge(again, on=keys, suffixes=("", "_again"), how="outer")
    assert len(merged) == len(stored) and np.allclose(merged["value"], merged["value_again"], equal_nan=True)
    assert set(stored.split) == {"happy-5-stage · draw 0 · selected on val"}


def test_a_run_selected_as_happy_keeps_the_first_best_test_epoch_and_is_marked(tmp_path):
    options = {**MIXED, "method.epochs": 6}
    specs = {rule: tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **options,
                              **{"setting.selection": rule})[0] for rule in ("oracle", "happy")}
    assert specs["oracle"].run_id != specs["happy"].run_id
    frames = {rule: pd.read_parquet(execute(spec, tmp_path) / "metrics.parquet") for rule, spec in specs.items()}
    stage0 = {rule: f[(f.step == 0) & (f.group == "all")].value.item() for rule, f in frames.items()}
    kept = {rule: f[(f.step == 0) & (f.group == "selected_epoch")].value.item() for rule, f in frames.items()}
    # the same step-0 training: both keep a best test epoch, Happy's the first of them
    assert stage0["happy"] == stage0["oracle"] and kept["happy"] <= kept["oracle"]
    assert set(frames["happy"].split) == {"happy-5-stage · draw 0 · selected as Happy · ORACLE ON TEST"}

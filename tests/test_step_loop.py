"""The one step loop (`bench.protocol.runner.run_steps`) runs both settings: class-iNCD (no labelled step, no
earlier classes in a step) and the mixed setting of continual category discovery. For each, labels reach a
method only in a step its setting labels, and a run killed before any step resumes from its checkpoint to the
numbers and stored predictions of an uninterrupted run."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from bench.methods.baseline import Baseline
from bench.protocol.runner import execute
from bench.runs.predictions import PREDICTIONS
from bench.runs.rundir import METRICS
from tests.helpers import tiny_specs
from tests.test_protocol import SEEN, registered  # noqa: F401  (registered: an autouse fixture; "_Spy" records Steps)

# per setting: a split of 6 steps, the options that give it classes enough, the steps it labels
SETTINGS = {
    "class-iNCD": (["5-step"], {"dataset.num_classes": 10}, set()),
    "mixed": (["happy-5-stage"], {"dataset.num_classes": 12, "dataset.train_per_class": 20,
                                  "dataset.test_per_class": 4}, {0}),
}
KEYS = ["step", "group", "flavour", "metric"]


@pytest.mark.parametrize("setting", SETTINGS)
def test_labels_reach_a_method_only_in_the_steps_its_setting_labels(setting, tmp_path):
    splits, options, labelled = SETTINGS[setting]
    (spec,) = tiny_specs(methods=["_Spy"], splits=splits, **options)
    execute(spec, tmp_path)
    assert [s.index for s in SEEN] == list(range(spec.n_steps))
    assert {s.index for s in SEEN if s.labels is not None} == labelled
    for step in SEEN:
        assert step.past == []  # not a reference: no earlier step's data
        assert not any("label" in name for name in vars(step.train))


@pytest.mark.parametrize("setting", SETTINGS)
def test_a_run_killed_before_every_step_resumes_to_the_uninterrupted_runs_numbers(setting, tmp_path, monkeypatch):
    splits, options, _ = SETTINGS[setting]
    (spec,) = tiny_specs(methods=["Baseline"], splits=splits, **options)
    whole = execute(spec, tmp_path / "whole")

    real, kill_at = Baseline.learn, [0]

    def learn(self: Any, step: Any) -> None:
        if step.index == kill_at[0]:
            raise KeyboardInterrupt(f"killed before step {step.index}")
        real(self, step)

    monkeypatch.setattr(Baseline, "learn", learn)
    for step in range(1, spec.n_steps):  # each attempt resumes after the last one's steps and does one more
        kill_at[0] = step
        with pytest.raises(KeyboardInterrupt):
            execute(spec, tmp_path / "resumed")
    kill_at[0] = -1
    resumed = execute(spec, tmp_path / "resumed")

    log = (resumed / "log.txt").read_text()
    assert all(f"resuming after step {step}" in log for step in range(spec.n_steps - 1))
    frames = [pd.read_parquet(out / METRICS).sort_values(KEYS)[KEYS + ["value"]].reset_index(drop=True)
              for out in (whole, resumed)]
    pd.testing.assert_frame_equal(*frames)
    with np.load(whole / PREDICTIONS) as a, np.load(resumed / PREDICTIONS) as b:
        assert sorted(a.files) == sorted(b.files)
        assert all(np.array_equal(a[name], b[name]) for name in a.files)

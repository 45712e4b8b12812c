"""class-iNCD's re-fitted maps (`wo_refit`) without wasted passes: a method whose task heads stay as they were
(`RunsOn.frozen_task_heads`) has each task's head read on its mapping images once, at its own step, and the
run's numbers and stored predictions are those of reading every earlier head again at every step."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bench.methods.baseline import Baseline
from bench.protocol.feeding import Feed
from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.runs.predictions import PREDICTIONS, Keys
from bench.runs.rundir import METRICS
from tests.helpers import killed_then_resumed, tiny_specs

KEYS = ["step", "group", "flavour", "metric"]
T = 5


@pytest.fixture
def val_reads(monkeypatch: Any) -> list[int]:
    """How many mapping (val) images each pass of a task head over them read, in order: every pass asks the
    feed for its batches once."""
    reads: list[int] = []
    batches = Feed.batches

    def counted(self: Feed, split: str, index: np.ndarray) -> Any:
        if split == "val":
            reads.append(len(index))
        return batches(self, split, index)

    monkeypatch.setattr(Feed, "batches", counted)
    return reads


def spec_of() -> Any:
    (spec,) = tiny_specs(methods=["Baseline"], splits=[f"{T}-step"], **{"dataset.num_classes": 10})
    return spec


def stored_of(out: Any) -> dict[str, np.ndarray]:
    with np.load(out / PREDICTIONS) as stored:
        return {k: stored[k] for k in stored.files}


def test_frozen_task_heads_are_read_once_each_for_the_numbers_of_reading_them_every_step(tmp_path, monkeypatch,
                                                                                      val_reads):
    assert Baseline.runs_on.frozen_task_heads
    skipped = execute(spec_of(), tmp_path / "skipped")
    once = list(val_reads)
    assert len(once) == T  # one pass per task, at its own step
    # the same run with the declaration taken away: every step reads every earlier head again
    monkeypatch.setattr(Baseline, "runs_on", replace(Baseline.runs_on, frozen_task_heads=False))
    val_reads.clear()
    reread = execute(spec_of(), tmp_path / "reread")
    assert len(val_reads) == T * (T + 1) // 2
    # step t reads tasks 0..t: the images read grow from Σ_s n_s to Σ_t Σ_{s<=t} n_s
    assert sum(val_reads) == sum(sum(once[: t + 1]) for t in range(T)) > sum(once)

    a, b = stored_of(skipped), stored_of(reread)
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a),\
        [k for k in a if not np.array_equal(a[k], b[k])]
    for t in range(1, T):  # what the re-read gave is what each head gave at its own step
        assert all(np.array_equal(b[Keys.refit_pred(t, s)], b[Keys.val_pred(s)]) for s in range(t))
    frames = [pd.read_parquet(out / METRICS).sort_values(KEYS)[KEYS + ["value"]].reset_index(drop=True)
              for out in (skipped, reread)]
    pd.testing.assert_frame_equal(*frames)
    values = frames[0].set_index(KEYS)["value"]
    refit = values.xs("wo_refit", level="flavour")
    assert len(refit) and refit.equals(values.xs("wo", level="flavour").loc[refit.index])  # wo_refit = wo
    # and `bench metrics recompute` replays the stored predictions to the recorded rows
    again = {(r.step, r.group, r.flavour, r.metric): r.value for r in replay(skipped / PREDICTIONS)}
    assert again == pytest.approx(values.to_dict())


def test_a_resumed_run_reuses_the_answers_its_checkpoint_kept(tmp_path, monkeypatch, val_reads):
    """Killed as step 3 starts: the resumed run reads only steps 3 and 4's own heads, and stores what the
    uninterrupted run stores (the earlier answers come from the checkpoint's stored predictions)."""
    whole = stored_of(execute(spec_of(), tmp_path / "whole"))
    val_reads.clear()
    resumed = stored_of(killed_then_resumed(spec_of(), tmp_path / "resumed", Baseline, 3, monkeypatch))
    assert len(val_reads) == T  # steps 0..2 before the kill, 3 and 4 after it
    assert sorted(whole) == sorted(resumed) and all(np.array_equal(whole[k], resumed[k]) for k in whole)

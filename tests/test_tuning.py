"""Tuning without the test set (issue 54): the `validation` tuning protocol (`tuning.holdout`) holds part of each
class's training images out and scores them in place of the test set, which the run never reads."""
from __future__ import annotations

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

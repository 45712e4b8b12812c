"""The protocol's data-access rule: a method sees only the unlabelled data of the current step,
references alone see earlier steps."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch

from bench.features.backbones import build_backbone
from bench.data import build_dataset
from bench.protocol.evaluate import TaskLayout
from bench.features.views import Encoder, extract
from bench.protocol.runner import execute
from bench.methods.base import Step
from bench.methods.kmeans import KMeansReference
from bench.registries import METHODS
from tests.helpers import tiny_specs

SEEN: list[Step] = []


class Spy(KMeansReference):
    """K-means that records every Step it is handed."""

    runs_on = dataclasses.replace(KMeansReference.runs_on, sees_past_steps=False)

    def learn(self, step: Step) -> None:
        SEEN.append(step)
        super().learn(step)


class ReferenceSpy(Spy):
    runs_on = dataclasses.replace(Spy.runs_on, sees_past_steps=True)


@pytest.fixture(autouse=True)
def registered():
    METHODS.register_module(name="_Spy", module=Spy, force=True)
    METHODS.register_module(name="_ReferenceSpy", module=ReferenceSpy, force=True)
    SEEN.clear()
    yield
    METHODS.module_dict.pop("_Spy")
    METHODS.module_dict.pop("_ReferenceSpy")


def plain_features_by_task(spec: Any) -> list[torch.Tensor]:
    data = build_dataset(spec.dataset, spec.config["dataset"])
    backbone = build_backbone(spec.backbone, spec.config["backbone"], data.train.images[0].shape)
    feats = extract(Encoder(backbone, data, "cpu"), data.train, views=0, seed=spec.seed)
    task = TaskLayout.contiguous(data.num_classes, spec.n_steps).task_of(data.train.labels)
    plain = feats.plain.half().float()  # the feature bank stores fp16
    return [plain[torch.as_tensor(np.flatnonzero(task == t))] for t in range(spec.n_steps)]


def rows_as_set(x: torch.Tensor) -> set[tuple[float, ...]]:
    return {tuple(np.round(r, 5)) for r in x.numpy().tolist()}


def test_a_method_gets_only_the_current_steps_unlabelled_data(tmp_path):
    (spec,) = tiny_specs(methods=["_Spy"], splits=["5-step"], **{"dataset.num_classes": 10})
    execute(spec, tmp_path)
    expected = plain_features_by_task(spec)
    assert [s.index for s in SEEN] == [0, 1, 2, 3, 4]
    for step, feats in zip(SEEN, expected):
        assert step.past == []
        assert rows_as_set(step.train.plain) == rows_as_set(feats)  # exactly this step's images
        assert step.labels is None  # labels never reach a method (only a mixed setting's labelled step has them)
        assert not any("label" in name for name in vars(step) if name != "labels")
        assert not any("label" in name for name in vars(step.train))
    assert [s.n_classes for s in SEEN] == [2, 2, 2, 2, 2]
    assert [s.offset for s in SEEN] == [0, 2, 4, 6, 8]


def test_only_references_see_earlier_steps(tmp_path):
    (spec,) = tiny_specs(methods=["_ReferenceSpy"], splits=["2-step"])
    execute(spec, tmp_path)
    expected = plain_features_by_task(spec)
    assert len(SEEN[0].past) == 0 and len(SEEN[1].past) == 1
    assert rows_as_set(SEEN[1].past[0].plain) == rows_as_set(expected[0])

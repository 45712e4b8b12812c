"""The hook API every method implements, and what the runner hands it at each step."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import torch

from bench.features import FeatureViews, ImageSource


@dataclass
class Step:
    """Step `index` of the sequence: the UNLABELLED training data of this step's classes.

    `offset` is the first class index of the step and `n_classes` its class count (known to the
    method, as in the paper). `past` holds earlier steps' data and is filled only for methods that
    declare `sees_past_steps` (the references); for every other method it stays empty.
    """

    index: int
    n_classes: int
    offset: int
    train: FeatureViews
    past: list[FeatureViews] = field(default_factory=list)
    device: torch.device = torch.device("cpu")
    # methods with inputs = "images" also get the step's images, the earlier steps' (references
    # only) and the frozen pre-trained backbone to copy
    images: ImageSource | None = None
    past_images: list[ImageSource] = field(default_factory=list)
    backbone: torch.nn.Module | None = None


class Method:
    """Base class. Subclasses are registered with `@METHODS.register_module(name=...)`.

    `hparams` are the resolved `method` section of the run's config (the preset's keys).
    """

    inputs: ClassVar[str] = "features"
    sees_past_steps: ClassVar[bool] = False
    # Where its reported A and F come from: (flavour, summary metric) of the evaluator's rows. The
    # paper reports every method task-agnostically ("wo"), except K-means' A (one Hungarian match).
    reported: ClassVar[Mapping[str, tuple[str, str]]] = {"A": ("wo", "A"), "F": ("wo", "F")}
    trains_on_views: ClassVar[bool] = True  # False: only plain features (no augmented views) reach it
    # the valid values of its string hyper-parameters, checked with every config value before a run
    hparam_choices: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    preset_file: ClassVar[str]  # registries/presets/<preset_file>.py

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        self.feature_dim = feature_dim
        self.seed = seed
        self.hparams = hparams

    def learn(self, step: Step) -> None:
        raise NotImplementedError

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Unified head over every class seen so far (N × Σ C_s). `x` holds features, or for
        `inputs = "images"` methods preprocessed images."""
        raise NotImplementedError

    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        """Task-specific head of `task` (N × C_task)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

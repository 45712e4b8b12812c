"""What a method is handed at each step of the stage loop: the `Step`. It belongs to the protocol, not to the
methods (`bench.methods.base` imports it from here): what a method may see is the protocol's to say."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from bench.features.views import FeatureViews
from bench.protocol.epoch_selection import LAST, EpochSelection


@dataclass
class Step:
    """Step `index` of the sequence: the UNLABELLED training data of this step's classes (in the `mixed`
    setting, `labels` holds the classes of a labelled stage's images, and a later stage's images are
    unlabelled images of this stage's `n_classes` new classes mixed with images of the `offset` classes
    seen before, in any proportion).

    `offset` is the first class index of the step and `n_classes` its class count (known to the
    method, as in the paper). `train` holds the step's features (stored plain features and views);
    methods that train tails (`runs_on.inputs == "tokens"`) also get `tokens`, the frozen prefix's
    tokens of the step's images (`bench.features.tokens`). `past` and `past_tokens` hold earlier steps' data and
    are filled only for methods that declare `runs_on.sees_past_steps` (the references)."""

    index: int
    n_classes: int
    offset: int
    train: FeatureViews
    last: bool = False  # the sequence's last step (the number of steps is known, as in the authors' code)
    past: list[FeatureViews] = field(default_factory=list)
    device: torch.device = torch.device("cpu")
    tokens: Any = None
    past_tokens: list[Any] = field(default_factory=list)
    # The class of each image of `train`, in 0..offset+n_classes-1: given ONLY in a labelled stage of the
    # `mixed` setting (stage 0, classes [0, n_classes)); None in every unlabelled step and in class-iNCD.
    labels: torch.Tensor | None = None
    # Which epoch of each training loop the stage keeps (`setting.selection` of the mixed setting): a method
    # that trains over epochs wraps each loop in `selection.over(parameters, logits)`; `last` does nothing.
    selection: EpochSelection = LAST

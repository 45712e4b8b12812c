"""What a method is handed at each step of the stage loop: the `Step`. It belongs to the protocol, not to the
methods (`bench.methods.base` imports it from here): what a method may see is the protocol's to say."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

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


# the per-epoch mean losses of the training loops of the step in progress (`record_epochs`), collected by the stage
# loop (`epochs_recorded`) and stored with the run's predictions, for its page's training curves
_EPOCH_LOSSES: ContextVar[list[list[float]] | None] = ContextVar("epoch_losses", default=None)


def record_epochs(losses: Sequence[float]) -> None:
    """A training loop's mean loss per epoch, recorded with the step in progress (nothing outside a run)."""
    kept = _EPOCH_LOSSES.get()
    if kept is not None:
        kept.append([float(v) for v in losses])


@contextmanager
def epochs_recorded() -> Iterator[list[list[float]]]:
    """What the training loops of a step record (`record_epochs`): one list of per-epoch losses per loop."""
    token = _EPOCH_LOSSES.set([])
    try:
        yield _EPOCH_LOSSES.get()  # type: ignore[misc]
    finally:
        _EPOCH_LOSSES.reset(token)

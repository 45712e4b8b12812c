"""What a method is handed at each step of the step loop: the `Step`, built in one place (`step_of`) for every
setting. It belongs to the protocol, not to the methods (`bench.methods.base` imports it from here): what a method
may see is the protocol's to say."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence

import numpy as np
import torch

from bench.features.views import FeatureViews
from bench.protocol.epoch_selection import LAST, EpochSelection


@dataclass
class Step:
    """Step `index` of the sequence: the UNLABELLED training data of this step's classes (in the `mixed`
    setting, `labels` holds the classes of a labelled step's images, and a later step's images are
    unlabelled images of this step's `n_classes` new classes mixed with images of the `offset` classes
    seen before, in any proportion).

    `offset` is the first class index of the step and `n_classes` its class count (known to the
    method, as in the paper). `train` holds the step's features (stored plain features and views);
    methods that train tails (`runs_on.inputs == "tokens"`) also get `tokens`, the frozen prefix's
    tokens of the step's images (`bench.features.tokens`). `past` and `past_tokens` hold earlier steps' data and
    are filled only for methods that declare `runs_on.sees_past_steps` (the references)."""

    index: int
    n_classes: int
    offset: int
    train: FeatureViews | None  # None for a method on tokens (it reads `tokens`)
    last: bool = False  # the sequence's last step (the number of steps is known, as in the authors' code)
    past: list[FeatureViews] = field(default_factory=list)
    device: torch.device = torch.device("cpu")
    tokens: Any = None
    past_tokens: list[Any] = field(default_factory=list)
    # The class of each image of `train`, in 0..offset+n_classes-1: given ONLY in a labelled step of the
    # `mixed` setting (step 0, classes [0, n_classes)); None in every unlabelled step and in class-iNCD.
    labels: torch.Tensor | None = None
    # Which epoch of each training loop the step keeps (`setting.selection` of the mixed setting): a method
    # that trains over epochs wraps each loop in `selection.over(parameters, logits)`; `last` does nothing.
    selection: EpochSelection = LAST

    @property
    def features(self) -> FeatureViews:
        """`train` for a method on features (`runs_on.inputs == "features"`), which always gets it."""
        if self.train is None:
            raise TypeError("this step holds tokens, not features: a method on tokens reads `step.tokens`")
        return self.train


def step_order(indices: np.ndarray, seed: int, step: int) -> np.ndarray:
    """A step's training images in a seeded random order (the same for every method of a run seed).
    Readers deliver them grouped by class (TinyImageNet, CUB, Herbarium): a method that did not
    shuffle could otherwise read the labels off the order."""
    return indices[np.random.default_rng([seed, step]).permutation(len(indices))]


class Fed(Protocol):
    """What `step_of` reads of a run's feed (`bench.protocol.feeding.Feed`)."""

    train: FeatureViews | None  # the training images' features; None for a method on tokens alone
    inputs: Any  # its `step_fields(rows of each step, sees_past)`: a method on tokens gets them there
    seed: int
    device: torch.device
    n_steps: int
    sees_past_steps: bool


def step_of(feed: Fed, t: int, images: Sequence[np.ndarray], *, n_classes: int, offset: int,
            labels: np.ndarray | None = None, selection: EpochSelection = LAST) -> Step:
    """Step t's `Step`, in every setting. What a setting decides comes in as data: `images`, the training images
    of each step 0..t (class-iNCD: each task's; the mixed setting: its manifest's steps); the classes the method
    is told of (`n_classes` new ones after `offset`); `labels`, the class of every training image, given only for
    a step its setting labels (they reach the method for this step's images only); and the epoch `selection`.
    The rest is the protocol's: each step's images in a seeded order (`step_order`), earlier steps' only to a
    method that declares `sees_past_steps`, and features or tokens as the method reads them."""
    rows = [step_order(np.asarray(step), feed.seed, s) for s, step in enumerate(images[:t + 1])]
    sees_past = feed.sees_past_steps

    def features_of(index: np.ndarray) -> FeatureViews | None:
        return feed.train.subset(index).to(feed.device) if feed.train is not None else None

    given = torch.as_tensor(np.asarray(labels)[rows[t]], dtype=torch.long) if labels is not None else None
    return Step(index=t, n_classes=n_classes, offset=offset, train=features_of(rows[t]), last=t == feed.n_steps - 1,
                past=[f for r in rows[:t] if (f := features_of(r)) is not None] if sees_past else [], device=feed.device, labels=given,
                selection=selection, **feed.inputs.step_fields(rows, sees_past))


# the per-epoch mean losses of the training loops of the step in progress (`record_epochs`), collected by the step
# loop (`epochs_recorded`) and stored with the run's predictions, for its page's training curves
class RecordedLoops(list[list[float]]):
    """Each training loop's losses, one list per loop, and `units`: what one value of each loop is the mean over
    (`epoch`, or e.g. `SVI step` for a loop whose points are optimiser steps)."""

    def __init__(self) -> None:
        super().__init__()
        self.units: list[str] = []


_EPOCH_LOSSES: ContextVar[RecordedLoops | None] = ContextVar("epoch_losses", default=None)


def record_epochs(losses: Sequence[float], unit: str = "epoch") -> None:
    """A training loop's mean loss per epoch (or per `unit`: what one value is), recorded with the step in
    progress (nothing outside a run)."""
    from bench.runs.predictions import LOSS_UNITS

    if unit not in LOSS_UNITS:
        raise ValueError(f"record_epochs: unit {unit!r} is not one of {', '.join(LOSS_UNITS)}")
    kept = _EPOCH_LOSSES.get()
    if kept is not None:
        kept.append([float(v) for v in losses])
        kept.units.append(unit)


@contextmanager
def epochs_recorded() -> Iterator[RecordedLoops]:
    """What the training loops of a step record (`record_epochs`): one list of per-epoch losses per loop."""
    token = _EPOCH_LOSSES.set(RecordedLoops())
    try:
        yield _EPOCH_LOSSES.get()  # type: ignore[misc]
    finally:
        _EPOCH_LOSSES.reset(token)

"""Training-view policies, looked up by the name a dataset declares: the toy datasets' own here, the
real datasets' in `bench.data.pipeline`. A policy maps float image batches N×C×H×W to augmented
views; the test transform and normalisation are `bench.data.preprocess`'s."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from bench.errors import unknown
from bench.config.spec import POLICY_PRESETS

Policy = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def random_shift(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Translate each image by up to 1/8 of its size (at least one pixel), filling with zeros:
    the small-image analogue of the authors' RandomCrop(size, padding)."""
    n, _, h, w = x.shape
    pad = max(1, h // 8)
    padded = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None].expand(n, x.shape[1], h, w + 2 * pad).to(x.device)
    out = padded.gather(2, rows)
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :].expand(n, x.shape[1], h, w).to(x.device)
    return out.gather(3, cols)


def random_flip(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    flip = (torch.rand(x.shape[0], generator=gen) < 0.5).to(x.device)
    x = x.clone()
    x[flip] = x[flip].flip(-1)
    return x


POLICIES: dict[str, Policy] = {
    "none": lambda x, gen: x,
    "shift": random_shift,  # digits: a flipped digit is another digit, so no flip
    "shift_flip": lambda x, gen: random_flip(random_shift(x, gen), gen),
}
# The real datasets' policies live in bench.data.pipeline (batched, with the authors' crop geometry):
# `code` is each dataset's own (docs/methods.md#views), `paper` the paper's SimCLR-like views for all.
# The toy datasets keep their own policy under both presets.
DATASET_POLICIES = ("cifar", "tinyimagenet", "finegrained")


def get_policy(name: str, preset: str = "code", size: int | None = None) -> Policy:
    """The training-view policy a dataset declares, under a preset; `size` is the side of the views
    the real datasets' policies produce (the backbone's input; None: the stored images' side)."""
    if preset not in POLICY_PRESETS:
        raise unknown("features.policy", preset, POLICY_PRESETS)
    if name in DATASET_POLICIES:
        from bench.data.pipeline import view_policy

        return view_policy(name, preset, size)
    if name not in POLICIES:
        raise unknown("augmentation policy", name, (*POLICIES, *DATASET_POLICIES))
    return POLICIES[name]

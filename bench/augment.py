"""Image preprocessing for feature extraction: the test ("plain") transform and training-view policies.

Both work on batches of uint8 images (N×H×W×C numpy, as datasets hold them in memory) and return
float tensors N×C×H×W ready for the backbone. Policies are looked up by the name a dataset declares.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from bench.errors import unknown
from bench.spec import POLICY_PRESETS

Policy = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 N×H×W×C → float N×C×H×W in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float().div_(255.0)


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
# `code` is each dataset's own (methods-spec §2.5), `paper` the paper's SimCLR-like views for all.
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


def prepare(x: torch.Tensor, *, input_size: int | None, channels: int | None,
            mean: tuple[float, ...] | None, std: tuple[float, ...] | None, input_scale: float = 1.0) -> torch.Tensor:
    """Normalise, match channels, then resize (shorter side to size/0.875, bicubic, then centre
    crop, as the authors' 256→224).

    Normalising first is exact (bicubic interpolation is linear with weights summing to one, so it
    commutes with a per-channel affine map) and touches the small image instead of the large one.
    `input_scale` (e.g. 1/255 for raw uint8 values) is folded into the same single pass."""
    if mean is not None and std is not None:
        m = torch.tensor(mean, dtype=x.dtype)
        s = torch.tensor(std, dtype=x.dtype)
        if len(m) != x.shape[1]:
            m, s = m.mean().expand(x.shape[1]), s.mean().expand(x.shape[1])
        x = torch.addcmul((-m / s).view(1, -1, 1, 1).to(x.device), x, (input_scale / s).view(1, -1, 1, 1).to(x.device))
    elif input_scale != 1.0:
        x = x * input_scale
    if channels and x.shape[1] != channels:
        x = x.expand(-1, channels, -1, -1) if x.shape[1] == 1 else x[:, :channels]
    if input_size and (x.shape[-1] != input_size or x.shape[-2] != input_size):
        h, w = x.shape[-2:]
        short = int(input_size / 0.875)
        scale = short / min(h, w)
        x = F.interpolate(x, size=(round(h * scale), round(w * scale)), mode="bicubic", align_corners=False)
        top, left = (x.shape[-2] - input_size) // 2, (x.shape[-1] - input_size) // 2
        x = x[..., top: top + input_size, left: left + input_size]
    return x

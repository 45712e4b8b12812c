"""Image preprocessing for feature extraction: the test ("plain") transform and training-view policies.

Both work on batches of uint8 images (N×H×W×C numpy, as datasets hold them in memory) and return
float tensors N×C×H×W ready for the backbone. Policies are looked up by the name a dataset declares.
"""
from __future__ import annotations

from typing import Callable

import math

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF

from bench.errors import unknown

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


def _per_image(x: torch.Tensor, gen: torch.Generator, p: float, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Apply `fn` to each image independently with probability p."""
    apply = torch.rand(x.shape[0], generator=gen) < p
    if not apply.any():
        return x
    x = x.clone()
    for i in torch.nonzero(apply).flatten().tolist():
        x[i] = fn(x[i])
    return x


def _uniform(gen: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand(1, generator=gen))


def crop_choice(x: torch.Tensor, gen: torch.Generator, min_scale: float = 0.5) -> torch.Tensor:
    """The authors' crop (§2.5), per image: RandomCrop with zero padding of 1/14 of the size (16 px at
    224) or RandomResizedCrop(scale=(min_scale, 1), ratio=(3/4, 4/3)), back to the input size."""
    n, _, h, w = x.shape
    pad = max(1, round(h / 14))
    padded = F.pad(x, (pad, pad, pad, pad))
    out = torch.empty_like(x)
    for i in range(n):
        if torch.rand(1, generator=gen) < 0.5:
            top, left = (int(torch.randint(0, 2 * pad + 1, (1,), generator=gen)) for _ in range(2))
            out[i] = padded[i, :, top: top + h, left: left + w]
            continue
        for _ in range(10):
            area = _uniform(gen, min_scale, 1.0) * h * w
            ratio = math.exp(_uniform(gen, math.log(3 / 4), math.log(4 / 3)))
            ch, cw = round(math.sqrt(area / ratio)), round(math.sqrt(area * ratio))
            if 0 < ch <= h and 0 < cw <= w:
                break
        else:
            ch, cw = h, w
        top = int(torch.randint(0, h - ch + 1, (1,), generator=gen))
        left = int(torch.randint(0, w - cw + 1, (1,), generator=gen))
        patch = x[i: i + 1, :, top: top + ch, left: left + cw]
        out[i] = F.interpolate(patch, size=(h, w), mode="bicubic", align_corners=False).clamp_(0, 1)[0]
    return out


def colour_jitter(x: torch.Tensor, gen: torch.Generator, p: float, strength=(0.4, 0.4, 0.2, 0.1)) -> torch.Tensor:
    b, c, s, hue = strength

    def jitter(img: torch.Tensor) -> torch.Tensor:
        img = TF.adjust_brightness(img, _uniform(gen, 1 - b, 1 + b))
        img = TF.adjust_contrast(img, _uniform(gen, 1 - c, 1 + c))
        img = TF.adjust_saturation(img, _uniform(gen, 1 - s, 1 + s))
        return TF.adjust_hue(img, _uniform(gen, -hue, hue))

    return _per_image(x, gen, p, jitter) if x.shape[1] == 3 else x


def cifar_policy(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """CIFAR (§2.5): crop choice, flip, jitter p=0.6, solarize p=0.1 (threshold ~ U[0,1)), equalize p=0.1."""
    x = colour_jitter(random_flip(crop_choice(x, gen), gen), gen, 0.6)
    x = _per_image(x, gen, 0.1, lambda img: TF.solarize(img, _uniform(gen, 0, 1)))
    return _per_image(x, gen, 0.1, lambda img: TF.equalize((img * 255).round().to(torch.uint8)).float() / 255)


def tinyimagenet_policy(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """TinyImageNet (§2.5): crop choice, flip, jitter p=0.5, grayscale p=0.2, blur σ~U[0.1,2] p=0.2."""
    x = colour_jitter(random_flip(crop_choice(x, gen), gen), gen, 0.5)
    x = _per_image(x, gen, 0.2, lambda img: TF.rgb_to_grayscale(img, num_output_channels=3))
    kernel = 2 * (x.shape[-1] // 20) + 3

    def blur(img: torch.Tensor) -> torch.Tensor:
        return TF.gaussian_blur(img, [kernel, kernel], [_uniform(gen, 0.1, 2.0)] * 2)

    return _per_image(x, gen, 0.2, blur)


def finegrained_policy(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """CUB and Herbarium (§2.5): crop choice and flip only."""
    return random_flip(crop_choice(x, gen), gen)


def simclr_policy(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """The paper's "SimCLR-like" views, for every dataset: the authors' crop choice and flip, then
    colour jitter (0.4, 0.4, 0.4, 0.1) with p=0.8 and grayscale with p=0.2."""
    x = colour_jitter(random_flip(crop_choice(x, gen), gen), gen, 0.8, (0.4, 0.4, 0.4, 0.1))
    return _per_image(x, gen, 0.2, lambda img: TF.rgb_to_grayscale(img, num_output_channels=3)
                      if img.shape[0] == 3 else img)


POLICIES: dict[str, Policy] = {
    "none": lambda x, gen: x,
    "shift": random_shift,  # digits: a flipped digit is another digit, so no flip
    "shift_flip": lambda x, gen: random_flip(random_shift(x, gen), gen),
    "cifar": cifar_policy,
    "tinyimagenet": tinyimagenet_policy,
    "finegrained": finegrained_policy,
    "simclr": simclr_policy,
}
# The real datasets declare the authors' policy (the `code` preset); `paper` replaces it with the
# paper's SimCLR-like description. The toy datasets keep their own policy under both.
DATASET_POLICIES = ("cifar", "tinyimagenet", "finegrained")
POLICY_PRESETS = ("paper", "code")


def get_policy(name: str, preset: str = "code") -> Policy:
    if preset not in POLICY_PRESETS:
        raise unknown("features.policy", preset, POLICY_PRESETS)
    if preset == "paper" and name in DATASET_POLICIES:
        name = "simclr"
    if name not in POLICIES:
        raise unknown("augmentation policy", name, POLICIES)
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

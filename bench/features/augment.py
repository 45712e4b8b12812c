"""Training-view policies, every dataset's: a policy maps a batch of images and the caller's CPU generator
to augmented views, looked up by the name a dataset declares (`get_policy`). The test transform and the
normalisation are `bench.data.preprocess`'s; what the views are cut from, `bench.data.decode`'s.

The toy datasets' policies are small shifts and flips of float N×C×H×W batches. The real datasets' follow
the authors' train transform (docs/methods.md#views) with its geometry intact: the image is resized so its
shorter side is `frame = int(size / 0.875)` (256 for a 224 backbone), then one of
RandomCrop(size, padding=(frame - size) // 2) with zero padding or
RandomResizedCrop(size, scale=(0.5, 1), ratio=(3/4, 4/3)) is taken, at random, then a horizontal flip.
All of that is one `grid_sample` per batch straight from the stored pixels to the backbone's input
(bicubic, like the authors' resize), so a 32 px CIFAR image is never materialised at 256. The colour
operations that follow (jitter in a random order per image, grayscale, blur, solarize, equalize)
are batched tensor operations on a random subset of the batch each.

Every random number is drawn from the caller's CPU generator in a fixed order, whatever the
device, so a bank built on a GPU and one built on the CPU hold the same views up to floating point.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F

from bench.config.spec import POLICY_PRESETS
from bench.data.decode import Canvas, ViewInput
from bench.errors import BenchError, unknown

Policy = Callable[[ViewInput, torch.Generator], torch.Tensor]  # images (a tensor, or files' Canvas) -> views
CROP_PCT = 0.875  # the authors' int(224 / 0.875) = 256 step
GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale


# ---------------------------------------------------------------------------------------- geometry
def _uniform(gen: torch.Generator, shape: tuple[int, ...], lo: float = 0.0, hi: float = 1.0) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)


def crop_windows(sizes: torch.Tensor, size: int, gen: torch.Generator, *, min_scale: float = 0.5,
                 resized_only: bool = False) -> tuple[torch.Tensor, ...]:
    """The authors' crop choice, per image, in the coordinates of the image resized to shorter side
    `frame = int(size / 0.875)`: (top, left, height, width, frame_h, frame_w, flip), float64 N-vectors
    (flip bool). RandomCrop(size, padding=(frame - size) // 2) or RandomResizedCrop(size, (min_scale, 1)),
    each with probability 1/2, then a horizontal flip with probability 1/2. `resized_only` always
    takes the RandomResizedCrop (BYOL's and cassle's views); the draws are the same either way."""
    n = len(sizes)
    frame = int(size / CROP_PCT)
    pad = (frame - size) // 2
    h, w = sizes[:, 0].double(), sizes[:, 1].double()
    short = torch.minimum(h, w)
    # torchvision's Resize(frame): the shorter side to `frame`, the longer to int(frame * long / short)
    fh = torch.where(h <= w, torch.full_like(h, frame), torch.floor(frame * h / short))
    fw = torch.where(w <= h, torch.full_like(w, frame), torch.floor(frame * w / short))

    use_pad = torch.rand(n, generator=gen) < 0.5
    shift = _uniform(gen, (n, 2))
    # RandomCrop(size, padding=pad): offset uniform in [0, frame_dim + 2·pad − size] of the padded image
    pad_top = torch.floor(shift[:, 0] * (fh + 2 * pad - size + 1)) - pad
    pad_left = torch.floor(shift[:, 1] * (fw + 2 * pad - size + 1)) - pad

    # RandomResizedCrop: torchvision's 10 tries, vectorised; the first that fits wins
    area = (fh * fw)[:, None]
    target = area * _uniform(gen, (n, 10), min_scale, 1.0)
    ratio = torch.exp(_uniform(gen, (n, 10), math.log(3 / 4), math.log(4 / 3)))
    cw, ch = torch.round(torch.sqrt(target * ratio)), torch.round(torch.sqrt(target / ratio))
    fits = (cw > 0) & (cw <= fw[:, None]) & (ch > 0) & (ch <= fh[:, None])
    first = torch.argmax(fits.int(), 1)
    any_fit = fits.any(1)
    rrc_h = torch.where(any_fit, ch.gather(1, first[:, None])[:, 0], fh)
    rrc_w = torch.where(any_fit, cw.gather(1, first[:, None])[:, 0], fw)
    # the fallback: the whole image, cut to the ratio range (a centre crop)
    in_ratio = fw / fh
    rrc_w = torch.where(~any_fit & (in_ratio > 4 / 3), torch.round(fh * 4 / 3), rrc_w)
    rrc_h = torch.where(~any_fit & (in_ratio < 3 / 4), torch.round(fw / (3 / 4)), rrc_h)
    place = _uniform(gen, (n, 2))
    rrc_top = torch.where(any_fit, torch.floor(place[:, 0] * (fh - rrc_h + 1)), torch.floor((fh - rrc_h) / 2))
    rrc_left = torch.where(any_fit, torch.floor(place[:, 1] * (fw - rrc_w + 1)), torch.floor((fw - rrc_w) / 2))

    flip = torch.rand(n, generator=gen) < 0.5
    if resized_only:  # after every draw, so that the default's views stay what they were
        use_pad = torch.zeros_like(use_pad)
    top = torch.where(use_pad, pad_top, rrc_top)
    left = torch.where(use_pad, pad_left, rrc_left)
    height = torch.where(use_pad, torch.full_like(h, size), rrc_h)
    width = torch.where(use_pad, torch.full_like(w, size), rrc_w)
    return top, left, height, width, fh, fw, flip


def cut_views(x: torch.Tensor, sizes: torch.Tensor, size: int, gen: torch.Generator, **crop: Any) -> torch.Tensor:
    """Crop-choice + flip views of float N×C×H×W images (image i in its top-left `sizes[i]`),
    `size`×`size`, in one bicubic `grid_sample`; the zero padding of RandomCrop stays zero. `crop`:
    `crop_windows`' options."""
    return resample(x, sizes, size, *crop_windows(sizes, size, gen, **crop))


def resample(x: torch.Tensor, sizes: torch.Tensor, size: int, top: torch.Tensor, left: torch.Tensor,
             height: torch.Tensor, width: torch.Tensor, fh: torch.Tensor, fw: torch.Tensor,
             flip: torch.Tensor) -> torch.Tensor:
    """The windows (top, left, height, width) of each image resized to fh×fw, flipped where `flip`,
    as `size`×`size` images; pixels outside the resized image are zero."""
    steps = (torch.arange(size, dtype=torch.float64) + 0.5) / size
    ys = top[:, None] + steps[None] * height[:, None]  # frame coordinates of the output pixel centres
    xs = left[:, None] + steps[None] * width[:, None]
    xs = torch.where(flip[:, None], xs.flip(1), xs)
    inside = ((ys >= 0) & (ys < fh[:, None]))[:, :, None] & ((xs >= 0) & (xs < fw[:, None]))[:, None, :]
    # frame → stored pixels → grid_sample's [-1, 1] over the whole canvas (align_corners=False)
    gy = 2 * ys * (sizes[:, 0:1].double() / fh[:, None]) / x.shape[-2] - 1
    gx = 2 * xs * (sizes[:, 1:2].double() / fw[:, None]) / x.shape[-1] - 1
    n = len(x)
    grid = torch.stack([gx[:, None, :].expand(n, size, size), gy[:, :, None].expand(n, size, size)], -1)
    out = F.grid_sample(x, grid.to(x.device, x.dtype), mode="bicubic", padding_mode="border", align_corners=False)
    return out.clamp_(0, 1).mul_(inside[:, None].to(x.device, x.dtype))


# ------------------------------------------------------------------------------------------ colour
def _gray(x: torch.Tensor) -> torch.Tensor:
    if x.shape[-3] == 1:
        return x
    r, g, b = x.unbind(-3)
    return (GRAY_WEIGHTS[0] * r + GRAY_WEIGHTS[1] * g + GRAY_WEIGHTS[2] * b).unsqueeze(-3)


def _per_image(f: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return f.to(x.device, x.dtype).view(-1, 1, 1, 1)


def brightness(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return (x * _per_image(f, x)).clamp_(0, 1)


def contrast(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    mean = _gray(x).mean((-3, -2, -1), keepdim=True)
    f = _per_image(f, x)
    return (f * x + (1 - f) * mean).clamp_(0, 1)


def saturation(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    f = _per_image(f, x)
    return (f * x + (1 - f) * _gray(x)).clamp_(0, 1)


def hue(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Shift the hue of each image by f (a fraction of the colour circle), via HSV as torchvision."""
    r, g, b = x.unbind(-3)
    maxc, minc = x.max(-3).values, x.min(-3).values
    flat = maxc == minc
    delta = maxc - minc
    s = delta / torch.where(flat, torch.ones_like(maxc), maxc)
    d = torch.where(flat, torch.ones_like(delta), delta)
    rc, gc, bc = (maxc - r) / d, (maxc - g) / d, (maxc - b) / d
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.fmod((h / 6.0 + 1.0) + _per_image(f, x)[:, 0], 1.0)
    v = maxc
    sector = torch.floor(h * 6.0)
    frac = h * 6.0 - sector
    sector = sector.long() % 6
    p = (v * (1 - s)).clamp(0, 1)
    q = (v * (1 - s * frac)).clamp(0, 1)
    t = (v * (1 - s * (1 - frac))).clamp(0, 1)
    table = torch.stack([torch.stack(c) for c in ((v, q, p, p, t, v), (t, v, v, q, p, p), (p, p, t, v, v, q))])
    return table.gather(1, sector[None, None].expand(3, 1, *sector.shape))[:, 0].permute(1, 0, 2, 3)


def grayscale(x: torch.Tensor) -> torch.Tensor:
    return _gray(x).expand_as(x).clone()


def solarize(x: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """PIL's solarize at a per-image threshold in [0, 1]: values at or above it are inverted."""
    return torch.where(x >= _per_image(threshold, x), 1 - x, x)


def equalize(x: torch.Tensor) -> torch.Tensor:
    """PIL's per-channel histogram equalisation, on the images quantised to 8 bits (batched)."""
    # imported here: torchvision pulls in torch._dynamo and sympy (2 s), which no other path needs
    import torchvision.transforms.v2.functional as TF

    return TF.equalize((x * 255).round_().to(torch.uint8)).to(x.dtype).div_(255)


def gaussian_blur(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Separable Gaussian blur with a per-image σ (pixels), edges replicated."""
    n, c, height, width = x.shape
    radius = min(int(math.ceil(3 * float(sigma.max()))), (min(height, width) - 1) // 2)
    if radius < 1:
        return x
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
    kernel = torch.exp(-0.5 * (offsets[None] / sigma.double()[:, None]) ** 2)
    kernel = (kernel / kernel.sum(1, keepdim=True)).to(x.device, x.dtype).repeat_interleave(c, 0)
    y = F.pad(x.reshape(1, n * c, height, width), (radius, radius, radius, radius), mode="replicate")
    y = F.conv2d(y, kernel[:, None, None, :], groups=n * c)
    y = F.conv2d(y, kernel[:, None, :, None], groups=n * c)
    return y.view(n, c, height, width)


JITTER_OPS = (brightness, contrast, saturation, hue)


# ----------------------------------------------------------------------------------- real datasets
@dataclass(frozen=True)
class ViewPolicy:
    """A training-view policy: the authors' crop choice and flip, then, each on a random subset of
    the batch, ColorJitter(`jitter`) with p=`jitter_p` (its four operations in a random order per
    image, as torchvision), grayscale, Gaussian blur (σ ~ U[0.1, 2] at 224 px, scaled with the
    output), solarize (threshold ~ U[0, 256) out of 255, or the fixed `solarize_threshold`) and equalize,
    in that order.

    `crop_min_scale` is the RandomResizedCrop's smallest area fraction, `resized_only` drops the
    RandomCrop alternative (both for CaSSLe's BYOL views: cassle's RandomResizedCrop(scale=(0.08, 1))).
    `size` is the side of the views (the backbone's input); None keeps the stored images' side."""

    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.2, 0.1)  # brightness, contrast, saturation, hue
    jitter_p: float = 0.0
    grayscale_p: float = 0.0
    blur_p: float = 0.0
    solarize_p: float = 0.0
    equalize_p: float = 0.0
    crop_min_scale: float = 0.5
    resized_only: bool = False
    solarize_threshold: float | None = None
    size: int | None = None

    def with_size(self, size: int | None) -> "ViewPolicy":
        return replace(self, size=size)

    def __call__(self, x: torch.Tensor | Canvas, gen: torch.Generator) -> torch.Tensor:
        if isinstance(x, Canvas):
            sizes, pixels = x.sizes, x.pixels
        else:
            sizes, pixels = torch.tensor([x.shape[-2:]], dtype=torch.int64).expand(len(x), 2), x
        pixels = pixels.float().div_(255) if pixels.dtype == torch.uint8 else pixels.float()
        size = self.size or int(sizes.min())
        out = cut_views(pixels, sizes, size, gen, min_scale=self.crop_min_scale, resized_only=self.resized_only)
        return self.colour(out, gen)

    def colour(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        n = len(x)
        rgb = x.shape[1] == 3
        apply = torch.rand(n, generator=gen) < self.jitter_p
        order = torch.argsort(torch.rand(n, 4, generator=gen), 1)
        b, c, s, h = self.jitter
        factors = torch.stack([_uniform(gen, (n,), max(0.0, 1 - b), 1 + b), _uniform(gen, (n,), max(0.0, 1 - c), 1 + c),
                               _uniform(gen, (n,), max(0.0, 1 - s), 1 + s), _uniform(gen, (n,), -h, h)], 1)
        to_gray = torch.rand(n, generator=gen) < self.grayscale_p
        blur = torch.rand(n, generator=gen) < self.blur_p
        sigma = _uniform(gen, (n,), 0.1, 2.0) * x.shape[-1] / 224
        solar = torch.rand(n, generator=gen) < self.solarize_p
        threshold = _uniform(gen, (n,), 0.0, 256.0) / 255
        if self.solarize_threshold is not None:  # drawn all the same: the later draws stay where they were
            threshold = torch.full_like(threshold, self.solarize_threshold / 255)
        equal = torch.rand(n, generator=gen) < self.equalize_p

        for position in range(4):
            for op, fn in enumerate(JITTER_OPS):
                chosen = apply & (order[:, position] == op)
                if chosen.any() and (rgb or op < 2):
                    x[chosen.to(x.device)] = fn(x[chosen.to(x.device)], factors[chosen, op])
        if rgb and to_gray.any():
            x[to_gray.to(x.device)] = grayscale(x[to_gray.to(x.device)])
        if blur.any():
            x[blur.to(x.device)] = gaussian_blur(x[blur.to(x.device)], sigma[blur])
        if solar.any():
            x[solar.to(x.device)] = solarize(x[solar.to(x.device)], threshold[solar])
        if equal.any():
            x[equal.to(x.device)] = equalize(x[equal.to(x.device)])
        return x


def policy_variant(policy: Any, fields: Mapping[str, Any]) -> Any:
    """A real dataset's view policy with some of its probabilities changed (e.g. BYOL's asymmetric
    blur and solarisation per view); the toy datasets' shift policies have none and stay as they are."""
    return replace(policy, **fields) if isinstance(policy, ViewPolicy) else policy


# `code`: the authors' per-dataset policies (docs/methods.md#views); `paper`: the paper's "SimCLR-like"
# views, one policy for every dataset.
CODE_POLICIES = {
    "cifar": ViewPolicy(jitter_p=0.6, solarize_p=0.1, equalize_p=0.1),
    "tinyimagenet": ViewPolicy(jitter_p=0.5, grayscale_p=0.2, blur_p=0.2),
    "finegrained": ViewPolicy(),
}
PAPER_POLICY = ViewPolicy(jitter=(0.4, 0.4, 0.4, 0.1), jitter_p=0.8, grayscale_p=0.2)


def view_policy(name: str, preset: str, size: int | None) -> ViewPolicy:
    """The view policy of a real dataset (`cifar`, `tinyimagenet`, `finegrained`) under a preset."""
    return (PAPER_POLICY if preset == "paper" else CODE_POLICIES[name]).with_size(size)


# ------------------------------------------------------------------------------------ toy datasets
def _in_memory(x: ViewInput) -> torch.Tensor:
    """The toy policies shift and flip small images held in memory; a dataset read from files needs a real one."""
    if isinstance(x, Canvas):
        raise BenchError(f"the toy augmentation policies ({', '.join(TOY_POLICIES)}) take images held in memory; "
                         f"a dataset read from files declares one of {', '.join(CODE_POLICIES)}")
    return x


def random_shift(x: ViewInput, gen: torch.Generator) -> torch.Tensor:
    """Translate each image by up to 1/8 of its size (at least one pixel), filling with zeros:
    the small-image analogue of the authors' RandomCrop(size, padding)."""
    x = _in_memory(x)
    n, _, h, w = x.shape
    pad = max(1, h // 8)
    padded = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None].expand(n, x.shape[1], h, w + 2 * pad).to(x.device)
    out = padded.gather(2, rows)
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :].expand(n, x.shape[1], h, w).to(x.device)
    return out.gather(3, cols)


def random_flip(x: ViewInput, gen: torch.Generator) -> torch.Tensor:
    x = _in_memory(x)
    flip = (torch.rand(x.shape[0], generator=gen) < 0.5).to(x.device)
    x = x.clone()
    x[flip] = x[flip].flip(-1)
    return x


# The toy datasets keep their own policy under both presets.
TOY_POLICIES: dict[str, Policy] = {
    "none": lambda x, gen: _in_memory(x),
    "shift": random_shift,  # digits: a flipped digit is another digit, so no flip
    "shift_flip": lambda x, gen: random_flip(random_shift(x, gen), gen),
}


def get_policy(name: str, preset: str = "code", size: int | None = None) -> Policy:
    """The training-view policy a dataset declares, under a preset; `size` is the side of the views
    the real datasets' policies produce (the backbone's input; None: the stored images' side)."""
    if preset not in POLICY_PRESETS:
        raise unknown("features.policy", preset, POLICY_PRESETS)
    if name in CODE_POLICIES:
        return view_policy(name, preset, size)
    if name not in TOY_POLICIES:
        raise unknown("augmentation policy", name, (*TOY_POLICIES, *CODE_POLICIES))
    return TOY_POLICIES[name]

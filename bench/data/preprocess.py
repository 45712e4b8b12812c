"""From stored images to the backbone's input: uint8 batches to float tensors, normalisation and the
authors' resize-and-centre-crop. The lowest layer of the image path: it imports nothing of `bench`."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 N×H×W×C → float N×C×H×W in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float().div_(255.0)


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

"""What a forward computes in on CUDA: bf16 autocast for the frozen backbone (the prefix, feature
extraction), `precision.tails` (`bench.config.spec.PRECISIONS`) for the blocks a method trains; fp32
off CUDA. One home for the frozen encoder's forwards and the trained tails' alike."""
from __future__ import annotations

from typing import Any

import torch


def autocast_args(device_type: str, precision: str) -> dict[str, Any]:
    """`torch.autocast`'s arguments for a forward on a device of `device_type` in `precision`
    (`bench.config.spec.PRECISIONS`): bf16 autocast on CUDA for `bf16`; disabled (fp32) for `fp32` and off CUDA."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"unknown precision {precision!r}; choose from fp32, bf16")
    return dict(device_type="cuda", dtype=torch.bfloat16, enabled=precision == "bf16" and device_type == "cuda")


def autocast_for(device: torch.device | str, precision: str) -> torch.autocast:
    """The autocast a forward on `device` runs under in `precision` (see `autocast_args`)."""
    return torch.autocast(**autocast_args(torch.device(device).type, precision))


def cuda_bf16(device: torch.device) -> torch.autocast:
    """bf16 autocast for the frozen backbone's forwards on CUDA (features are returned in fp32): the
    prefix and feature extraction, whatever `precision.tails`; off elsewhere."""
    return autocast_for(device, "bf16")

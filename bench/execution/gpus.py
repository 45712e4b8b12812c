"""The GPUs of this machine as slots for the local pool: one warm worker per slot, each with its own
`CUDA_VISIBLE_DEVICES`, so that a node with eight GPUs runs eight runs at once instead of eight on GPU 0.

A slot is a GPU's name as `CUDA_VISIBLE_DEVICES` spells it (an index such as `3`, or a UUID where the
variable held UUIDs); `--runs-per-gpu N` repeats each GPU N times, for runs small enough to share one.
Inside a worker the GPU is `cuda:0`, so a run's `device` stays `cuda`; the run records the slot it was
given (`gpu` in its metrics and log). On a machine without GPUs there are no slots and nothing changes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from bench.core.provenance import cuda_visible_names
from bench.errors import BenchError, ascii_digits

VISIBLE = "CUDA_VISIBLE_DEVICES"
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # a folder per GPU the NVIDIA driver drives
DEVICES = Path("/dev")  # /dev/nvidia0, /dev/nvidia1 …: what a container given GPUs sees, /proc or not (gVisor)


def driver_present() -> bool:
    """Whether an NVIDIA driver drives a GPU here: read without importing torch, so that a command that runs
    nothing (`bench run --dry-run`) stays light on a machine without GPUs."""
    try:
        if any(NVIDIA_GPUS.iterdir()):
            return True
    except OSError:
        pass
    try:
        return any(p.name[len("nvidia"):].isdigit() for p in DEVICES.glob("nvidia[0-9]*"))
    except OSError:
        return False


def visible_gpus() -> list[str]:
    """The GPUs this process may use, by the names `CUDA_VISIBLE_DEVICES` gives them (indices otherwise):
    empty without CUDA. The count is CUDA's; the names are the variable's, so that a worker handed one
    name sees the same GPU the parent saw under it."""
    if not driver_present():
        return []
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    named = cuda_visible_names()
    return (named + [str(i) for i in range(len(named), count)])[:count]


def gpu_slots(wanted: Sequence[str] | None, per_gpu: int = 1, *, device: str | None = None) -> list[str]:
    """The slots of the local pool: `wanted` (`--gpus`: names or indices of visible GPUs, or "all") or
    every visible GPU, each `per_gpu` times; none where the runs compute on the CPU (`--device cpu`)
    or the machine has no GPU. Asking for a GPU it does not have is an error naming those it has."""
    if per_gpu < 1:
        raise BenchError(f"--runs-per-gpu {per_gpu}: must be an integer >= 1 (runs sharing one GPU)")
    if device is not None and device != "cuda":
        if wanted:
            raise BenchError(f"--gpus places runs on GPUs and --device {device} on one device: give one of them "
                             f"(with --gpus each run sees its GPU as `cuda`)")
        return []
    visible = visible_gpus()
    if not wanted or list(wanted) == ["all"]:
        chosen = visible
    else:
        if not visible:
            raise BenchError(f"--gpus {','.join(wanted)}: this machine has no CUDA device (leave --gpus out to run "
                             f"on the CPU)")
        unknown = [g for g in wanted if g not in visible and not (ascii_digits(g) and int(g) < len(visible))]
        if unknown:
            indices = "index 0" if len(visible) == 1 else f"indices 0-{len(visible) - 1}"
            raise BenchError(f"--gpus: no visible GPU {', '.join(unknown)}; visible here: {', '.join(visible)} "
                             f"(or {indices}, or all)")
        chosen = [g if g in visible else visible[int(g)] for g in wanted]
        if len(set(chosen)) < len(chosen):
            raise BenchError(f"--gpus {','.join(wanted)} names a GPU twice; to share a GPU use --runs-per-gpu N")
    return [gpu for gpu in chosen for _ in range(per_gpu)]


def parse_gpus(text: str | None) -> list[str] | None:
    """`--gpus 0,2` or `--gpus all` as a list (None: not given)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise BenchError("--gpus takes GPU indices or names separated by commas (e.g. 0,1,3), or all")
    return names


def take_slot(slots: object) -> str | None:
    """In a fresh worker, before anything touches CUDA: its GPU from the pool's queue of slots, made the
    only one it sees. Returns the slot (None without slots)."""
    if slots is None:
        return None
    # a multiprocessing queue holding one slot per worker of the pool (its feeder thread may still be writing)
    slot = slots.get(timeout=60)  # type: ignore[attr-defined]
    os.environ[VISIBLE] = slot
    return slot


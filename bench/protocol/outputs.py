"""What a method answers is checked before it is scored: a prediction function of the wrong shape would still
give an argmax, and a run that finishes with meaningless numbers (an N × 1 head scores every image as class 0).

`logits(x)` is N × (every class seen so far), `task_logits(x, t)` N × (task t's classes); anything else fails the
run in one line naming the method and both shapes.
"""
from __future__ import annotations


import torch

from bench.errors import BenchError
from bench.protocol.hooks import MethodHooks


def checked(method: MethodHooks, what: str, out: torch.Tensor, rows: int, width: int, step: int) -> torch.Tensor:
    """`out` (what `method`'s `what` answered for `rows` images at step `step`, 0-based) if it is rows × width."""
    shape = tuple(out.shape)
    if shape != (rows, width):
        raise BenchError(f"method {type(method).__name__}: {what} of {rows} images after step {step + 1} has shape "
                         f"{shape}, not {rows} × {width} (one column per class {'of the task' if 'task' in what else 'seen so far'})")
    return out

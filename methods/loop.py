"""The one epoch loop every trained method runs: SGD with the authors' cosine schedule, a seeded
shuffle per epoch, mini-batches; a method hands it only its loss (docs/methods.md#epoch-loop)."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn

from bench.protocol.step import record_epochs


def cosine_lr(epoch: int, epochs: int, lr: float, eta_min: float) -> float:
    """CosineAnnealingLR(T_max=epochs) stepped at the START of each epoch, as in the authors'
    code: epoch e (0-based) runs at the schedule's value for e+1, the last epoch at eta_min."""
    return eta_min + (lr - eta_min) * (1 + math.cos(math.pi * (epoch + 1) / epochs)) / 2


def step_lr(epoch: int, lr: float, step_size: int, gamma: float) -> float:
    """StepLR(step_size, gamma) stepped at the START of each epoch, as FRoST's code: epoch e (0-based)
    runs at lr·γ^⌊(e+1)/step_size⌋, so with step size 170 the 170th epoch is the first at lr·γ."""
    return lr * gamma ** ((epoch + 1) // step_size)


def cosine_after_epoch(epoch: int, epochs: int, lr: float, eta_min: float) -> float:
    """CosineAnnealingLR(T_max=epochs) stepped at the END of each epoch, as SimGCD's code (Happy, PromptCCD): epoch
    e (0-based) runs at the schedule's value for e, the first at `lr`."""
    return eta_min + (lr - eta_min) * (1 + math.cos(math.pi * epoch / epochs)) / 2


def parameter_groups(modules: Sequence[nn.Module], weight_decay: float) -> list[dict[str, Any]]:
    """SimGCD's groups for `sgd`: weight decay on the ≥2-D weights, none on biases and 1-D weights (norms)."""
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


Parameters = Iterable[nn.Parameter] | Iterable[dict[str, Any]]  # tensors, or groups with their own options


def sgd(parameters: Parameters, hp: dict) -> torch.optim.SGD:
    params: list[Any] = list(parameters)  # torch's own union of what an optimiser takes
    return torch.optim.SGD(params, lr=hp["lr"], momentum=hp["momentum"], weight_decay=hp["weight_decay"])


def train_epochs(parameters: Parameters, hp: dict, *, epochs: int, sizes: Sequence[int], batch_size: int,
                 gen: torch.Generator, loss_of: Callable[[list[torch.Tensor]], torch.Tensor],
                 lr_at: Callable[[int], float] | None = None,
                 on_epoch: Callable[[int], None] | None = None,
                 after_step: Callable[[], None] | None = None, drop_last: bool = False,
                 read_ahead: Sequence[Any] = (), after_epoch: Callable[[int], None] | None = None) -> list[float]:
    """Train `parameters` for `epochs` with SGD (`hp`: lr, momentum, weight_decay, eta_min), a fresh
    optimiser and a cosine schedule restarting from `lr`, as every step of the authors' code
    (`lr_at(epoch)` replaces the schedule; `on_epoch(epoch)` is called as each epoch starts,
    `after_step()` after every optimiser step, `after_epoch(epoch)` after each epoch's last (a step's
    epoch selection, `bench.protocol.epoch_selection`); `drop_last` drops a last partial batch, unless it
    would be the only one; `read_ahead` holds the token sources of the sources of `sizes`, told
    each next batch's images before the current batch is computed, where they can read ahead).

    Each epoch shuffles each of the sources of `sizes` items with `gen` and cuts batches of
    `batch_size`, the last one partial (drop_last=False). Several sources are zipped, as the authors'
    zipped loaders: an epoch lasts as long as the shortest. `loss_of` gets one index tensor per source
    and returns the batch's loss. Returns the mean loss per epoch (weighted by the first source's rows)."""
    opt = sgd(parameters, hp)
    iterations = min(max(1, n // batch_size) if drop_last else -(-n // batch_size) for n in sizes)
    losses = []
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = lr_at(epoch) if lr_at else cosine_lr(epoch, epochs, hp["lr"], hp["eta_min"])
        if on_epoch:
            on_epoch(epoch)
        orders = [torch.randperm(n, generator=gen) for n in sizes]
        total, rows = 0.0, 0
        readers = [(source.read_ahead, order) for source, order in zip(read_ahead, orders)
                   if hasattr(source, "read_ahead")]
        for it in range(iterations):
            index = [order[it * batch_size: (it + 1) * batch_size] for order in orders]
            for read, order in readers if it + 1 < iterations else ():
                read(order[(it + 1) * batch_size: (it + 2) * batch_size])
            loss = loss_of(index)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if after_step:
                after_step()
            total, rows = total + loss.item() * len(index[0]), rows + len(index[0])
        losses.append(total / max(rows, 1))
        if after_epoch:
            after_epoch(epoch)
    for source in read_ahead:
        if hasattr(source, "end_read_ahead"):
            source.end_read_ahead()
    record_epochs(losses)  # the run's page draws them (its training curves)
    return losses

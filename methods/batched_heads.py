"""Many cosine heads trained at once (docs/performance.md#tuning-batched-trials): the heads of N trials of one study,
stacked into one N × C × D weight and trained on the same batches, as `bench tune --batch` runs them.

Trials of one study share the data, the seed, the batch size and the epochs, so every draw of the generator (each
epoch's shuffle, each batch's two views) is the same for all of them: it is drawn once here and used by all N. What
differs are per-trial scalars (`PER_TRIAL`: the learning rate, its floor, momentum, weight decay, the temperature
and the Sinkhorn epsilon); each head gets its own SGD update and cosine schedule with them. Each trial's loss is the
one `train_head_swapped` / `train_head_supervised` computes for it alone, and the N losses are summed before one
backward: a head's parameters reach its own loss only, so each gradient is the one it would get alone. One batched
matrix product per batch in place of N small ones: on a CPU it saves the per-call overhead of N optimisers and
kernels, on a GPU the per-step launch cost.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from bench.features.views import FeatureViews
from bench.methods.blocks import SWAP_REDUCTIONS, CosineHead
from bench.methods.loop import cosine_lr

# the keys of a method's hparams that may differ between the heads of one batch
PER_TRIAL = ("lr", "eta_min", "momentum", "weight_decay", "temperature", "sk_epsilon")
AfterEpoch = Callable[[int], None] | None


def _column(hps: Sequence[Mapping], key: str, weight: torch.Tensor) -> torch.Tensor:
    """Each trial's `key` as an N × 1 × 1 tensor, to broadcast over its head."""
    return torch.tensor([float(hp[key]) for hp in hps], dtype=weight.dtype, device=weight.device).view(-1, 1, 1)


@torch.no_grad()
def sinkhorn_batched(logits: torch.Tensor, epsilon: torch.Tensor, n_iters: int) -> torch.Tensor:
    """`blocks.sinkhorn_knopp` of each trial's B × K logits in an N × B × K stack (`epsilon`: N × 1 × 1), each with
    its own global max, as it would be alone."""
    q = torch.exp((logits - logits.amax(dim=(1, 2), keepdim=True)) / epsilon).transpose(1, 2)  # N × K × B
    q = q / q.sum(dim=(1, 2), keepdim=True)
    k, b = q.shape[1], q.shape[2]
    for _ in range(n_iters):
        q = q / q.sum(dim=2, keepdim=True)
        q = q / k
        q = q / q.sum(dim=1, keepdim=True)
        q = q / b
    return (q / q.sum(dim=1, keepdim=True)).transpose(1, 2)


def _soft_ce(logits: torch.Tensor, targets: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """`blocks.soft_cross_entropy` per trial: N losses."""
    probs = F.softmax(logits / temperature, dim=2)
    return -(targets * torch.log(probs.clamp_min(1e-8))).sum(2).mean(1)


def _hard_ce(logits: torch.Tensor, targets: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """`blocks.hard_cross_entropy` per trial: N losses."""
    probs = F.softmax(logits / temperature, dim=2)
    picked = probs.gather(2, targets.view(1, -1, 1).expand(probs.shape[0], -1, 1))
    return -torch.log(picked.clamp_min(1e-8)).squeeze(2).mean(1)


class BatchedHeads:
    """N cosine heads of `n_out` classes on `in_dim` features, one per trial of `hps`, initialised from `heads`
    (each trial's own head, as its run alone made it) and written back into them by `write_back`."""

    def __init__(self, heads: Sequence[CosineHead], hps: Sequence[Mapping]) -> None:
        if len(heads) != len(hps) or not heads:
            raise ValueError(f"BatchedHeads: {len(heads)} heads for {len(hps)} trials; one head per trial")
        if len({h.normalize_weights for h in heads}) != 1 or len({tuple(h.weight.shape) for h in heads}) != 1:
            raise ValueError("BatchedHeads: the heads of one batch share their shape and weight normalisation")
        self.heads, self.hps = list(heads), list(hps)
        self.normalize_weights = heads[0].normalize_weights
        self.weight = torch.stack([h.weight.detach() for h in heads]).clone().requires_grad_(True)  # N × C × D
        self.momentum_buffer: torch.Tensor | None = None

    @torch.no_grad()
    def renormalize(self) -> None:
        if self.normalize_weights:
            self.weight.copy_(F.normalize(self.weight, dim=2, eps=1e-12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Training-mode logits of every head: N × B × C (the features normalised, the weights as they are)."""
        return torch.matmul(F.normalize(x, dim=1, eps=1e-12), self.weight.transpose(1, 2))

    @torch.no_grad()
    def write_back(self) -> None:
        """Each trial's head holds its slice of the stack."""
        for i, head in enumerate(self.heads):
            head.weight.copy_(self.weight[i])

    @torch.no_grad()
    def sgd_step(self, lr: torch.Tensor, momentum: torch.Tensor, weight_decay: torch.Tensor) -> None:
        """torch.optim.SGD's update (no dampening, no Nesterov), each trial with its own scalars: the first step's
        buffer is the gradient itself, as torch's is."""
        grad = self.weight.grad
        assert grad is not None
        d_p = grad.add(self.weight * weight_decay)
        if self.momentum_buffer is None:
            self.momentum_buffer = d_p.clone()
        else:
            self.momentum_buffer.mul_(momentum).add_(d_p)
        step = torch.where(momentum != 0, self.momentum_buffer, d_p)
        self.weight.sub_(lr * step)
        self.weight.grad = None


def train_heads(heads: Sequence[CosineHead], data: FeatureViews, hps: Sequence[Mapping], *, epochs: int,
                batch_size: int, gen: torch.Generator, labels: torch.Tensor | None = None,
                after_epoch: Sequence[AfterEpoch] | None = None) -> list[list[float]]:
    """Train `heads` (one per trial, hyper-parameters `hps`) together on `data`: the swapped Sinkhorn loss
    (`train_head_swapped`), or with `labels` the cross-entropy of the labels (`train_head_supervised`); the epochs,
    batches and draws of `gen` those would make for one trial. `after_epoch[i](epoch)` is called after each epoch
    with trial i's head holding its weights (its epoch selection). Returns each trial's mean loss per epoch; the
    heads hold their trained weights, in eval mode."""
    if not heads:
        return []
    shared = {k: {repr(hp.get(k)) for hp in hps} for k in ("sk_iters", "swap_reduction")}
    if any(len(v) > 1 for v in shared.values()):
        raise ValueError(f"train_heads: the trials of one batch share sk_iters and swap_reduction; got {shared}")
    reduction = hps[0]["swap_reduction"] if labels is None else "mean"
    if reduction not in SWAP_REDUCTIONS:
        raise ValueError(f"unknown swapped-loss reduction {reduction!r}; choose from {', '.join(SWAP_REDUCTIONS)}")
    stack = BatchedHeads(heads, hps)
    w = stack.weight
    temperature = _column(hps, "temperature", w)
    momentum, weight_decay = _column(hps, "momentum", w), _column(hps, "weight_decay", w)
    epsilon = _column(hps, "sk_epsilon", w) if labels is None else None
    callbacks = list(after_epoch) if after_epoch is not None else [None] * len(heads)
    n = len(data)
    iterations = -(-n // batch_size)
    losses: list[list[float]] = [[] for _ in heads]
    for epoch in range(epochs):
        lr = torch.tensor([cosine_lr(epoch, epochs, hp["lr"], hp["eta_min"]) for hp in hps], dtype=w.dtype,
                          device=w.device).view(-1, 1, 1)
        order = torch.randperm(n, generator=gen)
        totals, rows = [0.0] * len(heads), 0
        for it in range(iterations):
            index = order[it * batch_size: (it + 1) * batch_size]
            x1, x2 = data.two_views(index, gen)
            stack.renormalize()
            if labels is None:
                z1, z2 = stack.forward(x1), stack.forward(x2)
                t1 = sinkhorn_batched(z2.detach(), epsilon, hps[0]["sk_iters"])  # type: ignore[arg-type]
                t2 = sinkhorn_batched(z1.detach(), epsilon, hps[0]["sk_iters"])  # type: ignore[arg-type]
                loss = _soft_ce(torch.cat([z1, z2], 1), torch.cat([t1, t2], 1), temperature)
                loss = 2 * loss if reduction == "sum" else loss
            else:
                y = labels[index].to(x1.device)
                loss = _hard_ce(stack.forward(torch.cat([x1, x2])), torch.cat([y, y]), temperature)
            loss.sum().backward()  # each head's gradient is its own loss's
            stack.sgd_step(lr, momentum, weight_decay)
            totals = [t + v * len(index) for t, v in zip(totals, loss.detach().tolist())]
            rows += len(index)
        for i, total in enumerate(totals):
            losses[i].append(total / max(rows, 1))
        if any(callbacks):
            stack.write_back()
            for callback in callbacks:
                if callback is not None:
                    callback(epoch)
    stack.write_back()
    for head in heads:
        head.eval()
    return losses

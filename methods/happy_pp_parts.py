"""What Happy++ adds to Happy (Ma et al., TPAMI'26; docs/methods.md#happy-tpami26), as its code computes it (Happy-CGCD's
`train_happy_plus_plus.py`, `models/ema.py`; the confident self-distillation from ProtoGCD's `DistillLoss_ratio`,
which the script imports), on an unlabelled step's cosine logits s of the 2B views, the head's rows W (directions
v, unit rows v̂) and the terms L_1..L_5 of its loss (clustering, contrastive, w_hap·L_hap, w_kd·L_kd, w_l2·L_l2):

    confident self-distillation (`confident_distil`), ProtoGCD's: in each teacher view q = softmax(s/τ_t), the
        ⌊ρ(e)·B⌋ rows with the largest q_(1)/(q_(2) + 1e-6) take the one-hot of their argmax as target;
        ρ(e) rises linearly from 0 to 1 over the first `ramp` epochs (`confident_ratio`); otherwise L_distil's
    L2 on the old rows (`old_rows_l2`): L_l2 = mean (v_o − v_o^prev)² + mean (v̂_o − v̂_o^prev)² over the K_seen rows
        known before the step and the D dimensions (the script's mean squared error on `weight_v` and `weight`;
        its `weight_g` is fixed at 1 in both, a zero term)
    smooth Tchebycheff scalarisation (`smooth_max`, STCH): L = μ·log Σ_i exp(L_i/μ) in place of Σ_i L_i
    EMA of the weights (`WeightAverage`): after every optimiser step a ← α_new·θ + α_old·a over the trained
        parameters (a starts at θ); at the end of each epoch θ ← a (not a convex mix: the script does not ask
        α_new + α_old = 1)
    the SWA learning rate (`swa_lr`): torch's `SWALR` (cosine anneal) on top of the step's cosine schedule, stepped
        in its place after every epoch from `start` on (the script's `epoch > 16`): no weight is averaged, only the
        rate changes
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def confident_ratio(epoch: int, ramp_epochs: int) -> float:
    """ρ at `epoch` (0-based): np.linspace(0, 1, ramp_epochs)[epoch] for the first `ramp_epochs`, then 1."""
    if epoch >= ramp_epochs:
        return 1.0
    return epoch / (ramp_epochs - 1) if ramp_epochs > 1 else 0.0


def confident_targets(logits: torch.Tensor, teacher_temperature: float, ratio: float) -> torch.Tensor:
    """softmax(logits/τ_t) with its ⌊ratio·rows⌋ most confident rows (largest top-1 over top-2 probability)
    replaced by the one-hot of their argmax; no gradient."""
    q = F.softmax(logits.detach() / teacher_temperature, dim=1)
    top = torch.topk(q, k=2, dim=1).values
    kept = torch.topk(top[:, 0] / (top[:, 1] + 1e-6), k=int(len(q) * ratio)).indices
    q[kept] = F.one_hot(q[kept].argmax(1), q.shape[1]).to(q)
    return q


def confident_distil(logits1: torch.Tensor, logits2: torch.Tensor, student_temperature: float,
                     teacher_temperature: float, ratio: float) -> torch.Tensor:
    """L_distil with `confident_targets` as each view's target for the other, the mean over the two ordered pairs."""
    total = logits1.new_zeros(())
    for teacher, student in ((logits1, logits2), (logits2, logits1)):
        q = confident_targets(teacher, teacher_temperature, ratio)
        total = total + (-q * F.log_softmax(student / student_temperature, dim=1)).sum(1).mean()
    return total / 2


def old_rows_l2(rows: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """L_l2 of the head's first len(`previous`) rows (its directions v) against the previous step's."""
    now, before = rows[:len(previous)], previous.detach()
    return F.mse_loss(now, before) + F.mse_loss(F.normalize(now, dim=1), F.normalize(before, dim=1))


def smooth_max(terms: list[torch.Tensor], mu: float) -> torch.Tensor:
    """STCH's μ·log Σ exp(L_i/μ) (as logsumexp, the same value without overflow)."""
    return mu * torch.logsumexp(torch.stack(terms) / mu, dim=0)


def swa_lr(epoch: int, cosine: list[float], swa: float, start: int, anneal_epochs: int) -> float:
    """The learning rate of `epoch` (0-based) when `SWALR(anneal_epochs, swa_lr=swa, cosine anneal)` replaces the
    cosine schedule `cosine` (its rate per epoch) from the end of epoch `start` on: epochs up to `start` run at
    the cosine's rate; epoch start + k at swa·α + c·(1 − α), α = (1 − cos(π·min(1, k/anneal_epochs)))/2, c the
    cosine's rate at `start`."""
    if epoch <= start:
        return cosine[epoch]
    t = min(1.0, (epoch - start) / max(1, anneal_epochs))
    alpha = (1 - math.cos(math.pi * t)) / 2
    return swa * alpha + cosine[start] * (1 - alpha)


class WeightAverage:
    """Happy++'s EMA of the trained parameters of `modules` (those that require a gradient when it is made)."""

    def __init__(self, modules: list[nn.Module], new: float, old: float) -> None:
        self.params = [p for m in modules for p in m.parameters() if p.requires_grad]
        self.shadow = [p.detach().clone() for p in self.params]
        self.new, self.old = new, old

    @torch.no_grad()
    def update(self) -> None:
        for p, a in zip(self.params, self.shadow):
            a.copy_(self.new * p + self.old * a)

    @torch.no_grad()
    def apply(self, epoch: int = 0) -> None:
        for p, a in zip(self.params, self.shadow):
            p.copy_(a)

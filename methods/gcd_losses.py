"""The parametric GCD learner's pieces (SimGCD, Wen et al. ICCV'23), shared by the continual category discovery
methods that train on them (continual SimGCD, Happy; docs/methods.md#simgcd-continual). Each is one term of

    L = (1 − λ)·(L_distil − ε·H(p̄) + L_con) + λ·(L_ce + L_supcon)

on two views of a batch, with z the L2-normalised tail feature, h = φ(z) the L2-normalised projection, and
p = softmax(W·z / τ_s) the cosine classifier's prediction (`methods.blocks.CosineHead`):

    L_con (`info_nce`):      −log exp(h_i·h_i⁺/τ_c) / Σ_{j≠i} exp(h_i·h_j/τ_c) over the 2B views (SimCLR)
    L_supcon (`supcon`):     the same with every view of the same class a positive, averaged over them (SupCon);
                             `weighted_supcon` takes the positives as a mask and weighs each (MetaGCD's soft one)
    L_ce:                    cross-entropy of p on the labels
    L_distil (`distil`):     −Σ_k q_k log p'_k, q = softmax(W·z / τ_t(e)) of one view (no gradient), p' the other's
                             prediction, averaged over both ordered pairs; τ_t warms linearly from `warmup` to `final`
                             over the first epochs (`teacher_temperature`)
    H(p̄) (`mean_entropy`):   the entropy of the batch's mean prediction (the mean-entropy maximiser, ε its weight)
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class NormedHead(nn.Module):
    """The cosine classifier W·z of SimGCD's head: a weight-normalised linear layer without bias whose gain is fixed
    at 1 (`weight_norm`, `norm_last_layer`), so logits are cosines between the L2-normalised feature and each row's
    direction, and the gradient reaches the rows through their normalisation. Rows start as `nn.Linear`'s default
    (uniform in ±1/√D, norm ≈ 1/√3), drawn on the CPU from `gen` (torch's global generator where none is given)."""

    def __init__(self, in_dim: int, n_out: int, gen: torch.Generator | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, in_dim))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=gen)  # nn.Linear's own draw

    def grown(self, n_new: int, gen: torch.Generator | None = None) -> "NormedHead":
        """A head of these rows (copied) and `n_new` fresh ones after them (drawn from `gen`)."""
        head = NormedHead(self.weight.shape[1], n_new, gen).to(self.weight.device)
        head.weight = nn.Parameter(torch.cat([self.weight.detach(), head.weight.detach()]))
        return head

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return F.normalize(z, dim=-1) @ F.normalize(self.weight, dim=-1).t()


class Projector(nn.Module):
    """SimGCD's projection MLP φ: Linear, GELU, Linear, GELU, Linear (in → hidden → hidden → out), its linear
    weights drawn truncated-normal (std 0.02) with zero bias, as DINO's head; `forward` L2-normalises.

    The draws come from `gen` (torch's global generator where none is given) in DINO's head's order: each layer's
    `nn.Linear` default first (weight, then bias), then the truncated normals that replace them; so the same seed
    gives the same φ whether it is injected or the global generator's."""

    def __init__(self, in_dim: int, hidden_dim: int = 2048, out_dim: int = 256,
                 gen: torch.Generator | None = None) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim, device="meta"), nn.GELU(),
                                 nn.Linear(hidden_dim, hidden_dim, device="meta"), nn.GELU(),
                                 nn.Linear(hidden_dim, out_dim, device="meta")).to_empty(device="cpu")
        layers = [layer for layer in self.mlp if isinstance(layer, nn.Linear)]
        for layer in layers:  # drawn and then overwritten, as DINO's head does: the draws after them depend on it
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=gen)
            nn.init.uniform_(layer.bias, -1 / math.sqrt(layer.in_features), 1 / math.sqrt(layer.in_features),
                             generator=gen)
        for layer in layers:
            nn.init.trunc_normal_(layer.weight, std=0.02, generator=gen)
            nn.init.zeros_(layer.bias)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.mlp(z), dim=-1)


def info_nce(h1: torch.Tensor, h2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's loss over the 2B projections (h1 then h2, each B × d, L2-normalised): each view's positive is the
    other view of its image, its negatives every other view but itself."""
    h = torch.cat([h1, h2])
    n = len(h1)
    sim = h @ h.t() / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=h.device), float("-inf"))
    positive = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(h.device)
    return F.cross_entropy(sim, positive)


def supcon(h1: torch.Tensor, h2: torch.Tensor, labels: torch.Tensor, temperature: float,
           base_temperature: float | None = None) -> torch.Tensor:
    """Supervised contrastive loss (Khosla et al.) over the 2B views: for each anchor, the mean over its positives
    (every other view of its class) of −log exp(h·h⁺/τ) / Σ_{j≠i} exp(h·h_j/τ), scaled by τ/τ_base as SupCon's code."""
    labels = labels.to(h1.device)
    return weighted_supcon(h1, h2, labels[:, None] == labels[None, :], temperature, base_temperature)


def weighted_supcon(h1: torch.Tensor, h2: torch.Tensor, same: torch.Tensor, temperature: float,
                    base_temperature: float | None = None, weight: torch.Tensor | None = None) -> torch.Tensor:
    """SupCon with the positives given as a B × B boolean `same` (image i and j belong together; tiled over the two
    views, self excluded) and, where given, a B × B `weight` on each positive's term: per anchor
    −Σ_p w·log_prob_p / |positives|, scaled by τ/τ_base (SupCon's code with a mask and weights; `supcon` is w = 1)."""
    h = torch.cat([h1, h2])
    n = len(h)
    sim = h @ h.t() / temperature
    self_mask = torch.eye(n, dtype=torch.bool, device=h.device)
    sim = sim - sim.detach().max(1, keepdim=True).values  # stability only: the loss is shift-invariant per row
    log_prob = sim - torch.logsumexp(sim.masked_fill(self_mask, float("-inf")), dim=1, keepdim=True)
    positive = same.to(h.device).repeat(2, 2) & ~self_mask
    terms = log_prob * positive if weight is None else log_prob * positive * weight.to(h).repeat(2, 2)
    mean_log_prob = terms.sum(1) / positive.sum(1).clamp_min(1)
    return -(temperature / (base_temperature or temperature)) * mean_log_prob.mean()


def teacher_temperature(epoch: int, epochs: int, warmup: float, final: float, warmup_epochs: int) -> float:
    """τ_t at `epoch` (0-based): linear from `warmup` to `final` over the first `warmup_epochs` (both ends
    included, as np.linspace), then `final`."""
    schedule = np.concatenate([np.linspace(warmup, final, warmup_epochs), np.full(max(epochs - warmup_epochs, 0), final)])
    return float(schedule[min(epoch, len(schedule) - 1)])


def distil(logits1: torch.Tensor, logits2: torch.Tensor, student_temperature: float,
           teacher_temperature: float) -> torch.Tensor:
    """Self-distillation across views: each view's sharpened prediction (no gradient) is the other's target;
    the mean over the two ordered pairs of the batch-mean cross-entropy."""
    total = logits1.new_zeros(())
    for teacher, student in ((logits1, logits2), (logits2, logits1)):
        q = F.softmax(teacher.detach() / teacher_temperature, dim=1)
        total = total + (-q * F.log_softmax(student / student_temperature, dim=1)).sum(1).mean()
    return total / 2


def mean_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """H(p̄), the entropy of the mean prediction over the rows of `logits` (natural log)."""
    mean = F.softmax(logits / temperature, dim=1).mean(0)
    return -torch.special.xlogy(mean, mean).sum()  # 0·log 0 = 0: a class no row predicts


def evenness(p: torch.Tensor) -> torch.Tensor:
    """Σ p log p + log |p| of a distribution p: its KL from the uniform one (0 when even, log |p| on one entry)."""
    return torch.special.xlogy(p, p).sum() + math.log(len(p))


def entropy_regulariser(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimGCD's −H(p̄) + log K: zero when the batch spreads evenly over the K classes, log K when it takes one."""
    return evenness(F.softmax(logits / temperature, dim=1).mean(0))

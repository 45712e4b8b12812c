"""MetaGCD's own pieces (Wu et al., ICCV'23; docs/methods.md#metagcd), as its code (ynanwu/MetaGCD,
`models/utils.py`, `methods/contrastive_training/contrastive_learning_based_MAML.py`, `data/cifar.py`) computes
them; read to learn them, never copied (the repository has no licence file):

- the soft neighbourhood (`soft_neighbours`) and its loss (`soft_loss`): images whose projections lie within a
  cosine `threshold` of each other (over either pair of their views) are positives of each other, each weighed by
  its attention among the anchor's neighbours;
- the pseudo sessions (`pseudo_sessions`): the labelled step's images cut into simulated unlabelled steps;
- the first-order meta-update (`meta_step`): the outer loss's gradient at the adapted parameters, applied to the
  parameters before the adaptation.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import torch
from torch import nn

from bench.methods.gcd_losses import weighted_supcon


class Neighbours(NamedTuple):
    """The images that have another neighbour (`kept`, indices into the batch), and over them the neighbour mask
    (K × K, the diagonal included) and the attention weights (K × K)."""

    kept: torch.Tensor
    same: torch.Tensor
    weight: torch.Tensor


def soft_neighbours(h1: torch.Tensor, h2: torch.Tensor, threshold: float) -> Neighbours:
    """a_ij = max over the four pairs of views of h_i·h_j (L2-normalised projections); j is i's neighbour when
    a_ij ≥ `threshold` (i is its own); w_ij = softmax of a_ij over i's neighbours, divided by its largest value.
    Kept: the images with a neighbour besides themselves. The weights carry the gradient, as the code's do."""
    a = torch.stack([h1 @ h1.t(), h1 @ h2.t(), h2 @ h1.t(), h2 @ h2.t()]).amax(0)
    near = a >= threshold
    w = torch.softmax(a.masked_fill(~near, float("-inf")), dim=1)
    w = w / w.amax(1, keepdim=True)
    kept = torch.nonzero(near.sum(1) > 1).flatten()
    return Neighbours(kept, near[kept][:, kept], w[kept][:, kept])


def soft_loss(h1: torch.Tensor, h2: torch.Tensor, threshold: float, temperature: float) -> torch.Tensor | None:
    """The soft neighbourhood contrastive loss: SupCon over the kept images' views with their neighbours as
    positives, each term weighed by its attention (`weighted_supcon`); None when no image has a neighbour."""
    n = soft_neighbours(h1, h2, threshold)
    if len(n.kept) == 0:
        return None
    return weighted_supcon(h1[n.kept], h2[n.kept], n.same, temperature, weight=n.weight)


def pseudo_sessions(labels: torch.Tensor, n_classes: int, *, sessions: int, old_ratio: float, old_held: float,
                    novel_share: float, gen: torch.Generator) -> list[torch.Tensor]:
    """The labelled step cut into `sessions` simulated unlabelled steps (indices into `labels`), as the code's
    offline sessions: the classes shuffled, the first round(old_ratio·C) pseudo-old, the rest pseudo-novel. Of each
    pseudo-old class, an `old_held` share of its images is held out and dealt across the sessions (disjoint); session
    s brings the first (s + 1)·⌊N_novel / sessions⌋ pseudo-novel classes (at least one a session, cumulative), a fresh
    `novel_share` draw of each one's images."""
    order = torch.randperm(n_classes, generator=gen)
    n_old = min(max(1, round(old_ratio * n_classes)), n_classes - 1)
    old, novel = order[:n_old], order[n_old:]
    per_session = max(1, len(novel) // sessions)
    labels = labels.cpu()
    held: list[list[torch.Tensor]] = [[] for _ in range(sessions)]
    for c in old.tolist():
        rows = torch.nonzero(labels == c).flatten()
        rows = rows[torch.randperm(len(rows), generator=gen)][:max(sessions, round(old_held * len(rows)))]
        for s, chunk in enumerate(torch.tensor_split(rows, sessions)):
            held[s].append(chunk)
    out = []
    for s in range(sessions):
        parts = list(held[s])
        for c in novel[:(s + 1) * per_session].tolist():
            rows = torch.nonzero(labels == c).flatten()
            parts.append(rows[torch.randperm(len(rows), generator=gen)][:max(1, round(novel_share * len(rows)))])
        out.append(torch.cat(parts))
    return out


def meta_step(params: Sequence[nn.Parameter], adapt: Callable[[], None], outer_loss: Callable[[], torch.Tensor],
              outer: torch.optim.Optimizer) -> None:
    """One first-order bi-level update: θ' ← adapt(θ) (the inner loop, in place), g = ∇_θ' L_outer(θ'), then the
    parameters go back to θ and `outer` steps them with g (MAML's first-order approximation, as the code's
    `meta_update_model` hooks do: the inner loop is not differentiated through)."""
    start = [p.detach().clone() for p in params]
    adapt()
    grads = torch.autograd.grad(outer_loss(), list(params), allow_unused=True)
    with torch.no_grad():
        for p, s in zip(params, start):
            p.copy_(s)
    outer.zero_grad(set_to_none=True)
    for p, g in zip(params, grads):
        p.grad = None if g is None else g.detach()
    outer.step()

"""Ranking statistics (AutoNovel, Han et al. ICLR'20) as FRoST uses them to label pairs of unlabelled
images (docs/methods.md#frost): two images are "the same class" when the top-k
dimensions of their features are the same set, and a pairwise BCE pulls their predictions together
or apart. Plus the sigmoid ramp-up that weighs FRoST's consistency and self-training terms."""
from __future__ import annotations

import math

import torch


def sigmoid_rampup(epoch: int, length: int) -> float:
    """exp(−5 (1 − clip(e / L))²) for epoch e counted from 0 (Laine & Aila); 1 when L is 0."""
    if length == 0:
        return 1.0
    phase = 1.0 - min(max(epoch, 0), length) / length
    return math.exp(-5.0 * phase * phase)


def rank_pair_targets(features: torch.Tensor, topk: int) -> torch.Tensor:
    """B×B targets over every ordered pair (i, j), i = j included: +1 where the top-`topk` dimensions
    of features i and j are the same set, −1 elsewhere. Features are read as given (FRoST: the
    detached, un-normalised CLS features of view 1)."""
    top = torch.sort(torch.argsort(features.detach(), dim=1, descending=True)[:, :topk], dim=1).values
    same = (top[:, None, :] == top[None, :, :]).all(dim=2)
    return same.float() * 2 - 1


def pairwise_bce(probs1: torch.Tensor, probs2: torch.Tensor, targets: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """Mean over all B² pairs of −log P_ij (target +1) or −log(1 − P_ij) (target −1), with
    P_ij = ⟨p1_i, p2_j⟩ the probability that view 1 of image i and view 2 of image j agree; the
    code's eps 1e-7 inside the log."""
    agree = probs1 @ probs2.t()
    p = torch.where(targets > 0, agree, 1 - agree)
    return -(p + eps).log().mean()

"""Anchored k-means: k-means in which some centroids are known and held fixed (docs/methods.md#anchored-k-means).

The shared piece of NCM + k-means and Gaussian per class on an unlabelled step: the step's points
are clustered into len(fixed) + k clusters, where the first len(fixed) centroids are the classes
already known (never moved) and the k others are free, for the step's new classes.

    init   greedy k-means++ among the points, conditioned on the fixed centroids: each new seed is
           the best of 2 + ⌊ln k⌋ candidate points drawn with probability ∝ their squared distance to
           the nearest centroid so far, fixed ones included, "best" meaning the one that lowers the
           potential (the sum of those distances) most (scikit-learn's k-means++); so seeds avoid
           the known classes' points; with no fixed centroid the first seed is drawn uniformly
    repeat at most max_iter times (Lloyd):
           assign every point to its nearest centroid, fixed or free (a tie goes to the lower index)
           move each free centroid to the mean of its points; a free centroid left without a point
           is moved to the point farthest from its own centroid (as scikit-learn does)
           stop when no assignment changes
    keep   the best of n_init runs by inertia (the sum of squared distances to the assigned
           centroids; the first on a tie)

With no fixed centroid it is plain k-means (k-means++ init, Lloyd). Distances are computed in float64
on the points' device; the random draws come from a CPU generator, so the same seed draws the same seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from bench.core.distances import squared_distances

__all__ = ["Clustering", "anchored_kmeans", "kmeans_pp_init", "squared_distances", "step_centroids"]


@dataclass
class Clustering:
    """The outcome: the k free `centroids` (k × D), each point's cluster in 0..len(fixed)+k-1
    (`labels`, fixed centroids first), the `inertia`, and the Lloyd `iterations` the kept run took."""

    centroids: torch.Tensor
    labels: torch.Tensor
    inertia: float
    iterations: int


def _draws(weights: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    """`n` indices drawn with replacement with probability ∝ `weights`; uniformly when all are zero."""
    weights = weights.double().cpu()
    if not weights.sum() > 0:
        weights = torch.ones_like(weights)
    return torch.multinomial(weights, n, replacement=True, generator=gen)


def kmeans_pp_init(x: torch.Tensor, fixed: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """k seeds among the rows of `x` by greedy k-means++, the `fixed` centroids counting as already
    chosen: each seed is the best (least potential Σ_i min_c ‖x_i − c‖² once added) of 2 + ⌊ln k⌋
    candidates drawn ∝ the squared distance to the nearest centroid so far, as scikit-learn's k-means++
    does; with no centroid yet the first seed is drawn uniformly."""
    trials = 2 + int(math.log(k))
    nearest = squared_distances(x, fixed).min(1).values if len(fixed) else None  # to the nearest centroid so far
    seeds = []
    for _ in range(k):
        if nearest is None:
            i = int(_draws(torch.ones(len(x)), 1, gen))
        else:
            candidates = _draws(nearest, trials, gen).to(x.device)
            potential = torch.minimum(nearest[:, None], squared_distances(x, x[candidates])).sum(0)
            i = int(candidates[potential.argmin()])  # the first of equals
        seeds.append(i)
        to_seed = squared_distances(x, x[i:i + 1])[:, 0]
        nearest = to_seed if nearest is None else torch.minimum(nearest, to_seed)
    return x[seeds].clone()


def _update(x: torch.Tensor, d2: torch.Tensor, labels: torch.Tensor, centroids: torch.Tensor,
            n_fixed: int) -> torch.Tensor:
    """The free centroids moved to the means of their points; an empty one to the farthest point."""
    k = len(centroids)
    free = labels - n_fixed
    mine = free >= 0
    sums = torch.zeros_like(centroids).index_add_(0, free[mine], x[mine])
    counts = torch.bincount(free[mine], minlength=k).to(x.dtype)
    moved = sums / counts.clamp_min(1)[:, None]
    farthest = d2.gather(1, labels[:, None])[:, 0].clone()
    for j in torch.nonzero(counts == 0).flatten().tolist():
        i = int(farthest.argmax())
        moved[j] = x[i]
        farthest[i] = -1.0  # not the seed of a second empty cluster
    return moved


def _lloyd(x: torch.Tensor, fixed: torch.Tensor, centroids: torch.Tensor, max_iter: int) -> Clustering:
    d2 = squared_distances(x, torch.cat([fixed, centroids]))
    labels = d2.argmin(1)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 (the count it stopped at is returned)
        centroids = _update(x, d2, labels, centroids, len(fixed))
        d2 = squared_distances(x, torch.cat([fixed, centroids]))
        new_labels = d2.argmin(1)
        if torch.equal(new_labels, labels):
            break
        labels = new_labels
    inertia = float(d2.gather(1, labels[:, None]).sum())
    return Clustering(centroids, labels, inertia, iterations)


def anchored_kmeans(x: torch.Tensor, fixed: torch.Tensor, k: int, *, max_iter: int, n_init: int,
                    gen: torch.Generator) -> Clustering:
    """Cluster the rows of `x` (N × D) around the `fixed` centroids (F × D, F may be 0, never moved)
    and `k` free ones: the best of `n_init` k-means++ inits and Lloyd runs of at most `max_iter`
    iterations (see the module docstring). Computed in float64."""
    x = x.double()
    fixed = fixed.to(device=x.device, dtype=torch.float64).reshape(-1, x.shape[1])
    if k == 0:
        d2 = squared_distances(x, fixed)
        labels = d2.argmin(1)
        return Clustering(x.new_empty(0, x.shape[1]), labels, float(d2.gather(1, labels[:, None]).sum()), 0)
    best: Clustering | None = None
    for _ in range(n_init):
        run = _lloyd(x, fixed, kmeans_pp_init(x, fixed, k, gen), max_iter)
        if best is None or run.inertia < best.inertia:
            best = run
    assert best is not None, "n_init must be at least 1"
    return best


def step_centroids(z: torch.Tensor, labels: torch.Tensor | None, known: torch.Tensor, n_classes: int, *,
                   max_iter: int, n_init: int, gen: torch.Generator) -> torch.Tensor:
    """The centroids after a step of the mixed setting, over its images' L2-normalised features `z` (float64): a
    labelled step's classes' means (`labels` given); else the `known` ones and the `n_classes` new ones anchored
    k-means finds among the step's images (PromptCCD's and MetaGCD's inductive predictions)."""
    if labels is not None:
        y = labels.to(z.device)
        return torch.stack([z[y == c].mean(0) for c in range(n_classes)]).float()
    found = anchored_kmeans(z, known.to(z), n_classes, max_iter=max_iter, n_init=n_init, gen=gen)
    return torch.cat([known.to(z), found.centroids]).float()

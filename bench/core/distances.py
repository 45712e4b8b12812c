"""Squared Euclidean distances between rows, the one formula every k-means of bench computes with (the anchored
k-means of `methods/anchored_kmeans.py`, the semi-supervised k-means of `bench.protocol.transductive`)."""
from __future__ import annotations

import torch

__all__ = ["squared_distances"]


def squared_distances(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """N × K squared Euclidean distances ‖x_i − c_k‖² (clamped at 0 against rounding)."""
    d2 = (x * x).sum(1, keepdim=True) - 2 * x @ centroids.T + (centroids * centroids).sum(1)[None]
    return d2.clamp_min_(0)

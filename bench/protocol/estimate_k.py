"""How many new classes a step holds, estimated from its unlabelled features (the "unknown K" axis of
continual category discovery; no grid uses it yet): today every step's class count is given, as in the paper.

The estimator the field uses when no labelled data of the new classes exists: fit k-means for every
K in a range and keep the K whose partition has the highest silhouette score (mean over images of
(b − a) / max(a, b), a the mean distance to the image's own cluster, b to the nearest other one).
Seeded throughout, so the same features and seed give the same K.
"""
from __future__ import annotations

import numpy as np

from bench.errors import BenchError

# a silhouette over more images costs O(N²): a seeded sample of this many keeps the estimate cheap
SILHOUETTE_SAMPLE = 2000


def silhouette_scores(features: np.ndarray, k_min: int, k_max: int, seed: int = 0) -> dict[int, float]:
    """The silhouette score of the k-means partition of `features` (N × D) for every K in k_min..k_max."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise BenchError(f"estimate K: features must be N × D, got shape {x.shape}")
    if not 2 <= k_min <= k_max < len(x):
        raise BenchError(f"estimate K: the range {k_min}..{k_max} must satisfy 2 <= k_min <= k_max < N = {len(x)} "
                         "(the silhouette needs at least two clusters and one image more than clusters)")
    sample = min(len(x), SILHOUETTE_SAMPLE)
    scores = {}
    for k in range(k_min, k_max + 1):
        assign = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(x)
        scores[k] = float(silhouette_score(x, assign, sample_size=sample, random_state=seed))
    return scores


def estimate_k(features: np.ndarray, k_min: int, k_max: int, seed: int = 0) -> int:
    """The K in k_min..k_max whose k-means partition of `features` has the highest silhouette (the
    smallest such K on a tie)."""
    scores = silhouette_scores(features, k_min, k_max, seed)
    return max(scores, key=lambda k: (scores[k], -k))

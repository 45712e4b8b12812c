"""How many classes a step's images hold, estimated from their features (the "unknown K" axis of continual
category discovery, `setting.k`). Two estimators, seeded throughout, so the same features and seed give the
same K:

- `silhouette`: fit k-means for every K in a range and keep the K whose partition has the highest silhouette
  score (mean over images of (b − a) / max(a, b), a the mean distance to the image's own cluster, b to the
  nearest other one). It reads no label.
- `brent`: GCD's estimator (Vaze et al., CVPR'22, its `estimate_k.py`; PromptCCD ships a copy): k-means of the
  labelled and the unlabelled images together, scored by the Hungarian accuracy of its clusters on the
  labelled images; Brent's bounded search (scipy's `minimize_scalar`) over K for the best score (each K is the
  integer part of the search's point, as in GCD; the K kept is the best scored by the search and at the
  integers beside its end point). It sees a new class
  only through the labelled ones: a new class merged with, or split from, another unlabelled one costs the
  labelled images nothing, so it estimates best where the new classes sit among the labelled ones.
"""
from __future__ import annotations

import numpy as np

from bench.core.numerics import sklearn_seed
from bench.errors import BenchError
from bench.protocol.evaluate import clustering_accuracy

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
        assign = KMeans(n_clusters=k, n_init=4, random_state=sklearn_seed(seed)).fit_predict(x)
        scores[k] = float(silhouette_score(x, assign, sample_size=sample, random_state=sklearn_seed(seed)))
    return scores


def estimate_k(features: np.ndarray, k_min: int, k_max: int, seed: int = 0) -> int:
    """The K in k_min..k_max whose k-means partition of `features` has the highest silhouette (the
    smallest such K on a tie)."""
    scores = silhouette_scores(features, k_min, k_max, seed)
    return max(scores, key=lambda k: (scores[k], -k))


def brent_k(features: np.ndarray, labelled: np.ndarray, labels: np.ndarray, k_min: int, k_max: int,
            seed: int = 0) -> int:
    """GCD's estimate of the classes among `features` (N × D), of which the rows `labelled` have the classes
    `labels`: the K in k_min..k_max, among those Brent's bounded search evaluates and the integers beside its end
    point, with the highest labelled accuracy of the k-means partition (each K's partition fitted once, seeded)."""
    from scipy.optimize import minimize_scalar
    from sklearn.cluster import KMeans

    x = np.asarray(features, dtype=np.float64)
    labelled, labels = np.asarray(labelled, dtype=np.int64), np.asarray(labels, dtype=np.int64)
    if x.ndim != 2 or len(labelled) != len(labels) or not len(labelled):
        raise BenchError(f"estimate K: features must be N × D with labelled rows and their labels; got {x.shape}, "
                         f"{len(labelled)} rows and {len(labels)} labels")
    if not 1 <= k_min <= k_max <= len(x):
        raise BenchError(f"estimate K: the range {k_min}..{k_max} must satisfy 1 <= k_min <= k_max <= N = {len(x)}")
    scores: dict[int, float] = {}

    def loss(k: float) -> float:
        k = int(k)  # GCD's rounding: the search moves over reals, k-means takes their integer part
        if k not in scores:
            assign = KMeans(n_clusters=k, n_init=4, random_state=sklearn_seed(seed)).fit_predict(x)
            scores[k] = clustering_accuracy(labels, assign[labelled])
        return -scores[k]

    end = int(minimize_scalar(loss, bounds=(k_min, k_max), method="bounded").x)
    # GCD keeps int(x) of the search's end point. The labelled accuracy is a step function of K, on which the
    # bounded search can end one step beside the best K (planted 6 classes: it ended at 7.35, K = 7 scoring 97.8
    # where K = 6 scores 100, never tried): the end point's integer neighbours are scored too, and the best K
    # scored is kept (the smallest on a tie)
    for k in (end - 1, end + 1):
        if k_min <= k <= k_max:
            loss(k)
    return max(scores, key=lambda k: (scores[k], -k))

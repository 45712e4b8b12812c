"""The unknown-K estimator (bench.protocol.estimate_k): k-means silhouette over a range of K."""
from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.protocol.estimate_k import estimate_k, silhouette_scores


def planted(k: int, per_cluster: int = 30, dim: int = 8, seed: int = 0) -> np.ndarray:
    """`k` tight Gaussian clusters around centres far apart."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=10.0, size=(k, dim))
    return np.concatenate([c + rng.normal(scale=0.5, size=(per_cluster, dim)) for c in centres])


@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_planted_number_of_clusters_is_found(k):
    assert estimate_k(planted(k, seed=k), 2, 9, seed=0) == k


def test_the_same_seed_gives_the_same_scores():
    x = planted(4, seed=1) + np.random.default_rng(2).normal(scale=3.0, size=(120, 8))  # overlapping: a real choice
    assert silhouette_scores(x, 2, 6, seed=3) == silhouette_scores(x, 2, 6, seed=3)


@pytest.mark.parametrize("k_min, k_max", [(1, 4), (5, 4), (2, 90)])
def test_a_range_the_silhouette_cannot_score_is_refused(k_min, k_max):
    with pytest.raises(BenchError, match="2 <= k_min <= k_max < N = 90"):
        estimate_k(planted(3), k_min, k_max)

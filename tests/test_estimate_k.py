"""The unknown-K estimators (bench.protocol.estimate_k): k-means silhouette over a range of K, and GCD's Brent
search for the K whose k-means clusters score best on the labelled images."""
from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.protocol.estimate_k import brent_k, estimate_k, silhouette_scores


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


@pytest.mark.parametrize("k", [4, 6, 9, 11])
def test_brents_search_finds_the_planted_number_of_classes_from_the_labelled_images(k):
    x = planted(k, seed=k)
    classes = np.repeat(np.arange(k), 30)
    labelled = np.arange(len(x))[::2]  # half the images of every class: too few clusters merge two, too many split one
    assert brent_k(x, labelled, classes[labelled], 2, 16, seed=0) == k


def test_brents_search_scores_each_k_once_and_the_same_seed_gives_the_same_k(monkeypatch):
    import sklearn.cluster

    fitted = []
    real = sklearn.cluster.KMeans.fit_predict
    monkeypatch.setattr(sklearn.cluster.KMeans, "fit_predict", lambda self, x: fitted.append(self.n_clusters) or real(self, x))
    x = planted(5, seed=1) + np.random.default_rng(2).normal(scale=3.0, size=(150, 8))
    classes = np.repeat(np.arange(5), 30)
    first = brent_k(x, np.arange(60), classes[:60], 2, 12, seed=3)
    assert len(fitted) == len(set(fitted))  # the search revisits a K: its k-means is not fitted again
    assert brent_k(x, np.arange(60), classes[:60], 2, 12, seed=3) == first


def test_brents_search_refuses_a_range_or_labels_it_cannot_use():
    with pytest.raises(BenchError, match="1 <= k_min <= k_max <= N = 90"):
        brent_k(planted(3), np.arange(10), np.zeros(10), 5, 91)
    with pytest.raises(BenchError, match="labelled rows and their labels"):
        brent_k(planted(3), np.arange(10), np.zeros(9), 2, 5)

"""The two continual-GCD baselines on frozen features (docs/methods.md#continual-gcd-baselines): NCM +
k-means, Gaussian per class, and the anchored k-means they share, against hand computations on tiny
inputs, and whole sequences of both settings on generated features."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment
from scipy.stats import multivariate_normal

from bench.errors import BenchError
from bench.features.views import FeatureViews
from bench.methods.anchored_kmeans import anchored_kmeans, squared_distances
from bench.methods.base import Step
from bench.methods.gaussian_per_class import GaussianPerClass, shrunk_covariance
from bench.methods.ncm_kmeans import NCMKMeans
from bench.config.presets import load_preset
from bench.config.validate import check_value

METHODS = {"NCM + k-means": NCMKMeans, "Gaussian per class": GaussianPerClass}


def make(name: str, dim: int, seed: int = 0, **overrides) -> NCMKMeans | GaussianPerClass:
    params, _ = load_preset(name, "code")
    return METHODS[name](dim, seed, **{**params, **overrides})


def step(x: torch.Tensor, n_classes: int, offset: int = 0, index: int = 0, labels: torch.Tensor | None = None) -> Step:
    return Step(index=index, n_classes=n_classes, offset=offset,
                train=FeatureViews(x, x.new_empty(len(x), 0, x.shape[1])), labels=labels)


def blob(centre, n: int, spread: float, gen: torch.Generator) -> torch.Tensor:
    centre = torch.as_tensor(centre, dtype=torch.float64)
    return centre + spread * torch.randn(n, len(centre), generator=gen, dtype=torch.float64)


def same_partition(labels: torch.Tensor, truth: torch.Tensor) -> bool:
    """Whether two labellings split the points alike (equal up to renaming the clusters)."""
    pairs = set(zip(labels.tolist(), truth.tolist()))
    return len(pairs) == len(set(labels.tolist())) == len(set(truth.tolist()))


def hungarian_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """Accuracy under the best one-to-one map of predicted ids to classes."""
    classes, ids = np.unique(truth), np.unique(pred)
    counts = np.array([[np.sum((truth == c) & (pred == p)) for p in ids] for c in classes])
    rows, cols = linear_sum_assignment(-counts)
    return counts[rows, cols].sum() / len(truth)


# -- anchored k-means --

@pytest.mark.parametrize("dim", [2, 3])
def test_anchored_kmeans_keeps_the_fixed_centroids_and_finds_the_two_new_blobs(dim):
    gen = torch.Generator().manual_seed(0)
    corner = lambda *c: list(c) + [0.0] * (dim - 2)  # noqa: E731
    # the known classes' centroids sit off their points' mean: a moved centroid would show
    fixed = torch.tensor([corner(0.5, 0.0), corner(10.0, 0.5)], dtype=torch.float64)
    near = [blob(corner(0.0, 0.0), 20, 0.2, gen), blob(corner(10.0, 0.0), 20, 0.2, gen)]
    new = [blob(corner(0.0, 10.0), 30, 0.3, gen), blob(corner(10.0, 10.0), 30, 0.3, gen)]
    x = torch.cat([*near, *new])
    before = fixed.clone()
    out = anchored_kmeans(x, fixed, 2, max_iter=50, n_init=3, gen=torch.Generator().manual_seed(1))
    assert torch.equal(fixed, before) and out.centroids.shape == (2, dim)
    assert out.labels[:20].eq(0).all() and out.labels[20:40].eq(1).all()  # old points: their fixed centroid
    first, second = int(out.labels[40]), int(out.labels[70])
    assert {first, second} == {2, 3} and out.labels[40:70].eq(first).all() and out.labels[70:].eq(second).all()
    torch.testing.assert_close(out.centroids[first - 2], new[0].mean(0))  # the new blobs, exactly
    torch.testing.assert_close(out.centroids[second - 2], new[1].mean(0))
    # the inertia is measured to the fixed centroids as given, never to their points' means
    by_hand = sum(float(((part - centre) ** 2).sum()) for part, centre in
                  [(near[0], fixed[0]), (near[1], fixed[1]), (new[0], new[0].mean(0)), (new[1], new[1].mean(0))])
    assert out.inertia == pytest.approx(by_hand, rel=1e-12)


def test_anchored_kmeans_without_fixed_centroids_is_plain_kmeans():
    gen = torch.Generator().manual_seed(0)
    centres = [(0.0, 0.0, 0.0), (8.0, 0.0, 0.0), (0.0, 8.0, 0.0), (0.0, 0.0, 8.0)]
    parts = [blob(c, 25, 0.5, gen) for c in centres]
    x, truth = torch.cat(parts), torch.arange(4).repeat_interleave(25)
    out = anchored_kmeans(x, x.new_empty(0, 3), 4, max_iter=100, n_init=5, gen=torch.Generator().manual_seed(3))
    assert same_partition(out.labels, truth)
    for part, label in zip(parts, out.labels[::25].tolist()):
        torch.testing.assert_close(out.centroids[label], part.mean(0))


def test_anchored_kmeans_keeps_the_best_of_n_init_runs_by_inertia():
    x = torch.rand(60, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fixed = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(7)  # the same draws, one run at a time
    single = [anchored_kmeans(x, fixed, 4, max_iter=100, n_init=1, gen=gen) for _ in range(5)]
    best = min(single, key=lambda run: run.inertia)  # the first of equals, as min returns
    assert len({round(run.inertia, 9) for run in single}) > 1  # the inits do differ here
    out = anchored_kmeans(x, fixed, 4, max_iter=100, n_init=5, gen=torch.Generator().manual_seed(7))
    assert out.inertia == best.inertia and torch.equal(out.centroids, best.centroids)


@pytest.mark.parametrize("seed", range(3))
def test_anchored_kmeans_finds_new_classes_among_known_ones_in_high_dimension(seed):
    """128-D classes whose spread is half their separation (‖μ_a − μ_b‖² ≈ 2·E‖x − μ‖²), 10 known and 5
    new, on the sphere. A seed on a known class's point is trapped there (its point is nearer to it than
    to its class mean, no other is), so seeds must avoid them: plain k-means++ (one candidate a seed)
    left a seed trapped on a known class's image and recovered 80 % of the new images on each of these
    seeds; the module's greedy k-means++ recovers every one."""
    gen = torch.Generator().manual_seed(seed)
    means = torch.randn(15, 128, generator=gen)
    labelled = torch.arange(10).repeat_interleave(50)
    cls = torch.arange(15).repeat_interleave(40)
    z0 = torch.nn.functional.normalize(means[labelled] + torch.randn(500, 128, generator=gen), dim=1).double()
    z1 = torch.nn.functional.normalize(means[cls] + torch.randn(600, 128, generator=gen), dim=1).double()
    fixed = torch.stack([z0[labelled == c].mean(0) for c in range(10)])
    out = anchored_kmeans(z1, fixed, 5, max_iter=200, n_init=10, gen=torch.Generator().manual_seed(0))
    new = cls >= 10
    assert out.labels[~new].eq(cls[~new]).all()
    assert hungarian_accuracy(out.labels[new].numpy(), cls[new].numpy()) == 1.0


def test_anchored_kmeans_survives_more_clusters_than_distinct_points():
    x = torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    out = anchored_kmeans(x, x.new_empty(0, 2), 3, max_iter=10, n_init=2, gen=torch.Generator().manual_seed(0))
    assert out.centroids.shape == (3, 2) and out.inertia == 0.0


# -- NCM + k-means --

def test_ncm_prototype_is_the_mean_of_the_normalised_features():
    x = torch.tensor([[3.0, 4.0], [0.0, 2.0], [1.0, 0.0], [0.0, -5.0], [2.0, 2.0]])
    method = make("NCM + k-means", 2)
    method.learn(step(x, 2, labels=torch.tensor([0, 0, 1, 1, 1])))
    s = 0.5 ** 0.5
    by_hand = torch.tensor([[(0.6 + 0.0) / 2, (0.8 + 1.0) / 2], [(1.0 + 0.0 + s) / 3, (0.0 - 1.0 + s) / 3]])
    torch.testing.assert_close(method.prototypes, by_hand)
    probe = torch.tensor([[0.0, 3.0]])  # normalised: (0, 1)
    expected = -((torch.tensor([0.0, 1.0]) - by_hand) ** 2).sum(1)
    torch.testing.assert_close(method.logits(probe)[0], expected)


def test_a_labelled_step_must_hold_every_class():
    method = make("NCM + k-means", 2)
    with pytest.raises(ValueError, match=r"no image of class\(es\) \[1\]"):
        method.learn(step(torch.randn(4, 2), 3, labels=torch.tensor([0, 0, 2, 2])))


# -- Gaussian per class --

def test_gaussian_log_likelihood_equals_scipy_with_the_shrunk_covariance_by_hand():
    rng = np.random.default_rng(0)
    dim, alpha, floor = 4, 0.3, 1e-6
    a = rng.normal(size=(7, dim)) + 3 * np.eye(dim)[0]
    b = rng.normal(size=(9, dim)) + 3 * np.eye(dim)[1]
    lone = rng.normal(size=(1, dim)) + 3 * np.eye(dim)[2]  # a class of one image
    x = np.concatenate([a, b, lone])
    method = make("Gaussian per class", dim, shrinkage=alpha, min_variance=floor)
    method.learn(step(torch.tensor(x, dtype=torch.float32), 3, labels=torch.tensor([0] * 7 + [1] * 9 + [2])))
    z = x.astype(np.float32).astype(np.float64)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    probe = rng.normal(size=(5, dim))
    zp = probe.astype(np.float32).astype(np.float64)
    zp = zp / np.linalg.norm(zp, axis=1, keepdims=True)
    got = method.logits(torch.tensor(probe, dtype=torch.float32)).numpy()
    for c, rows in enumerate([slice(0, 7), slice(7, 16)]):
        pts = z[rows]
        mean = pts.mean(0)
        s = (pts - mean).T @ (pts - mean) / len(pts)  # ÷ n
        cov = (1 - alpha) * s + alpha * np.trace(s) / dim * np.eye(dim)
        np.testing.assert_allclose(got[:, c], multivariate_normal.logpdf(zp, mean, cov), rtol=1e-5)
    np.testing.assert_allclose(got[:, 2], multivariate_normal.logpdf(zp, z[16], floor * np.eye(dim)), rtol=1e-5)
    assert method.logits(torch.tensor(probe, dtype=torch.float32)).dtype == torch.float64


def test_shrunk_covariance_forms():
    s = torch.tensor([[2.0, 1.0], [1.0, 4.0]], dtype=torch.float64)
    eye = torch.eye(2, dtype=torch.float64)
    torch.testing.assert_close(shrunk_covariance(s, 10, 0.25, 1e-6), 0.75 * s + 0.25 * 3.0 * eye)  # tr(S)/D = 3
    torch.testing.assert_close(shrunk_covariance(s, 1.5, 0.25, 1e-6), 3.0 * eye)  # n < 2: α = 1
    torch.testing.assert_close(shrunk_covariance(torch.zeros(2, 2, dtype=torch.float64), 1, 0.25, 1e-3),
                               1e-3 * torch.eye(2, dtype=torch.float64))  # one image: the floor


def test_gaussian_per_class_refuses_a_covariance_that_can_be_singular():
    with pytest.raises(ValueError, match="0 < shrinkage <= 1"):
        make("Gaussian per class", 4, shrinkage=0.0)
    with pytest.raises(BenchError, match=r"method.shrinkage=1.5: must be a number in \(0, 1\]"):
        check_value("method.shrinkage", 1.5, 0.5)
    with pytest.raises(BenchError, match="method.min_variance=0.0: must be a number > 0"):
        check_value("method.min_variance", 0.0, 1e-6)


# -- whole sequences --

def planted(n_per_class: dict[int, int], dim: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Features of well separated classes: class c around the unit vector e_c, then shuffled."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.eye(dim)[c] + 0.08 * torch.randn(n, dim, generator=gen) for c, n in n_per_class.items()])
    y = torch.cat([torch.full((n,), c) for c, n in n_per_class.items()])
    order = torch.randperm(len(y), generator=gen)
    return x[order], y[order]


def mixed_sequence(name: str):
    """Step 0: classes 0-3 labelled; step 1: unlabelled, a few images of each of 0-3 and many of 4, 5."""
    method = make(name, 16)
    x0, y0 = planted({c: 40 for c in range(4)})
    method.learn(step(x0, 4, labels=y0))
    x1, y1 = planted({0: 10, 1: 10, 2: 10, 3: 10, 4: 40, 5: 40}, seed=1)
    method.learn(step(x1, 2, offset=4, index=1))
    return method


@pytest.mark.parametrize("name", METHODS)
def test_a_mixed_sequence_keeps_the_old_classes_and_separates_the_new(name):
    method = mixed_sequence(name)
    x, y = planted({c: 30 for c in range(6)}, seed=2)  # held-out images of every class
    logits = method.logits(x)
    assert logits.shape == (len(x), 6)
    assert method.task_logits(x, 0).shape == (len(x), 4) and method.task_logits(x, 1).shape == (len(x), 2)
    pred = logits.argmax(1)
    old = y < 4
    assert (pred[old] == y[old]).float().mean() >= 0.95  # known classes: their own output ids
    assert (pred[~old] >= 4).float().mean() >= 0.95  # new classes: the new outputs
    assert hungarian_accuracy(pred[~old].numpy(), y[~old].numpy()) >= 0.95  # two clusters, one per class
    torch.testing.assert_close(method.task_logits(x, 1), logits[:, 4:])


@pytest.mark.parametrize("name", METHODS)
def test_an_unlabelled_step_never_moves_the_known_classes(name):
    method = make(name, 16)
    x0, y0 = planted({c: 40 for c in range(4)})
    method.learn(step(x0, 4, labels=y0))
    known = {k: v.clone() for k, v in method.state_dict().items() if torch.is_tensor(v)}
    x1, _ = planted({0: 10, 1: 10, 4: 40, 5: 40}, seed=1)
    method.learn(step(x1, 2, offset=4, index=1))
    for key, value in known.items():
        assert torch.equal(method.state_dict()[key][:4], value), key


@pytest.mark.parametrize("name", METHODS)
def test_the_state_round_trips_through_a_checkpoint(name, tmp_path):
    method = mixed_sequence(name)
    torch.save(method.state_dict(), tmp_path / "state.pt")
    fresh = make(name, 16)
    fresh.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    x, _ = planted({c: 5 for c in range(6)}, seed=3)
    assert torch.equal(fresh.logits(x), method.logits(x))
    for task in (0, 1):
        assert torch.equal(fresh.task_logits(x, task), method.task_logits(x, task))


@pytest.mark.parametrize("name", METHODS)
def test_class_incd_steps_cluster_without_labels(name):
    method = make(name, 16)
    x0, y0 = planted({0: 40, 1: 40, 2: 40})
    method.learn(step(x0, 3))  # no labels, offset 0: plain clustering
    assert method.logits(x0).shape == (120, 3)
    assert hungarian_accuracy(method.logits(x0).argmax(1).numpy(), y0.numpy()) >= 0.95
    x1, y1 = planted({3: 40, 4: 40}, seed=1)  # the next step: new classes only
    method.learn(step(x1, 2, offset=3, index=1))
    pred = method.logits(x1).argmax(1)
    assert method.logits(x1).shape == (80, 5) and (pred >= 3).float().mean() >= 0.95
    assert hungarian_accuracy(method.task_logits(x1, 1).argmax(1).numpy(), y1.numpy()) >= 0.95


@pytest.mark.parametrize("name", METHODS)
def test_the_same_seed_gives_the_same_model(name):
    runs = [mixed_sequence(name).state_dict() for _ in range(2)]
    for key in runs[0]:
        a, b = runs[0][key], runs[1][key]
        assert torch.equal(a, b) if torch.is_tensor(a) else a == b, key


@pytest.mark.parametrize("name", METHODS)
def test_both_run_both_settings_on_plain_features_of_their_own_step(name):
    runs_on = METHODS[name].runs_on
    assert runs_on.settings == ("incd", "mixed") and not runs_on.trains_on_views and not runs_on.sees_past_steps


def test_squared_distances_by_hand():
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64)
    c = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(squared_distances(x, c), torch.tensor([[0.0, 2.0], [25.0, 13.0]], dtype=torch.float64))

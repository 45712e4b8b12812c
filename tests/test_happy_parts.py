"""Happy's debiasing parts (methods/happy_parts.py) and the continual SimGCD pieces they change, each on a
hand-computed case; a part switched off changes what Happy trains."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench.methods.draws import Draws
from bench.methods.gcd_losses import NormedHead, distil, entropy_regulariser, info_nce, supcon
from bench.methods.gcd_objective import Outputs, Past, Weights, objective
from bench.methods.happy_parts import (Prototypes, class_means, clustered_rows, feature_distillation, hardness,
                                       shared_radius, soft_entropy)
from bench.methods.loop import cosine_after_epoch, parameter_groups


def logits_of(mean: list[float], rows: int = 3) -> torch.Tensor:
    """Logits whose softmax at τ = 1 is `mean` on every row (so the batch mean is `mean`)."""
    return torch.log(torch.tensor([mean] * rows, dtype=torch.float64))


def test_soft_entropy_on_a_hand_computed_batch_mean():
    # p̄ = [0.4, 0.3, 0.2, 0.1], two old classes: P_o = 0.7, P_n = 0.3
    x = logits_of([0.4, 0.3, 0.2, 0.1])
    l_on = 0.7 * math.log(0.7) + 0.3 * math.log(0.3) + math.log(2)
    l_oi = (4 / 7) * math.log(4 / 7) + (3 / 7) * math.log(3 / 7) + math.log(2)
    l_ni = (2 / 3) * math.log(2 / 3) + (1 / 3) * math.log(1 / 3) + math.log(2)
    assert l_on + l_oi + l_ni == pytest.approx(0.149155, abs=1e-6)  # Happy's code on the same p̄
    assert float(soft_entropy(x, 2, 1.0)) == pytest.approx(l_on + l_oi + l_ni, rel=1e-12)
    assert float(soft_entropy(x, 2, 1.0, (2.0, 1.0, 0.0))) == pytest.approx(2 * l_on + l_oi, rel=1e-12)
    # one new class: its within-group term is nothing; the global term differs from the grouped one
    assert float(soft_entropy(x, 3, 1.0, (0.0, 0.0, 1.0))) == 0.0
    assert float(entropy_regulariser(x, 1.0)) == pytest.approx(0.106440, abs=1e-6)


def test_distil_and_the_teacher_at_happys_online_temperature():
    v1 = torch.tensor([[0.5, -0.5]], dtype=torch.float64)
    v2 = torch.tensor([[0.2, 0.1]], dtype=torch.float64)
    assert float(distil(v1, v2, 0.1, 0.05)) == pytest.approx(0.752668, abs=1e-6)


def test_the_cosine_schedule_is_stepped_after_each_epoch():
    assert cosine_after_epoch(0, 100, 0.1, 1e-4) == pytest.approx(0.1)
    assert cosine_after_epoch(1, 100, 0.1, 1e-4) == pytest.approx(0.0999754, rel=1e-6)
    assert cosine_after_epoch(15, 30, 0.01, 1e-5) == pytest.approx(0.005005, rel=1e-6)
    assert cosine_after_epoch(29, 30, 0.01, 1e-5) == pytest.approx(3.7363e-5, rel=1e-4)


def test_hardness_samples_the_prototype_nearest_the_others_most():
    p = Prototypes()
    p.add(torch.tensor([[1.0, 0.0], [math.sqrt(0.5), math.sqrt(0.5)], [0.0, 1.0]]))
    np.testing.assert_allclose(hardness(p.means).numpy(), [0.353553, 0.707107, 0.353553], atol=1e-6)
    np.testing.assert_allclose(p.probabilities(0.1).numpy(), [0.027538, 0.944924, 0.027538], atol=1e-6)
    p.radius = 0.0  # no spread: every draw is its class's prototype
    x, y = p.sample(400, 0.1, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(x, p.means[y])
    assert 0.9 < float((y == 1).float().mean()) < 0.99
    p.radius = 0.5
    x2, y2 = p.sample(400, 0.1, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(y, y2) and float((x2 - p.means[y2]).std()) == pytest.approx(0.5, rel=0.1)


def test_the_shared_radius_and_the_class_means():
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [3.0, 0.0]])  # normalised: A = {e1, e2}, B = {e1, e1}
    labels = torch.tensor([0, 0, 1, 1])
    assert shared_radius(z, labels) == pytest.approx(math.sqrt((0.25 + 0.0) / 2), rel=1e-12)
    means = class_means(z, labels, range(3), fallback=torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, -5.0]]))
    np.testing.assert_allclose(means.numpy(), [[math.sqrt(0.5), math.sqrt(0.5)], [1, 0], [0, -1]], atol=1e-7)


def test_the_prototype_loss_on_a_hand_computed_case():
    head = NormedHead(2, 2)
    head.weight.data = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    logits = head(torch.tensor([[0.6, 0.8]])).detach() / 0.1
    assert float(F.cross_entropy(logits, torch.tensor([0]))) == pytest.approx(2.126928, abs=1e-6)
    assert float(F.cross_entropy(logits, torch.tensor([1]))) == pytest.approx(0.126928, abs=1e-6)


def test_feature_distillation_is_the_mean_squared_distance_of_unit_features():
    cur, pre = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([[0.0, 3.0], [0.0, 1.0]])
    assert float(feature_distillation(cur, pre)) == pytest.approx(1.0)


def test_the_clustering_guided_rows_are_the_centroids_least_like_the_old_rows():
    gen = torch.Generator().manual_seed(0)
    centres = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    z = torch.cat([c + 0.01 * torch.randn(20, 3, generator=gen) for c in centres])
    old = torch.tensor([[1.0, 0.05, 0.0]])  # one known class, along e1
    rows = clustered_rows(z, old, 2, random_state=0)
    found = {int(torch.argmax(r)) for r in rows}
    assert found == {1, 2} and torch.allclose(rows.norm(dim=1), torch.ones(2))


def test_the_normed_head_grows_and_keeps_its_old_rows():
    head = NormedHead(4, 2)
    grown = head.grown(3)
    assert grown.weight.shape == (5, 4) and torch.equal(grown.weight[:2], head.weight)
    assert float(grown.weight[2:].norm(dim=1).mean()) == pytest.approx(1 / math.sqrt(3), rel=0.3)
    z = torch.randn(3, 4)
    cosines = F.normalize(z, dim=1) @ F.normalize(grown.weight.detach(), dim=1).t()
    torch.testing.assert_close(grown(z).detach(), cosines)


def test_no_weight_decay_on_biases_and_norms():
    modules = [torch.nn.Linear(3, 2), torch.nn.LayerNorm(2)]
    decayed, free = parameter_groups(modules, 5e-5)
    assert decayed["weight_decay"] == 5e-5 and [p.shape for p in decayed["params"]] == [(2, 3)]
    assert free["weight_decay"] == 0.0 and len(free["params"]) == 3


def test_one_seeded_source_per_step_split_into_its_streams():
    """`Draws.of(seed, t)`: the same pair gives the same draws, another step others; its seeds are those each draw
    had before it was injected (the global generator's `seed·1000 + t` for the weights, the loader's + 300)."""
    a, b, later = Draws.of(3, 2), Draws.of(3, 2), Draws.of(3, 3)
    first = [torch.rand(4, generator=a.init), torch.rand(4, generator=a.train), a.kmeans.rand(4)]
    assert torch.equal(first[0], torch.rand(4, generator=b.init)) and torch.equal(first[1], torch.rand(4, generator=b.train))
    np.testing.assert_array_equal(first[2], b.kmeans.rand(4))
    assert not torch.equal(first[0], torch.rand(4, generator=later.init)) and not torch.equal(first[0], first[1])
    torch.manual_seed(3002)
    assert torch.equal(first[0], torch.rand(4))
    assert torch.equal(first[1], torch.rand(4, generator=torch.Generator().manual_seed(3302)))
    np.testing.assert_array_equal(first[2], np.random.RandomState(3002).rand(4))


def test_the_prototype_samples_and_loss_are_their_draws_by_hand():
    p = Prototypes()
    p.add(torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]))
    p.radius = 0.3
    head = NormedHead(2, 4)
    head.weight.data = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    loss = p.loss(head, 5, 0.1, 2.0, 0.1, torch.Generator().manual_seed(4))
    twin = torch.Generator().manual_seed(4)  # the draws, in their order: labels y ~ π, then ε
    y = torch.multinomial(p.probabilities(0.1), 5, replacement=True, generator=twin)
    x = p.means[y] + 0.3 * 2.0 * torch.randn(5, 2, generator=twin)
    x_drawn, y_drawn = p.sample(5, 0.1, 2.0, torch.Generator().manual_seed(4))
    assert torch.equal(y_drawn, y) and torch.equal(x_drawn, x)
    cosines = F.normalize(x, dim=1) @ head.weight.detach().t()
    by_hand = float(np.mean([-math.log(math.exp(c[k] / 0.1) / sum(math.exp(v / 0.1) for v in c))
                             for c, k in zip(cosines.tolist(), y.tolist())]))
    assert float(loss) == pytest.approx(by_hand, rel=1e-5)
    assert float(p.loss(head, 5, 0.1, 2.0, 0.1, torch.Generator().manual_seed(5))) != pytest.approx(by_hand, rel=1e-5)


def test_the_clustering_guided_rows_take_the_steps_kmeans_draws():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(40, 3, generator=gen)  # no clear clusters: the init decides them
    old = torch.tensor([[1.0, 0.0, 0.0]])
    rows = clustered_rows(z, old, 3, Draws.of(0, 7).kmeans)
    assert torch.equal(rows, clustered_rows(z, old, 3, Draws.of(0, 7).kmeans))
    assert torch.equal(rows, clustered_rows(z, old, 3, 7))  # the seed it had before it was injected
    assert not torch.equal(rows, clustered_rows(z, old, 3, Draws.of(0, 8).kmeans))


def batch(seed: int = 0, b: int = 4, classes: int = 5, dim: int = 3) -> Outputs:
    """Hand-made outputs of a batch of `b` images' two views."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(2 * b, dim, generator=gen, dtype=torch.float64)
    return Outputs(z, torch.randn(2 * b, classes, generator=gen, dtype=torch.float64),
                   F.normalize(torch.randn(2 * b, 4, generator=gen, dtype=torch.float64), dim=1),
                   z + 0.1 * torch.randn(2 * b, dim, generator=gen, dtype=torch.float64))


WEIGHTS = Weights(student_temperature=0.1, teacher=(0.07, 0.04, 2, 4), info_nce_temperature=1.0, memax=2.0,
                  sup_weight=0.35, supcon_temperature=0.07)


def test_the_labelled_objective_is_its_terms_by_hand():
    out, y = batch(), torch.tensor([0, 1, 1, 2])
    s, h = out.logits, out.projections
    loss, terms = objective(out, y, WEIGHTS, 1, torch.Generator())
    tau_t = 0.04  # np.linspace(0.07, 0.04, 2)[1]: the warm-up's last epoch
    unsupervised = distil(s[:4], s[4:], 0.1, tau_t) + 2.0 * entropy_regulariser(s, 0.1) + info_nce(h[:4], h[4:], 1.0)
    supervised = F.cross_entropy(s / 0.1, torch.cat([y, y])) + supcon(h[:4], h[4:], y, 0.07)
    torch.testing.assert_close(loss, 0.65 * unsupervised + 0.35 * supervised, rtol=1e-12, atol=0)
    assert set(terms) == {"distil", "entropy", "contrastive", "ce", "supcon"}


def test_happys_unlabelled_objective_is_its_terms_by_hand_and_its_draws_are_the_generators():
    out = batch()
    s, h = out.logits, out.projections
    prototypes = Prototypes()
    prototypes.add(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.6, 0.8]], dtype=torch.float64))
    prototypes.radius = 0.2
    head = NormedHead(3, 5)
    w = replace(WEIGHTS, soft_entropy=(1.0, 0.5, 2.0), proto=0.7, proto_samples=6, hardness_temperature=0.1,
                radius_scale=1.5, kd=3.0)
    past = Past(known=3, prototypes=prototypes)
    loss, terms = objective(out, None, w, 2, torch.Generator().manual_seed(9), head, past)
    again, _ = objective(out, None, w, 2, torch.Generator().manual_seed(9), head, past)
    other, _ = objective(out, None, w, 2, torch.Generator().manual_seed(10), head, past)
    assert torch.equal(loss, again) and not torch.equal(loss, other)
    proto = prototypes.loss(head, 6, 0.1, 1.5, 0.1, torch.Generator().manual_seed(9))  # the same draws
    by_hand = (distil(s[:4], s[4:], 0.1, 0.04) + soft_entropy(s, 3, 0.1, (1.0, 0.5, 2.0))
               + info_nce(h[:4], h[4:], 1.0) + (0.7 * proto + 3.0 * feature_distillation(out.z, out.z_previous)))
    torch.testing.assert_close(loss, by_hand, rtol=1e-6, atol=0)
    assert set(terms) == {"distil", "entropy", "contrastive", "proto", "kd"}
    with pytest.raises(RuntimeError, match="the previous step's features"):
        objective(replace(out, z_previous=None), None, w, 2, torch.Generator(), head, past)

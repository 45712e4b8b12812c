"""The parametric GCD learner's pieces (methods/gcd_losses.py), each against a hand computation on a tiny input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench.methods.gcd_losses import (NormedHead, Projector, distil, entropy_regulariser, info_nce, mean_entropy, supcon,
                                      teacher_temperature)


def unit(*rows: list[float]) -> torch.Tensor:
    return F.normalize(torch.tensor(rows, dtype=torch.float64), dim=1)


def test_info_nce_is_simclr_on_a_hand_computed_pair():
    h1, h2 = unit([1, 0], [0, 1]), unit([1, 0], [0, 1])
    # anchor 0 (image 0, view 1): positive sim 1, negatives: image 1's two views at sim 0; τ = 0.5
    tau = 0.5
    per_anchor = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + 2 * math.exp(0)))
    assert float(info_nce(h1, h2, tau)) == pytest.approx(per_anchor, rel=1e-12)  # all four anchors alike
    # the views swapped within an image: the positives are no longer the nearest, the loss grows
    assert float(info_nce(h1, unit([0, 1], [1, 0]), tau)) > per_anchor + 1


def test_supcon_counts_every_view_of_the_class_as_a_positive():
    h1 = unit([1, 0], [1, 0], [0, 1])
    h2 = unit([1, 0], [1, 0], [0, 1])
    labels = torch.tensor([0, 0, 1])
    tau = 1.0
    # anchor 0: three positives at sim 1 (its other view, both views of image 1), two negatives at sim 0
    denominator = 3 * math.e + 2
    anchor_ab = -math.log(math.e / denominator)  # every positive alike
    # anchor 2 (class 1): one positive at sim 1, four negatives at sim 0
    anchor_c = -math.log(math.e / (math.e + 4))
    expected = (4 * anchor_ab + 2 * anchor_c) / 6
    assert float(supcon(h1, h2, labels, tau)) == pytest.approx(expected, rel=1e-12)
    # the τ/τ_base scale of SupCon's code
    assert float(supcon(h1, h2, labels, tau, base_temperature=2.0)) == pytest.approx(expected / 2, rel=1e-12)
    # with every image its own class it is SimCLR's loss
    assert float(supcon(h1, h2, torch.arange(3), 0.3)) == pytest.approx(float(info_nce(h1, h2, 0.3)), rel=1e-12)


def test_the_teacher_temperature_warms_linearly_then_stays():
    values = [teacher_temperature(e, 10, 0.07, 0.04, 4) for e in range(12)]
    assert values[:4] == pytest.approx([0.07, 0.06, 0.05, 0.04], rel=1e-12)
    assert values[4:] == pytest.approx([0.04] * 8)


def test_distil_is_the_cross_entropy_of_each_view_on_the_other_sharpened():
    l1 = torch.tensor([[2.0, 0.0]], dtype=torch.float64, requires_grad=True)
    l2 = torch.tensor([[0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    q1, q2 = F.softmax(l1.detach() / 0.5, 1), F.softmax(l2.detach() / 0.5, 1)
    p1, p2 = F.log_softmax(l1.detach() / 0.1, 1), F.log_softmax(l2.detach() / 0.1, 1)
    expected = (-(q1 * p2).sum() - (q2 * p1).sum()) / 2
    loss = distil(l1, l2, 0.1, 0.5)
    assert float(loss) == pytest.approx(float(expected), rel=1e-12)
    loss.backward()  # the teacher side is detached: each gradient comes from the student side alone
    student_only = l1.detach().clone().requires_grad_(True)
    (-(q2 * F.log_softmax(student_only / 0.1, 1)).sum() / 2).backward()
    torch.testing.assert_close(l1.grad, student_only.grad, rtol=1e-12, atol=0)


def test_the_mean_entropy_regulariser_is_zero_when_even_and_log_k_when_one_class_takes_all():
    even = torch.tensor([[5.0, 0.0], [0.0, 5.0]])
    assert float(mean_entropy(even, 0.1)) == pytest.approx(math.log(2), rel=1e-6)
    assert float(entropy_regulariser(even, 0.1)) == pytest.approx(0.0, abs=1e-6)
    collapsed = torch.tensor([[50.0, 0.0, 0.0], [50.0, 0.0, 0.0]])
    assert float(entropy_regulariser(collapsed, 0.1)) == pytest.approx(math.log(3), rel=1e-6)
    # a class with exactly zero mass adds nothing (no 0·log 0 NaN)
    assert torch.isfinite(mean_entropy(torch.tensor([[0.0, -float("inf")]]), 1.0))


def test_the_projector_is_three_layers_to_a_unit_vector():
    torch.manual_seed(0)
    phi = Projector(8, hidden_dim=16, out_dim=4)
    assert [type(m).__name__ for m in phi.mlp] == ["Linear", "GELU", "Linear", "GELU", "Linear"]
    out = phi(torch.randn(5, 8))
    assert out.shape == (5, 4)
    np.testing.assert_allclose(out.norm(dim=1).detach().numpy(), 1.0, rtol=1e-6)
    assert all(float(m.bias.abs().max()) == 0 for m in phi.mlp if isinstance(m, torch.nn.Linear))


def test_the_projector_and_the_head_draw_from_an_injected_generator_what_the_global_one_drew():
    """φ and the head's rows come from the generator handed to them, in the order DINO's head and `nn.Linear`
    draw them: the same seed gives the same weights as the global generator gave before it was injected, and the
    global generator is left alone."""
    torch.manual_seed(5)  # what the step loop seeded, and these were drawn from, before the draws were injected
    rows = torch.nn.Linear(8, 3, bias=False).weight.detach().clone()
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 16), torch.nn.GELU(),
                              torch.nn.Linear(16, 4))
    for layer in mlp[::2]:
        torch.nn.init.trunc_normal_(layer.weight, std=0.02)
        torch.nn.init.zeros_(layer.bias)
    fresh = torch.nn.Linear(8, 2, bias=False).weight.detach().clone()
    torch.manual_seed(1)
    untouched = torch.rand(3)
    for _ in range(2):  # the same seed, the same draws
        torch.manual_seed(1)
        gen = torch.Generator().manual_seed(5)
        head = NormedHead(8, 3, gen)
        phi = Projector(8, hidden_dim=16, out_dim=4, gen=gen)
        grown = head.grown(2, gen)
        assert torch.equal(torch.rand(3), untouched)
        assert torch.equal(head.weight, rows) and torch.equal(grown.weight, torch.cat([rows, fresh]))
        assert all(torch.equal(a, b) for a, b in zip(phi.state_dict().values(), mlp.state_dict().values()))
    other = Projector(8, hidden_dim=16, out_dim=4, gen=torch.Generator().manual_seed(6))
    assert not torch.equal(other.mlp[0].weight, phi.mlp[0].weight)

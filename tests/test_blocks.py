"""The shared building blocks: cosine head, Sinkhorn-Knopp, the swapped loss and the schedule."""
import math

import pytest
import torch

from bench.features.views import FeatureViews
from bench.methods.blocks import CosineHead, sinkhorn_knopp, soft_cross_entropy, swapped_prediction_loss
from bench.methods.loop import cosine_lr


def reference_sinkhorn(logits: torch.Tensor, epsilon: float, n_iters: int) -> torch.Tensor:
    """The other common formulation: divide rows by their sum and by K, columns by their sum and by B."""
    q = torch.exp(logits / epsilon).t().double()
    q = q / q.sum()
    k, b = q.shape
    for _ in range(n_iters):
        q = q / q.sum(1, keepdim=True) / k
        q = q / q.sum(0, keepdim=True) / b
    return (q * b).t().float()


def test_sinkhorn_rows_are_distributions_and_match_reference():
    torch.manual_seed(0)
    logits = torch.rand(32, 5) * 2 - 1
    q = sinkhorn_knopp(logits, epsilon=0.05, n_iters=3)
    assert q.shape == (32, 5)
    torch.testing.assert_close(q.sum(1), torch.ones(32))
    torch.testing.assert_close(q, reference_sinkhorn(logits, 0.05, 3), atol=1e-5, rtol=1e-4)


def test_sinkhorn_spreads_a_collapsed_batch_over_all_classes():
    # Every sample prefers class 0; the equal-partition constraint must still give each class ~B/K mass.
    logits = torch.tensor([[1.0, 0.9, 0.8, 0.7]]).repeat(40, 1) + 0.01 * torch.randn(40, 4)
    q = sinkhorn_knopp(logits, epsilon=0.05, n_iters=50)
    torch.testing.assert_close(q.sum(0), torch.full((4,), 10.0), atol=0.05, rtol=0)


def test_cosine_head_normalises_features_and_weights():
    head = CosineHead(6, 3, normalize_weights=True)
    with torch.no_grad():
        head.weight.mul_(7.0)
    x = torch.randn(10, 6)
    head.eval()
    logits = head(x)
    assert logits.abs().max() <= 1.0 + 1e-6
    torch.testing.assert_close(head(3.0 * x), logits)  # feature scale does not matter
    head.renormalize()
    torch.testing.assert_close(head.weight.norm(dim=1), torch.ones(3))


def test_cosine_head_without_weight_normalisation_keeps_weights():
    head = CosineHead(4, 2, normalize_weights=False)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[2.0, 0, 0, 0], [0, 3.0, 0, 0]]))
    head.renormalize()
    assert head.weight[1, 1].item() == 3.0
    head.eval()
    torch.testing.assert_close(head(torch.tensor([[0.0, 1.0, 0, 0]])), torch.tensor([[0.0, 3.0]]))


def test_swapped_loss_uses_the_other_views_assignment():
    torch.manual_seed(1)
    l1, l2 = torch.randn(8, 4, requires_grad=True), torch.randn(8, 4)
    ce1, ce2 = soft_cross_entropy(l1, sinkhorn_knopp(l2), 0.1), soft_cross_entropy(l2, sinkhorn_knopp(l1), 0.1)
    # Algorithm 1 sums the two views' cross-entropies; the authors' code averages the 2B rows
    loss = swapped_prediction_loss(l1, l2, temperature=0.1, epsilon=0.05, n_iters=3, reduction="sum")
    torch.testing.assert_close(loss, ce1 + ce2)
    mean = swapped_prediction_loss(l1, l2, temperature=0.1, epsilon=0.05, n_iters=3, reduction="mean")
    torch.testing.assert_close(mean, (ce1 + ce2) / 2)
    loss.backward()
    assert l1.grad is not None and l1.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="choose from sum, mean"):
        swapped_prediction_loss(l1, l2, temperature=0.1, epsilon=0.05, n_iters=3, reduction="avg")


def test_cosine_schedule_is_stepped_at_epoch_start():
    assert cosine_lr(0, 10, 0.1, 1e-4) == pytest.approx(1e-4 + (0.1 - 1e-4) * (1 + math.cos(math.pi / 10)) / 2)
    assert cosine_lr(9, 10, 0.1, 1e-4) == pytest.approx(1e-4)


def test_two_views_are_distinct_stored_views():
    views = torch.arange(5 * 3).float().view(5, 3, 1)  # sample i, view v → value 3i+v
    data = FeatureViews(torch.zeros(5, 1), views)
    a, b = data.two_views(torch.arange(5), torch.Generator().manual_seed(0))
    assert torch.all(a != b)
    assert torch.all((a // 3) == torch.arange(5).view(5, 1))  # both views come from the same image
    assert torch.all((b // 3) == torch.arange(5).view(5, 1))

"""Cosine heads trained together (`bench.methods.batched_heads`, `bench tune --batch`): equal to the same heads trained
one after another by `train_head_swapped` / `train_head_supervised`."""
from __future__ import annotations

import pytest
import torch

from bench.features.views import FeatureViews
from bench.methods.batched_heads import sinkhorn_batched, train_heads
from bench.methods.blocks import CosineHead, sinkhorn_knopp, train_head_supervised, train_head_swapped

HP = dict(lr=0.1, eta_min=1e-4, momentum=0.9, weight_decay=5e-5, temperature=0.1, sk_epsilon=0.05, sk_iters=3,
          swap_reduction="sum")
# distinct trials: learning rates, temperatures, and one each of momentum, weight decay and epsilon changed
TRIALS = [dict(lr=0.05, temperature=0.1), dict(lr=0.3, temperature=0.07), dict(lr=0.01, temperature=0.2),
          dict(lr=0.1, temperature=0.15, momentum=0.0, weight_decay=1e-3, sk_epsilon=0.1, eta_min=1e-3)]


def _features(n: int = 37, d: int = 8, views: int = 3) -> FeatureViews:
    gen = torch.Generator().manual_seed(5)
    return FeatureViews(torch.randn(n, d, generator=gen), torch.randn(n, views, d, generator=gen))


def _head(seed: int = 1, normalize: bool = True) -> CosineHead:
    torch.manual_seed(seed)
    return CosineHead(8, 4, normalize)


@pytest.mark.parametrize("labelled", [False, True])
@pytest.mark.parametrize("reduction, normalize", [("sum", True), ("mean", False)])
def test_heads_trained_together_equal_each_trained_alone(labelled, reduction, normalize):
    data = _features()
    labels = torch.randint(0, 4, (len(data),), generator=torch.Generator().manual_seed(2)) if labelled else None
    hps = [{**HP, "swap_reduction": reduction, **trial} for trial in TRIALS]
    alone, alone_losses = [], []
    for hp in hps:
        head, gen = _head(normalize=normalize), torch.Generator().manual_seed(9)
        head.train()
        if labels is None:
            alone_losses.append(train_head_swapped(head, data, hp, epochs=4, batch_size=10, gen=gen))
        else:
            alone_losses.append(train_head_supervised(head, data, labels, hp, epochs=4, batch_size=10, gen=gen))
        alone.append(head.weight.detach().clone())
        left_at = gen.get_state()
    heads = [_head(normalize=normalize) for _ in hps]
    gen = torch.Generator().manual_seed(9)
    seen: list[list[int]] = [[] for _ in hps]
    after = [lambda e, i=i: seen[i].append(e) for i in range(len(hps))]
    losses = train_heads(heads, data, hps, epochs=4, batch_size=10, gen=gen, labels=labels, after_epoch=after)
    assert seen == [[0, 1, 2, 3]] * len(hps)
    assert len({round(ls[-1], 6) for ls in losses}) == len(hps)  # the trials did differ
    for i, head in enumerate(heads):
        assert not head.training
        torch.testing.assert_close(head.weight.detach(), alone[i], rtol=1e-5, atol=1e-6)
        assert losses[i] == pytest.approx(alone_losses[i], rel=1e-5)
    # the generator ends where one trial alone leaves it: the runs' later draws stay the same
    assert torch.equal(gen.get_state(), left_at)


def test_batched_sinkhorn_is_each_trials_own():
    logits = torch.randn(3, 6, 4, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 5.0, 0.2]).view(3, 1, 1)
    eps = torch.tensor([0.05, 0.1, 0.5]).view(3, 1, 1)
    got = sinkhorn_batched(logits, eps, 3)
    for i in range(3):
        torch.testing.assert_close(got[i], sinkhorn_knopp(logits[i], float(eps[i]), 3), rtol=1e-5, atol=1e-7)


def test_heads_of_different_shapes_cannot_batch():
    with pytest.raises(ValueError, match="share their shape"):
        train_heads([CosineHead(8, 4), CosineHead(8, 5)], _features(), [HP, HP], epochs=1, batch_size=4,
                    gen=torch.Generator())

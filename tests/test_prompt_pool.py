"""PromptCCD's prompt pool (methods/prompt_pool.py) on hand-computed cases: the top-k components by posterior
responsibility, queries scored in the space the pool was fitted in, prompts inserted with the CLS position, the
replay kept for the next step's fit."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.features.backbones import build_backbone
from bench.features.tokens import embed, vit_of
from bench.methods.prompt_pool import PromptPool, frozen_blocks, with_prompts


def pool_of(means, variances, weights) -> PromptPool:
    """A pool whose mixture is exactly the given spherical components (fitted once for its shapes, then set)."""
    pool = PromptPool("spherical", seed=0)
    pool.fit(torch.randn(40, 2), len(means))
    m = pool.mixture
    m.means_ = np.asarray(means, dtype=float)
    m.covariances_ = np.asarray(variances, dtype=float)
    m.precisions_cholesky_ = 1 / np.sqrt(m.covariances_)
    m.weights_ = np.asarray(weights, dtype=float)
    return pool


def test_the_top_k_follow_the_posterior_responsibility_not_the_likelihood_alone():
    # q at unit norm: (1, 0); components at (1, 0) and (0.6, 0.8), σ² = 1
    q = torch.tensor([[1.0, 0.0]])
    near = -math.log(2 * math.pi) - 0.0
    far = -math.log(2 * math.pi) - 0.5 * ((1 - 0.6) ** 2 + 0.8 ** 2)
    even = pool_of([[1, 0], [0.6, 0.8]], [1, 1], [0.5, 0.5])
    expected = math.exp(near) / (math.exp(near) + math.exp(far))
    assert float(even.responsibilities(q)[0, 0]) == pytest.approx(expected, rel=1e-9)
    torch.testing.assert_close(even.prompts(q, 2)[0], torch.tensor([[1.0, 0.0], [0.6, 0.8]]))
    # a heavier mixing weight on the farther component flips the order (the likelihood alone would not)
    heavy = pool_of([[1, 0], [0.6, 0.8]], [1, 1], [0.2, 0.8])
    r = heavy.responsibilities(q)[0]
    assert float(r[1]) == pytest.approx(0.8 * math.exp(far) / (0.2 * math.exp(near) + 0.8 * math.exp(far)), rel=1e-9)
    torch.testing.assert_close(heavy.prompts(q, 1)[0], torch.tensor([[0.6, 0.8]]))


def test_a_query_is_scored_where_the_pool_was_fitted_whatever_its_norm():
    pool = pool_of([[1, 0], [0.8, 0.6]], [0.01, 0.05], [0.5, 0.5])
    q = torch.tensor([[0.9, 0.1]])
    torch.testing.assert_close(pool.responsibilities(q), pool.responsibilities(10 * q))
    torch.testing.assert_close(pool.prompts(10 * q, 1)[0], torch.tensor([[1.0, 0.0]]))  # raw, the broader one would win
    raw = pool.mixture.predict_proba((10 * q).double().numpy())
    assert raw[0, 1] > 0.99  # (what an unnormalised query would pick)


def test_the_replay_is_drawn_from_the_mixture_and_joins_the_next_fit():
    gen = torch.Generator().manual_seed(0)
    blobs = torch.cat([torch.tensor([[1.0, 0.0]]) + 0.01 * torch.randn(30, 2, generator=gen),
                       torch.tensor([[0.0, 1.0]]) + 0.01 * torch.randn(30, 2, generator=gen)])
    pool = PromptPool("spherical", seed=0)
    pool.fit(blobs, 2)
    pool.keep_samples(50)
    assert pool.replay.shape == (50, 2)
    # the next step sees only one class's images; the replayed samples keep the other component alive
    pool.fit(blobs[:30], 2)
    found = sorted(pool.mixture.means_.round(1).tolist())
    assert found[-1] == [1.0, 0.0] and found[0][1] > 0.5
    without = PromptPool("spherical", seed=0)
    without.fit(blobs[:30], 2)
    assert all(m[0] > 0.9 for m in without.mixture.means_.round(1).tolist())


@pytest.fixture(scope="module")
def vit():
    torch.manual_seed(0)
    return build_backbone("timm:vit_tiny_patch16_224", {"pretrained": False, "kwargs": dict(
        img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2)}, (16, 16, 3))


def test_prompts_enter_after_the_class_token_with_its_position(vit):
    model = vit_of(vit)
    tokens = embed(model, torch.randn(3, 3, 16, 16))
    prompts = torch.randn(3, 2, 32)
    x = with_prompts(vit, tokens, prompts)
    assert x.shape == (3, tokens.shape[1] + 2, 32)
    torch.testing.assert_close(x[:, 1:3], prompts + model.pos_embed[:, :1])
    torch.testing.assert_close(x[:, :1], tokens[:, :1])
    torch.testing.assert_close(x[:, 3:], tokens[:, 1:])


def test_the_class_tokens_output_ignores_the_prompts_order(vit):
    model = vit_of(vit).eval()
    tokens = embed(model, torch.randn(2, 3, 16, 16))
    prompts = torch.randn(2, 3, 32)
    a = frozen_blocks(vit, with_prompts(vit, tokens, prompts), 2)[:, 0]
    b = frozen_blocks(vit, with_prompts(vit, tokens, prompts[:, [2, 0, 1]]), 2)[:, 0]
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    c = frozen_blocks(vit, tokens, 2)[:, 0]
    assert not torch.allclose(a, c, atol=1e-4)  # but prompts change it

"""CaSSLe (methods/cassle.py): the BYOL loss, the EMA schedule, the frozen distillation target and
that no label reaches the method, on tiny models. Resuming after a kill is `test_incremental`'s test
over every tail method."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import bench.features.augment as A
import bench.methods.cassle as cassle
from bench.features.augment import get_policy
from bench.data import build_dataset
from bench.data.base import ImageSet
from bench.features.views import Encoder
from bench.config.presets import load_preset
from bench.features.tokens import LiveTokens, Prefix
from bench.methods.base import Step
from bench.methods.cassle import byol_loss, byol_views, ema_tau, ema_update
from tests.test_discovery import bound, learn_steps
from tests.test_pins import digest


def test_byol_loss_by_hand_and_the_target_gets_no_gradient():
    p = torch.tensor([[1.0, 0.0], [1.0, 1.0]], requires_grad=True)
    z = torch.tensor([[0.0, 3.0], [2.0, 2.0]], requires_grad=True)
    # cosines 0 and 1: 2 − 2·mean(0, 1) = 1
    loss = byol_loss(p, z)
    assert loss.item() == pytest.approx(1.0)
    loss.backward()
    assert z.grad is None and p.grad.abs().sum() > 0


def test_the_ema_schedule_and_update_by_hand():
    assert ema_tau(0, 10, 0.99, 1.0) == pytest.approx(0.99)
    assert ema_tau(5, 10, 0.99, 1.0) == pytest.approx(0.995)
    assert ema_tau(10, 10, 0.99, 1.0) == pytest.approx(1.0)
    online, target = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
    online.weight.data.fill_(2.0)
    target.weight.data.fill_(1.0)
    ema_update(online, target, 0.9)
    assert target.weight.item() == pytest.approx(0.9 * 1.0 + 0.1 * 2.0)


def test_the_target_follows_every_optimiser_step_and_the_schedule_restarts_each_step(monkeypatch):
    method, _, spec = bound("CaSSLe")
    taus = []
    real = cassle.ema_update
    monkeypatch.setattr(cassle, "ema_update", lambda online, target, tau: taus.append(tau) or real(online, target, tau))
    learn_steps(method, spec, steps=2)
    hp = spec.config["method"]
    per_step = max(1, 36 // hp["ssl_batch_size"]) * hp["ssl_epochs"]  # 36 images per step, no partial batch
    expected = [ema_tau(k, per_step, 0.99, 1.0) for k in range(per_step)]
    assert taus == pytest.approx(expected * 2)


def test_the_distillation_target_is_the_previous_model_frozen(monkeypatch):
    method, _, spec = bound("CaSSLe")
    learn_steps(method, spec, steps=1)
    before = {k: v.clone() for k, v in method.nets["online"].state_dict().items()}
    teachers = []
    real = cassle.Projected.frozen_copy
    monkeypatch.setattr(cassle.Projected, "frozen_copy", lambda self: teachers.append(real(self)) or teachers[-1])
    learn_steps(method, spec, steps=2, start=1)
    (teacher,) = teachers
    assert all(not p.requires_grad and p.grad is None for p in teacher.parameters())
    after = teacher.state_dict()
    # the frozen copy still holds the model at the end of step 0 (batch-norm running statistics aside)
    assert all(torch.equal(after[k], before[k]) for k in before if "running" not in k and "num_batches" not in k)
    moved = method.nets["online"].state_dict()
    assert any(not torch.equal(moved[k], before[k]) for k in before)  # while the student moved on


def test_no_label_reaches_the_method():
    """The step's token source holds no label (all −1), and the same images under other labels train
    exactly the same state."""
    states = []
    for relabel in (False, True):
        method, _, spec = bound("CaSSLe")
        data = build_dataset("synthetic", spec.config["dataset"])
        rows = np.flatnonzero(data.train.labels < 3)
        images = data.train.subset(rows)
        if relabel:  # the same images under shuffled labels
            images = ImageSet(images.images, np.random.default_rng(0).permutation(images.labels))
        source = LiveTokens(images, Encoder(method.backbone, data, "cpu"), Prefix(method.backbone, method.first_trainable))
        assert (source.images.labels == -1).all()
        torch.manual_seed(0)  # the head's initialisation
        method.learn(Step(index=0, n_classes=3, offset=0, train=None, tokens=source))
        states.append(digest(method.state_dict()))
    assert states[0] == states[1]


def test_inference_is_the_last_tail_with_every_head():
    method, _, spec = bound("CaSSLe")
    sources = learn_steps(method, spec, steps=2)
    tokens = sources[0].plain(np.arange(4))
    with torch.no_grad():
        z = method.tail(tokens)
        expected = torch.cat([h(z) for h in method.heads], dim=1)
    assert len(method.heads) == 2 and math.isfinite(expected.sum().item())
    torch.testing.assert_close(method.logits(tokens), expected)


@pytest.mark.parametrize("preset", ["paper", "code"])
def test_byol_views_are_cassles_cifar_views_whatever_the_datasets_policy(preset, monkeypatch):
    """cassle's CifarTransform with byol_distill.sh's values: RandomResizedCrop(scale=(0.08, 1)) only
    (bench's base crop: RandomCrop or RandomResizedCrop(scale=(0.5, 1))), ColorJitter(0.4, 0.4, 0.2, 0.1)
    with p 0.8 (saturation factors in [0.8, 1.2], the paper's policy has [0.6, 1.4]), grayscale 0.2,
    no equalisation, solarisation at PIL's threshold 128 on the second view only."""
    hp, _ = load_preset("CaSSLe", "code")
    first, second = (A.policy_variant(get_policy("cifar", preset, size=224), v) for v in byol_views(hp))
    areas, saturations = [], []
    monkeypatch.setattr(A, "resample", lambda x, sizes, size, top, left, height, width, fh, fw, flip:
                        areas.append(height * width / (fh * fw)) or x.clone())  # the windows; no resampling
    ops = list(A.JITTER_OPS)
    ops[2] = lambda x, f: saturations.append(f) or A.saturation(x, f)
    monkeypatch.setattr(A, "JITTER_OPS", tuple(ops))
    n = 2000
    x = torch.rand(n, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    first(x, torch.Generator().manual_seed(1))
    area, factor = torch.cat(areas), torch.cat(saturations)
    assert 0.08 * 0.98 <= area.min() < 0.1 and area.max() <= 1.0  # down to 8% of the image, never padded
    assert (area < 0.5).float().mean() > 0.4  # U[0.08, 1]: about 45% of the crops are under half the image
    assert 0.8 <= factor.min() < 0.82 and 1.18 < factor.max() <= 1.2
    assert abs(len(factor) / n - 0.8) < 0.03  # ColorJitter on 80% of the images
    assert (first.grayscale_p, first.equalize_p, first.solarize_p, first.blur_p) == (0.2, 0.0, 0.0, 0.0)
    assert (second.solarize_p, second.solarize_threshold, second.jitter) == (0.2, 128.0, (0.4, 0.4, 0.2, 0.1))


def test_the_byol_step_draws_cassles_views(monkeypatch):
    method, _, spec = bound("CaSSLe")
    seen = []
    real = LiveTokens.two_views
    monkeypatch.setattr(LiveTokens, "two_views", lambda self, index, gen, variants=None:
                        seen.append(variants) or real(self, index, gen, variants))
    learn_steps(method, spec, steps=1)
    byol = [v for v in seen if v is not None]
    assert byol and all(v == byol_views(spec.config["method"]) for v in byol)
    assert byol[0][0]["crop_min_scale"] == 0.08 and byol[0][0]["jitter"][2] == 0.2

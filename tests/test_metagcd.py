"""MetaGCD (methods/metagcd.py, methods/metagcd_parts.py): its soft neighbourhood loss and meta-update against
hand-computed cases, its pseudo sessions, and the method end to end on a tiny ViT in the mixed setting, where each
of its parts changes what it learns."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from bench.errors import BenchError
from bench.methods.gcd_losses import supcon, weighted_supcon
from bench.methods.metagcd_parts import meta_step, pseudo_sessions, soft_loss, soft_neighbours
from bench.protocol.runner import execute
from bench.runs.predictions import PREDICTIONS, Keys, each, opened
from tests.helpers import tiny_specs

TINY_VIT = "timm:vit_tiny_patch16_224"
# a tiny run: 12 classes, the labelled step one offline epoch and one meta-task of two pseudo sessions
TINY = {"dataset.num_classes": 12, "dataset.train_per_class": 12, "dataset.test_per_class": 4,
        "method.epochs": 2, "method.batch_size": 16, "method.offline_epochs": 1, "method.offline_batch_size": 16,
        "method.meta_tasks": 1, "method.pseudo_sessions": 2, "method.inner_epochs": 1, "method.outer_steps": 2,
        "method.meta_batch_size": 16, "method.head_dim": 64, "method.proj_dim": 16, "method.kmeans_inits": 2,
        # rates that move a tiny ViT in one or two epochs (the code's 1e-4 and 1e-5 leave it where it was)
        "method.offline_lr": 0.01, "method.lr": 0.01, "method.inner_lr": 0.01, "method.outer_lr": 0.01}


def unit(*rows: list[float]) -> torch.Tensor:
    return F.normalize(torch.tensor(rows, dtype=torch.float64), dim=1)


# --- the soft neighbourhood loss ----------------------------------------------------------------------------

def hand_soft_loss(cos: float, tau: float) -> float:
    """Two images, each view equal to its image, their cosine `cos` ≥ the threshold: every other view is a positive
    of each anchor; its own other view weighs 1, the other image's views exp(cos)/exp(1) (attention / its max)."""
    z = math.exp(1 / tau) + 2 * math.exp(cos / tau)
    own, other = 1 / tau - math.log(z), cos / tau - math.log(z)
    return -(own + 2 * math.exp(cos - 1) * other) / 3


def test_the_soft_loss_matches_a_hand_computed_case():
    c = 0.9
    h = unit([1.0, 0.0], [c, math.sqrt(1 - c * c)])
    got = soft_loss(h, h.clone(), threshold=0.85, temperature=0.5)
    assert got is not None and math.isclose(float(got), hand_soft_loss(c, 0.5), rel_tol=1e-9)


def test_an_image_without_a_neighbour_is_left_out_and_none_leaves_no_loss():
    c = 0.9
    pair = unit([1.0, 0.0, 0.0], [c, math.sqrt(1 - c * c), 0.0])
    lonely = torch.cat([pair, unit([0.0, 0.0, 1.0])])
    n = soft_neighbours(lonely, lonely, 0.85)
    assert n.kept.tolist() == [0, 1] and n.same.all()
    np.testing.assert_allclose(n.weight.numpy(), [[1, math.exp(c - 1)], [math.exp(c - 1), 1]], rtol=1e-12)
    got = soft_loss(lonely, lonely.clone(), 0.85, 0.5)
    assert got is not None and math.isclose(float(got), hand_soft_loss(c, 0.5), rel_tol=1e-9)
    assert soft_loss(lonely, lonely, threshold=0.95, temperature=0.5) is None  # no pair that close


def test_the_neighbourhood_is_the_closest_pair_of_views():
    # image 0's second view is near image 1's first: they are neighbours, though their first views are far apart
    h1, h2 = unit([1.0, 0.0], [0.0, 1.0]), unit([0.1, 1.0], [0.0, 1.0])
    assert soft_neighbours(h1, h2, 0.85).kept.tolist() == [0, 1]
    assert soft_neighbours(h1, h1, 0.85).kept.tolist() == []


def test_weighted_supcon_with_unit_weights_is_supcon():
    gen = torch.Generator().manual_seed(0)
    h1, h2 = (F.normalize(torch.randn(6, 4, generator=gen, dtype=torch.float64), dim=1) for _ in range(2))
    y = torch.tensor([0, 1, 0, 2, 1, 0])
    same = y[:, None] == y[None, :]
    ones = torch.ones(6, 6, dtype=torch.float64)
    assert math.isclose(float(weighted_supcon(h1, h2, same, 0.07, weight=ones)), float(supcon(h1, h2, y, 0.07)),
                        rel_tol=1e-12)
    halved = weighted_supcon(h1, h2, same, 0.07, weight=ones / 2)
    assert math.isclose(float(halved), float(supcon(h1, h2, y, 0.07)) / 2, rel_tol=1e-12)


# --- the meta-update ----------------------------------------------------------------------------------------

def test_the_meta_step_matches_a_hand_computed_first_order_update():
    # θ = 1; inner: one SGD step of (θ − 3)² at η = 0.1 → θ' = 1 − 0.1·2·(1 − 3) = 1.4;
    # outer: g = d/dθ' (θ' − 5)² = 2·(1.4 − 5) = −7.2, applied to θ: 1 − 0.01·(−7.2) = 1.072
    w = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    inner = torch.optim.SGD([w], lr=0.1)

    def adapt() -> None:
        inner.zero_grad()
        ((w - 3) ** 2).backward()
        inner.step()

    meta_step([w], adapt, lambda: (w - 5) ** 2, torch.optim.SGD([w], lr=0.01))
    assert math.isclose(w.item(), 1.072, rel_tol=1e-12)
    # without adaptation the gradient is taken at θ itself: 1 − 0.01·2·(1.072 − 5)
    meta_step([w], lambda: None, lambda: (w - 5) ** 2, torch.optim.SGD([w], lr=0.01))
    assert math.isclose(w.item(), 1.072 + 0.02 * (5 - 1.072), rel_tol=1e-12)


# --- against the authors' code ------------------------------------------------------------------------------
# The numbers ynanwu/MetaGCD's own functions (7a0b1d1: `info_nce_logits`, `SupConLoss`, `generate_pseudo_labels`)
# give on the inputs below: `python benchmarks/metagcd_reference.py --checkout DIR --pin`, whose `clustered` draws
# them (seed 52); the script compares every piece, gradients and the meta-update included.
REFERENCE = dict(info_nce=2.179952031619909, supcon=5.043348168717063, soft=1.5927867039553587,
                 unsupervised=1.8863693677876339, kept=list(range(9)),
                 weight_row0=[1.0, 0.0, 0.0, 0.951155753184134, 0.0, 0.0, 0.9822765741945039, 0.0, 0.0],
                 soft_grad_x1_row1=[-0.022907030245585887, 0.029920922456499695, 0.014875655726535479,
                                    -0.06827786639411484, 0.007622220293703005, 0.02612936470994414],
                 soft_grad_norm=0.3532166257373198)


def reference_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """benchmarks/metagcd_reference.py's `clustered` at seed 52: two views of ten images around three centres,
    the last image far from all (no neighbour), each image's label its centre."""
    gen = torch.Generator().manual_seed(52)
    centres = torch.randn(3, 6, generator=gen, dtype=torch.float64)
    labels = torch.arange(10) % 3
    base = centres[labels] + 0.25 * torch.randn(10, 6, generator=gen, dtype=torch.float64)
    base[-1] = -4 * centres.sum(0) + torch.randn(6, generator=gen, dtype=torch.float64)
    x1, x2 = (base + 0.1 * torch.randn(10, 6, generator=gen, dtype=torch.float64) for _ in range(2))
    return x1.requires_grad_(), x2.requires_grad_(), labels


def test_the_pieces_give_the_authors_numbers():
    from bench.methods.gcd_losses import info_nce
    from bench.methods.metagcd import MetaGCD

    x1, x2, labels = reference_inputs()
    h1, h2 = F.normalize(x1, dim=1), F.normalize(x2, dim=1)
    stand_in = SimpleNamespace(project=lambda v: (F.normalize(v[0], dim=1), F.normalize(v[1], dim=1)), hparams=dict(
        sup_weight=0.5, info_nce_temperature=1.0, supcon_temperature=0.07, soft_threshold=0.85))
    n = soft_neighbours(h1, h2, 0.85)
    soft = soft_loss(h1, h2, 0.85, 0.07)
    assert soft is not None and n.kept.tolist() == REFERENCE["kept"]
    got = dict(info_nce=float(info_nce(h1, h2, 1.0)), supcon=float(supcon(h1, h2, labels, 0.07)), soft=float(soft),
               unsupervised=float(MetaGCD.unsupervised(stand_in, (x1, x2))))
    assert got == pytest.approx({k: REFERENCE[k] for k in got}, rel=1e-10)
    np.testing.assert_allclose(n.weight[0].detach().numpy(), REFERENCE["weight_row0"], rtol=1e-10, atol=1e-15)
    # the attention weights carry the gradient in the authors' code: the gradient shows whether bench's do
    g1, g2 = torch.autograd.grad(soft, (x1, x2))
    np.testing.assert_allclose(g1[1].numpy(), REFERENCE["soft_grad_x1_row1"], rtol=1e-10, atol=1e-15)
    assert float(torch.cat([g1, g2]).norm()) == pytest.approx(REFERENCE["soft_grad_norm"], rel=1e-10)


# --- the pseudo sessions ------------------------------------------------------------------------------------

def test_pseudo_sessions_deal_old_images_once_and_bring_novel_classes_cumulatively():
    labels = torch.arange(8).repeat_interleave(6)  # 8 classes of 6 images
    sessions = pseudo_sessions(labels, 8, sessions=2, old_ratio=0.75, old_held=2 / 3, novel_share=0.5,
                               gen=torch.Generator().manual_seed(0))
    counts = [torch.bincount(labels[s], minlength=8) for s in sessions]
    old = [c for c in range(8) if counts[0][c] == 2]  # 4 of each old class's 6 images held, 2 a session
    assert len(old) == 6 and all(counts[1][c] == 2 for c in old)
    novel = [c for c in range(8) if c not in old]  # one a session, cumulative, 3 of its 6 images drawn afresh
    assert sorted(int(counts[0][c]) for c in novel) == [0, 3] and [int(counts[1][c]) for c in novel] == [3, 3]
    in_old = [set(s[torch.isin(labels[s], torch.tensor(old))].tolist()) for s in sessions]
    assert not in_old[0] & in_old[1]  # an old image is dealt to one session only


# --- the method ---------------------------------------------------------------------------------------------

def run(tmp: Path, **options) -> Path:
    (spec,) = tiny_specs(methods=["MetaGCD"], splits=["happy-5-stage"], backbone=TINY_VIT, **{**TINY, **options})
    return execute(spec, tmp)


def losses(out: Path) -> dict[tuple[int, ...], np.ndarray]:
    with opened(out / PREDICTIONS) as stored:
        return each(stored, Keys.epoch_loss)


def test_it_runs_the_mixed_setting_and_each_part_changes_what_it_learns(tmp_path):
    full = run(tmp_path / "full")
    frame = pd.read_parquet(full / "metrics.parquet")
    assert {"All", "Old_hard", "New_hard"} <= set(frame[frame.group == "summary"].metric)
    loops = losses(full)
    # the labelled step: the offline loop, then per pseudo session its inner loop; each later step one loop
    assert (0, 0) in loops and (0, 1) in loops and (0, 2) in loops and (1, 0) in loops and (1, 1) not in loops
    without_meta = losses(run(tmp_path / "no-meta", **{"method.meta_tasks": 0}))
    assert (0, 1) not in without_meta
    np.testing.assert_array_equal(loops[(0, 0)], without_meta[(0, 0)])  # the same offline epoch
    # the tiny ViT's projections of the synthetic images are close, so the losses differ in their last digits only;
    # the runs are seeded alike, so any difference is the part's (the offline epoch above is equal to the bit)
    assert not np.array_equal(loops[(1, 0)], without_meta[(1, 0)])  # meta-training moved the model
    no_soft = losses(run(tmp_path / "no-soft", **{"method.soft_threshold": 1.5}))  # no neighbour: L_con alone
    np.testing.assert_array_equal(loops[(0, 0)], no_soft[(0, 0)])
    assert not np.array_equal(loops[(0, 1)], no_soft[(0, 1)])


def test_it_refuses_a_selection_that_would_score_centroids_it_has_not_made(tmp_path):
    with pytest.raises(BenchError, match="MetaGCD predicts from centroids"):
        run(tmp_path, **{"setting.selection": "oracle"})

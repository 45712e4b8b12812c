"""VB-CGCD (docs/methods.md#vb-cgcd): each piece of the port against a hand computation on tiny inputs, each
switch of the code's procedure shown to change the result, planted classes recovered in both settings, and a
mixed run end to end. The port against the authors' JAX code itself: benchmarks/vb_cgcd_reference.py."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import multivariate_normal

import bench.methods.vb_cgcd as vb
from bench.config.presets import load_preset
from bench.methods.vb_cgcd import (VBCGCD, adam_step, batch_nll, covariance_stop, fit_gaussians,
                                   gaussian_log_likelihood, learning_rate, log_mean_det, nll_and_grad, not_known,
                                   pca_fit, symmetric)
from tests.test_cgcd_baselines import hungarian_accuracy, planted, step

SCALE = 10.0  # planted classes 0.8 apart around unit vectors: far enough for Adam's ≈ 0.04 of movement


def make(dim: int = 16, seed: int = 0, **overrides) -> VBCGCD:
    params, _ = load_preset("VB-CGCD", "code")
    return VBCGCD(dim, seed, **{**params, **overrides})


def f64(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


# -- the pieces --

def test_learning_rate_warms_up_linearly_then_decays_by_085_every_500_steps():
    lr = 4e-6
    assert learning_rate(0, lr) == pytest.approx(lr, rel=1e-12)
    assert learning_rate(50, lr) == pytest.approx(5.5 * lr, rel=1e-12)
    assert learning_rate(99, lr) == pytest.approx(lr + 9 * lr * 0.99, rel=1e-12)
    assert learning_rate(100, lr) == pytest.approx(10 * lr, rel=1e-12)
    assert learning_rate(600, lr) == pytest.approx(10 * lr * 0.85, rel=1e-12)
    assert learning_rate(350, lr) == pytest.approx(10 * lr * 0.85 ** 0.5, rel=1e-12)  # not a staircase


def test_log_likelihood_reads_the_symmetric_part_of_a_free_matrix():
    z = f64([[0.3, -1.0], [2.0, 0.5], [-0.4, 0.1]])
    means = f64([[0.0, 0.0], [1.0, -0.5]])
    covs = f64([[[2.0, 0.4], [0.0, 1.0]], [[0.5, 0.1], [0.1, 0.8]]])  # the first is not symmetric
    got = gaussian_log_likelihood(z, means, covs)
    sym = [np.array([[2.0, 0.2], [0.2, 1.0]]), covs[1].numpy()]
    for k in range(2):
        np.testing.assert_allclose(got[:, k].numpy(), multivariate_normal.logpdf(z.numpy(), means[k].numpy(), sym[k]),
                                   rtol=1e-12)
    bad = gaussian_log_likelihood(z, means[:1], f64([[[1.0, 2.0], [2.0, 1.0]]]))  # eigenvalues 3 and −1
    assert bad.isnan().all()


def test_batch_loss_is_the_negative_log_likelihood_of_each_image_under_its_class():
    z = f64([[0.3, -1.0], [2.0, 0.5], [-0.4, 0.1]])
    labels = torch.tensor([1, 0, 1])
    means = f64([[1.0, 1.0], [0.0, -0.5], [9.0, 9.0]])
    covs = torch.stack([torch.eye(2, dtype=torch.float64), f64([[0.5, 0.1], [0.1, 0.8]]),
                        f64([[1.0, 2.0], [2.0, 1.0]])])  # class 2 is not positive definite, but in no image
    by_hand = -sum(multivariate_normal.logpdf(z[i].numpy(), means[c].numpy(), covs[c].numpy())
                   for i, c in enumerate(labels.tolist()))
    assert float(batch_nll(z, labels, means, covs)) == pytest.approx(by_hand, rel=1e-12)
    assert batch_nll(z, torch.tensor([1, 0, 2]), means, covs).isnan()  # only the classes present are decomposed


def test_log_mean_det_and_the_early_stop_by_hand():
    covs = torch.stack([2 * torch.eye(2), torch.eye(2)]).double()  # dets 4 and 1: mean 2.5
    assert log_mean_det(covs) == pytest.approx(math.log(2.5), rel=1e-12)
    assert math.isnan(log_mean_det(f64([[[1.0, 2.0], [2.0, 1.0]]])))
    eye = torch.eye(2, dtype=torch.float64)
    # d_old = 2 > 1, s = 1.5: stop once the mean det passes 3
    stop = covariance_stop(math.log(2.0), 1.5)
    assert stop(math.sqrt(3.1) * eye[None]) and not stop(math.sqrt(2.9) * eye[None])
    # d_old = 0.5 < 1, s = 2: stop once it falls under 0.25
    stop = covariance_stop(math.log(0.5), 2.0)
    assert stop(math.sqrt(0.24) * eye[None]) and not stop(math.sqrt(0.26) * eye[None])
    assert not covariance_stop(math.nan, 2.0)(eye[None]) and not covariance_stop(0.0, 2.0)(0.1 * eye[None])


def test_one_adam_step_moves_every_parameter_by_lr_against_its_gradient_sign():
    """From (0, I) the gradient of −Σ log N is −Σ_i z_i for μ and ½(n·I − Σ_i z_i z_iᵀ) for Σ; Adam's first
    step is −lr·g/(|g| + ε), i.e. lr times the sign of −g."""
    z = f64([[1.0, -2.0], [3.0, 1.0], [-1.0, -0.5]])
    labels = torch.tensor([0, 0, 1])
    lr = 1e-3
    means, covs, losses = fit_gaussians(z, labels, 3, iters=1, lr=lr, batch_size=128, gen=torch.Generator())
    torch.testing.assert_close(means, lr * f64([[1.0, -1.0], [-1.0, -1.0], [0.0, 0.0]]), rtol=1e-6, atol=0)
    g0 = 0.5 * (2 * torch.eye(2, dtype=torch.float64) - z[:2].T @ z[:2])  # [[-4, -0.5], [-0.5, -0.5]]: all < 0
    g1 = 0.5 * (torch.eye(2, dtype=torch.float64) - z[2:].T @ z[2:])  # [[0, -0.25], [-0.25, 0.375]]
    torch.testing.assert_close(covs[0], torch.eye(2, dtype=torch.float64) - lr * torch.sign(g0), rtol=1e-6, atol=0)
    torch.testing.assert_close(covs[1], torch.eye(2, dtype=torch.float64) - lr * torch.sign(g1), rtol=1e-6, atol=0)
    torch.testing.assert_close(covs[2], torch.eye(2, dtype=torch.float64), rtol=0, atol=0)  # no image: no step
    nll = -multivariate_normal.logpdf(z.numpy(), np.zeros(2), np.eye(2)).sum()
    assert losses == [pytest.approx(nll, rel=1e-12)]  # the loss before the step, full batch: scale 1


def test_a_minibatch_loss_is_scaled_by_n_over_b():
    z = torch.ones(10, 2, dtype=torch.float64)  # every image alike: any batch of 4 has the same loss
    _, _, losses = fit_gaussians(z, torch.zeros(10, dtype=torch.long), 1, iters=1, lr=1e-3, batch_size=4,
                                 gen=torch.Generator().manual_seed(0))
    one = -multivariate_normal.logpdf([1.0, 1.0], np.zeros(2), np.eye(2))
    assert losses == [pytest.approx(10 / 4 * 4 * one, rel=1e-12)]


def test_adam_reaches_the_maximum_likelihood_gaussian_given_the_steps():
    gen = torch.Generator().manual_seed(0)
    a = f64([3.0, -2.0]) + torch.randn(200, 2, generator=gen, dtype=torch.float64) @ f64([[1.0, 0.0], [0.5, 0.7]])
    means, covs, _ = fit_gaussians(a, torch.zeros(200, dtype=torch.long), 1, iters=600, lr=5e-3, batch_size=200,
                                   gen=torch.Generator())
    centred = a - a.mean(0)
    torch.testing.assert_close(means[0], a.mean(0), rtol=2e-2, atol=0)
    torch.testing.assert_close(covs[0], centred.T @ centred / 200, rtol=5e-2, atol=0)  # ÷ n: the ML covariance


def test_the_early_stop_keeps_the_parameters_before_the_crossing_step():
    z = torch.randn(50, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.5
    labels = torch.zeros(50, dtype=torch.long)
    free = fit_gaussians(z, labels, 1, iters=30, lr=1e-2, batch_size=50, gen=torch.Generator())
    stopped = fit_gaussians(z, labels, 1, iters=30, lr=1e-2, batch_size=50, gen=torch.Generator(),
                            stop=lambda covs: True)  # always true: it acts at the first step past 30/3
    assert len(free[2]) == 30 and len(stopped[2]) == 11  # steps 0..10 ran; before step 11 it reverted step 10
    short = fit_gaussians(z, labels, 1, iters=10, lr=1e-2, batch_size=50, gen=torch.Generator())
    assert not torch.equal(short[0], free[0])  # the schedule depends on the step alone, so these are equal:
    torch.testing.assert_close(stopped[0], short[0], rtol=0, atol=0)
    torch.testing.assert_close(stopped[1], short[1], rtol=0, atol=0)


def image_by_image_nll(z, labels, means, covs) -> torch.Tensor:
    """The straightforward form: each image's −log N under its class, one image at a time (torch.distributions)."""
    total = z.new_zeros(())
    for i, c in enumerate(labels.tolist()):
        gaussian = torch.distributions.MultivariateNormal(means[c], covariance_matrix=symmetric(covs[c]))
        total = total - gaussian.log_prob(z[i])
    return total


def lopsided(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """9 images in 3 dimensions, classes 2 and 0 (2 twice as often: one padded block is longer), class 1 and 3
    absent; free matrices that are not symmetric, nor the identity."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(9, 3, generator=gen, dtype=torch.float64)
    labels = torch.tensor([2, 0, 2, 2, 0, 2, 0, 2, 2])
    means = 0.3 * torch.randn(4, 3, generator=gen, dtype=torch.float64)
    covs = 1.5 * torch.eye(3, dtype=torch.float64) + 0.2 * torch.randn(4, 3, 3, generator=gen, dtype=torch.float64)
    return z, labels, means, covs


def test_the_closed_form_gradients_are_autograds_through_each_images_likelihood():
    """The vectorised loss and its gradients (every class present at once, no autograd) against autograd through
    the image-by-image form: the same numbers, and exactly zero for the classes without an image."""
    z, labels, means, covs = lopsided()
    m, c = means.clone().requires_grad_(True), covs.clone().requires_grad_(True)
    reference = image_by_image_nll(z, labels, m, c)
    reference.backward()
    loss, grad_means, grad_covs = nll_and_grad(z, labels, means, covs)
    assert float(loss) == pytest.approx(float(reference.detach()), rel=1e-12)
    torch.testing.assert_close(grad_means, m.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad_covs, c.grad, rtol=1e-10, atol=1e-12)
    assert torch.equal(grad_covs, grad_covs.transpose(1, 2))  # a symmetric step keeps a symmetric matrix so
    for absent in (1, 3):
        assert not grad_means[absent].any() and not grad_covs[absent].any()
    assert float(batch_nll(z, labels, means, covs)) == float(loss)


def test_the_fit_is_autograd_and_torch_adam_on_the_image_by_image_loss():
    """`fit_gaussians` (closed-form gradients, Adam by hand on one flat tensor) against the plainest loop:
    torch.optim.Adam over autograd of the image-by-image loss, on the same minibatches and schedule."""
    z, labels, _, _ = lopsided(1)
    n_classes, iters, lr, batch = 4, 40, 2e-3, 5  # Σ moves by ≈ lr a step: it stays positive definite
    means, covs, losses = fit_gaussians(z, labels, n_classes, iters=iters, lr=lr, batch_size=batch,
                                        gen=torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(3)
    m = torch.zeros(n_classes, 3, dtype=torch.float64, requires_grad=True)
    c = torch.eye(3, dtype=torch.float64).repeat(n_classes, 1, 1).requires_grad_(True)
    opt = torch.optim.Adam([m, c], lr=lr, betas=(0.9, 0.999), eps=1e-8)
    expected = []
    for t in range(iters):
        rows = torch.randperm(len(z), generator=gen)[:batch]
        loss = image_by_image_nll(z[rows], labels[rows], m, c) * (len(z) / batch)
        opt.param_groups[0]["lr"] = learning_rate(t, lr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        expected.append(float(loss.detach()))
    assert losses == pytest.approx(expected, rel=1e-10)
    torch.testing.assert_close(means, m.detach(), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(covs, c.detach(), rtol=1e-9, atol=1e-12)
    assert not means[[1, 3]].any() and torch.equal(covs[1], torch.eye(3, dtype=torch.float64))  # never drawn


def test_adam_step_is_torch_adams_arithmetic():
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(6, generator=gen, dtype=torch.float64)
    grads = [torch.randn(6, generator=gen, dtype=torch.float64) for _ in range(5)]
    ours, moments = start.clone(), (torch.zeros(6, dtype=torch.float64), torch.zeros(6, dtype=torch.float64))
    theirs = start.clone().requires_grad_(True)
    opt = torch.optim.Adam([theirs], lr=0.1, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    for t, g in enumerate(grads):
        adam_step(ours, g, moments, t, 0.1 / (t + 1))
        opt.param_groups[0]["lr"] = 0.1 / (t + 1)
        theirs.grad = g.clone()
        opt.step()
        # the same arithmetic to float64 rounding: torch may reorder its kernels between releases and CPUs (the
        # same operations in the same order give the same bits today, which is not what the fit relies on)
        torch.testing.assert_close(ours, theirs.detach(), rtol=1e-13, atol=1e-15)


def test_log_mean_det_of_a_matrix_not_positive_definite_whose_det_is_positive():
    """The early stop's volume reads det Σ whatever Σ's eigenvalues: diag(−1, −2) has det 2 (no Cholesky
    factor, so the log-determinant comes from slogdet there), the identity 1: the mean 1.5."""
    covs = torch.stack([torch.diag(f64([-1.0, -2.0])), torch.eye(2, dtype=torch.float64)])
    assert log_mean_det(covs) == pytest.approx(math.log(1.5), rel=1e-12)
    assert log_mean_det(covs[1:] * 3.0) == pytest.approx(math.log(9.0), rel=1e-12)
    assert math.isnan(log_mean_det(covs[:0]))


def test_pca_axes_are_the_top_principal_directions_with_a_fixed_sign():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 3, generator=gen, dtype=torch.float64) * f64([0.1, 3.0, 1.0]) + f64([5.0, 0.0, -1.0])
    mean, axes = pca_fit(x, 2)
    torch.testing.assert_close(mean, x.mean(0))
    assert axes.shape == (3, 2) and axes[:, 0].abs().argmax() == 1 and axes[:, 1].abs().argmax() == 2
    assert (axes.gather(0, axes.abs().argmax(0, keepdim=True)) > 0).all()
    torch.testing.assert_close(axes.T @ axes, torch.eye(2, dtype=torch.float64))
    assert torch.equal(pca_fit(x, 2)[1], axes)


# -- whole steps --

def mixed(monkeypatch=None, seed: int = 0, **overrides) -> tuple[VBCGCD, list]:
    """The mixed sequence of tests/test_cgcd_baselines.py on features ×SCALE; the rows of each fit."""
    fits: list = []
    if monkeypatch is not None:
        real = vb.fit_gaussians

        def recording(z, labels, n_classes, **kwargs):
            fits.append(len(z))
            return real(z, labels, n_classes, **kwargs)

        monkeypatch.setattr(vb, "fit_gaussians", recording)
    method = make(seed=seed, **overrides)
    x0, y0 = planted({c: 40 for c in range(4)})
    method.learn(step(SCALE * x0, 4, labels=y0))
    x1, _ = planted({0: 10, 1: 10, 2: 10, 3: 10, 4: 40, 5: 40}, seed=1)
    method.learn(step(SCALE * x1, 2, offset=4, index=1))
    return method, fits


def test_a_mixed_sequence_recovers_the_planted_classes_and_keeps_the_known_ones():
    method, _ = mixed()
    x, y = planted({c: 30 for c in range(6)}, seed=2)
    logits = method.logits(SCALE * x)
    assert logits.shape == (180, 6) and logits.dtype == torch.float64
    pred, old = logits.argmax(1), y < 4
    assert (pred[old] == y[old]).float().mean() >= 0.95
    assert (pred[~old] >= 4).float().mean() >= 0.95
    assert hungarian_accuracy(pred[~old].numpy(), y[~old].numpy()) >= 0.95
    torch.testing.assert_close(method.task_logits(SCALE * x, 1), logits[:, 4:])
    assert method.means.shape == (6, 16) and torch.equal(method.covs, method.covs.transpose(1, 2))


def test_round_two_refits_on_the_images_no_known_class_explains_best(monkeypatch):
    _, fits = mixed(monkeypatch)
    assert fits[0] == 160 and fits[1] == 120  # the labelled step; round 1 on the whole step
    assert 80 <= fits[2] < 120  # round 2: the new classes' images, the known ones' filtered out


def test_the_filter_counts_the_untrained_future_class_as_novel_until_the_last_step():
    """A known class N((0, 0), 0.5·I), a new one N((10, 10), I), the future one N(0, I): at (3, 0) the known
    class scores −9 − log 0.5 − log 2π, N(0, I) −4.5 − log 2π, the new class far less."""
    z = f64([[3.0, 0.0], [0.2, 0.1], [9.0, 10.5]])
    eye = torch.eye(2, dtype=torch.float64)
    known, new = (f64([[0.0, 0.0]]), 0.5 * eye[None]), (f64([[10.0, 10.0]]), eye[None])
    assert not_known(z, known, new, future=True).tolist() == [True, False, True]
    assert not_known(z, known, new, future=False).tolist() == [False, False, True]


def test_switching_off_the_early_stop_or_the_corrected_scale_changes_the_new_classes():
    short = dict(svi_iters=300)  # the stop is checked from step 100 on: a third of the code's 1000 steps is enough
    base = mixed(**short)[0].state_dict()
    for switch in (dict(early_stop=False), dict(correct_scaling=False)):
        other = mixed(**short, **switch)[0].state_dict()
        assert torch.equal(other["covs"][:4], base["covs"][:4]), switch  # the labelled step has no stop
        assert not torch.equal(other["covs"][4:], base["covs"][4:]), switch


def test_an_unlabelled_step_never_moves_the_known_classes_and_the_state_round_trips(tmp_path):
    method = make()
    x0, y0 = planted({c: 40 for c in range(4)})
    method.learn(step(SCALE * x0, 4, labels=y0))
    known = {k: v.clone() for k, v in method.state_dict().items() if torch.is_tensor(v)}
    x1, _ = planted({0: 10, 1: 10, 4: 40, 5: 40}, seed=1)
    method.learn(step(SCALE * x1, 2, offset=4, index=1))
    state = method.state_dict()
    assert torch.equal(state["pca_mean"], known["pca_mean"]) and torch.equal(state["pca_axes"], known["pca_axes"])
    assert torch.equal(state["means"][:4], known["means"]) and torch.equal(state["covs"][:4], known["covs"])
    torch.save(state, tmp_path / "state.pt")
    fresh = make()
    fresh.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    x, _ = planted({c: 5 for c in range(6)}, seed=3)
    assert torch.equal(fresh.logits(SCALE * x), method.logits(SCALE * x))
    assert torch.equal(fresh.task_logits(SCALE * x, 1), method.task_logits(SCALE * x, 1))


def test_the_same_seed_gives_the_same_model_and_another_seed_other_draws():
    a, b, c = (mixed(seed=s, batch_size=32, svi_iters=200)[0].state_dict() for s in (0, 0, 1))
    assert all(torch.equal(a[k], b[k]) for k in ("means", "covs"))
    assert not torch.equal(a["means"][4:], c["means"][4:])  # minibatches and clustering come from the seed


def test_class_incd_steps_cluster_without_labels():
    method = make()
    x0, y0 = planted({0: 40, 1: 40, 2: 40})
    method.learn(step(SCALE * x0, 3))
    assert hungarian_accuracy(method.logits(SCALE * x0).argmax(1).numpy(), y0.numpy()) >= 0.95
    x1, y1 = planted({3: 40, 4: 40}, seed=1)
    method.learn(step(SCALE * x1, 2, offset=3, index=1))
    pred = method.logits(SCALE * x1).argmax(1)
    assert (pred >= 3).float().mean() >= 0.95
    assert hungarian_accuracy(method.task_logits(SCALE * x1, 1).argmax(1).numpy(), y1.numpy()) >= 0.95


def test_pca_keeps_at_most_the_images_and_dimensions_it_has():
    method = make(dim=16, pca_dim=384)
    x0, y0 = planted({0: 4, 1: 4})
    method.learn(step(x0, 2, labels=y0))
    assert method.pca_axes.shape == (16, 8) and method.means.shape == (2, 8)


def test_bad_hyper_parameters_are_refused():
    with pytest.raises(ValueError, match="pca_dim >= 1"):
        make(pca_dim=0)


def test_a_mixed_run_end_to_end(tmp_path):
    from bench.protocol.runner import execute
    from tests.helpers import tiny_specs

    (spec,) = tiny_specs(methods=["VB-CGCD"], splits=["happy-5-stage"], **{
        "dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4,
        "method.svi_iters": 50})
    out = execute(spec, tmp_path)
    frame = pd.read_parquet(out / "metrics.parquet")
    summary = frame[frame.group == "summary"].set_index("metric")["value"]
    assert {"All", "Old_hard", "New_hard", "A", "F"} <= set(summary.index) and summary.notna().all()
    assert set(frame.reported_A) == {"cgcd/A"} and frame["step"].max() == 5
    # its fits' losses are kept a value per SVI step (one Adam step), and said so: the run page's axis
    from bench.runs.predictions import LOSS_UNITS, PREDICTIONS, Keys, each, opened

    with opened(out / PREDICTIONS) as stored:
        losses, units = each(stored, Keys.epoch_loss), each(stored, Keys.loss_unit)
        assert losses and set(units) == set(losses) and {LOSS_UNITS[int(u)] for u in units.values()} == {"SVI step"}

"""VB-CGCD: a full-covariance Gaussian per class on PCA-reduced frozen features, fitted by minibatch Adam on
its likelihood; new classes from a Gaussian-mixture clustering, filtered and refitted, with a covariance-volume
early stop (docs/methods.md#vb-cgcd).

Dai & Chauhan, "Continual Generalized Category Discovery: Learning and Forgetting from a Bayesian Perspective",
ICML'25; ported from the authors' code (github daihao42/VB-CGCD: `main.py`, `classifier/mngmm.py`,
`clustering/gmm.py`), which runs numpyro's SVI. Its guide is empty and its model has no latent site, only
`numpyro.param`s and an observed site, so its ELBO is the (minibatch-scaled) log-likelihood and SVI is
maximum likelihood by Adam: the port runs Adam (torch.optim.Adam's arithmetic) on the same objective with the
same schedule, steps and early stop, its gradients in closed form over every class at once (`nll_and_grad`: what
autograd gives, 4-5x faster a step on the demo's 64 dimensions). The fit is not closed-form: the code stops far from the maximum (Adam moves a parameter by
about the learning rate a step, Σ_t lr_t ≈ 0.037 over the code's 1000 steps), so the trajectory is the method.

On features x, with P the PCA fitted on the first step (z = Pᵀ(x − x̄), `pca_dim` components), classes
c ∈ C_s being fitted from their start (μ_c, A_c), y_i the class of image i, Σ_c = (A_c + A_cᵀ)/2 (A_c is a
free D×D matrix, as the code's `class_covs` param; the Cholesky factor reads its symmetric part):

    loss(θ) = −(N/B) Σ_{i ∈ batch} log N(z_i; μ_{y_i}, Σ_{y_i}),   a batch of B = `batch_size` of the N
        images drawn without replacement at every step (all N when B ≥ N)
    `svi_iters` Adam steps (β = 0.9, 0.999, ε = 1e-8) at
        lr_t = lr·(1 + 9·t/100) for t < 100, then 10·lr·0.85^((t − 100)/500)
    early stop, checked before step t once t > `svi_iters`/3 and t ≥ 1, against d_old = the mean det of a
        fixed set of stored covariances and d_new(t) = the mean det of the covariances being fitted:
        stop (keeping the parameters before the last step) when
        d_old > 1 and d_new > s·d_old, or d_old < 1 and d_new < d_old/s
    a step whose loss is not finite stops the fit (a covariance no longer positive definite)
    the labelled step (step.labels, classes 0..C−1): P fitted; every class from (0, I) on its labels; no stop
    an unlabelled step (C new classes after `offset` known ones, of which the first step's are `base`):
        k_i <- a C-component full-covariance Gaussian mixture (EM) on the raw x_i     # clustering/gmm.py
        round 1: the new classes from (0, I) on every image, labelled offset + k_i;
                 d_old over the first step's classes, s = (offset + C)/base
        keep the images whose most likely class is new: argmax over the known classes (as stored), the
                 round-1 classes, and N(0, I) before the last step (the code's untrained future classes)
        round 2: the new classes again from (0, I), on the kept images with the same labels;
                 d_old over all known classes, s = sqrt(C/(offset + C)) (`correct_scaling`; else round 1's)
        the known classes never change
    logits(x) = log N(z(x); μ_c, Σ_c) over every class so far; task_logits(x, t): the classes of step t

Departures from the code (docs/methods.md#vb-cgcd): the backbone is the run's frozen one (the code
BOFT-fine-tunes DINO on the labelled classes first); the code aligns each cluster to a class with the
Hungarian algorithm on the TRUE labels of the step's images before fitting, which no method may do here (bench
scores the new classes under its own Hungarian map), so cluster k is class offset + k; its clustering and
minibatches are unseeded or fixed (sklearn random_state None; numpyro key 0), here drawn from the run seed and
the step, so a run is deterministic given its seed; dets are compared as log-means (the same comparisons,
free of float32 over- and underflow); PCA keeps min(`pca_dim`, images, D) components; arithmetic is float64
(the code's JAX default is float32); stored parameters are float32. In class-iNCD (no labelled step) the first
step is clustered and fitted as round 1 without known classes.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from sklearn.mixture import GaussianMixture

from bench.core.numerics import sklearn_seed
from bench.methods.base import Method, RunsOn, Step
from bench.methods.ncm_kmeans import check_labels
from bench.protocol.step import record_epochs
from bench.registries import METHODS

# the code's learning-rate schedule (classifier/mngmm.py, run_inference): a linear warm-up from lr to
# 10·lr over 100 steps, then an exponential decay by 0.85 every 500 steps (optax, not staircase)
WARMUP_STEPS, WARMUP_FACTOR, DECAY_STEPS, DECAY_RATE = 100, 10.0, 500, 0.85
STOP_AFTER = 1 / 3  # the early stop may act only once the step count passes this share of svi_iters


def learning_rate(t: int, lr: float) -> float:
    """The learning rate of Adam step t (0-based)."""
    if t < WARMUP_STEPS:
        return lr + (WARMUP_FACTOR - 1) * lr * t / WARMUP_STEPS
    return WARMUP_FACTOR * lr * DECAY_RATE ** ((t - WARMUP_STEPS) / DECAY_STEPS)


def symmetric(a: torch.Tensor) -> torch.Tensor:
    """(A + Aᵀ)/2: the covariance a free matrix stands for (JAX's Cholesky symmetrises its input)."""
    return (a + a.transpose(-1, -2)) / 2


def gaussian_log_likelihood(z: torch.Tensor, means: torch.Tensor, covs: torch.Tensor) -> torch.Tensor:
    """N × K: log N(z_i; μ_k, Σ_k), Σ_k the symmetric part of covs[k] (NaN for one not positive definite)."""
    out = z.new_empty(len(z), len(means))
    chols, info = torch.linalg.cholesky_ex(symmetric(covs))
    constant = 0.5 * z.shape[1] * math.log(2 * math.pi)
    for k in range(len(means)):
        if info[k]:
            out[:, k] = math.nan
            continue
        y = torch.linalg.solve_triangular(chols[k], (z - means[k]).T, upper=False)
        out[:, k] = -0.5 * y.square().sum(0) - chols[k].diagonal().log().sum() - constant
    return out


def log_mean_det(covs: torch.Tensor) -> float:
    """log((1/K) Σ_k det Σ_k), or NaN where a det Σ_k is not positive (no volume to compare)."""
    if len(covs) == 0:
        return math.nan
    sym = symmetric(covs)
    # log det Σ = 2 Σ log diag L for a positive definite Σ = LLᵀ (the early stop asks at every step, and a
    # Cholesky factor costs half of slogdet's LU); slogdet only for one that is not, whose det may still be > 0
    chols, info = torch.linalg.cholesky_ex(sym)
    if not bool(info.any()):
        logabs = 2 * chols.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    else:
        sign, logabs = torch.linalg.slogdet(sym)
        if bool((sign <= 0).any()):
            return math.nan
    return float(torch.logsumexp(logabs, 0)) - math.log(len(covs))


def covariance_stop(log_old: float, scale: float) -> Callable[[torch.Tensor], bool]:
    """The code's early-stop test on the covariances being fitted: their mean det has passed the stored
    classes' (d_old) by the factor s, upwards when d_old > 1, downwards when d_old < 1."""
    def stop(covs: torch.Tensor) -> bool:
        log_new = log_mean_det(covs)
        if math.isnan(log_old) or math.isnan(log_new):
            return False
        return (log_old > 0 and log_new > math.log(scale) + log_old) or\
               (log_old < 0 and log_new < log_old - math.log(scale))
    return stop


def _grouped(z: torch.Tensor, labels: torch.Tensor, means: torch.Tensor,
             present: torch.Tensor, inverse: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """C × m × D: row j of block c is r = z_i − μ_c for the j-th image i of the c-th class present, zero past
    its n_c images (m the largest n_c), so that every class is one slice of a batched product."""
    block, order = torch.sort(inverse, stable=True)
    slot = torch.arange(len(labels), device=z.device) - (counts.cumsum(0) - counts)[block]
    grouped = z.new_zeros(len(present), int(counts.max()), z.shape[1])
    grouped[block, slot] = (z - means[labels])[order]
    return grouped


def nll_and_grad(z: torch.Tensor, labels: torch.Tensor, means: torch.Tensor,
                 covs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """−Σ_i log N(z_i; μ_{y_i}, Σ_{y_i}) and its gradients in μ and in the free matrices A (Σ = (A + Aᵀ)/2),
    in closed form and over every class present at once. With r_i = z_i − μ_c, P_c = Σ_c⁻¹ and S_c = Σ_i r_i r_iᵀ
    over the n_c images of class c:

        loss = Σ_c [½ tr(P_c S_c) + n_c log|L_c|] + N·D/2·log 2π   (L_c the Cholesky factor of Σ_c)
        ∂/∂μ_c = −P_c Σ_i r_i        ∂/∂A_c = ½(n_c P_c − P_c S_c P_c)   (symmetric: A's gradient too)

    what autograd computes through the Cholesky factor, without its graph (most of a step's time went to it).
    A class without an image gets a zero gradient; only the classes present are decomposed, as in the code, and
    one of them not positive definite makes the loss NaN (its gradients are then zero: no step is taken on them).
    """
    present, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    chols, info = torch.linalg.cholesky_ex(symmetric(covs[present]))
    grad_means, grad_covs = torch.zeros_like(means), torch.zeros_like(covs)
    if bool(info.any()):
        return z.new_tensor(math.nan), grad_means, grad_covs
    residuals = _grouped(z, labels, means, present, inverse, counts)
    precisions = torch.cholesky_inverse(chols)
    whitened = residuals @ precisions  # rows P_c r_i (P_c is symmetric)
    n = counts.to(z.dtype)
    half_log_dets = chols.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    loss = 0.5 * (residuals * whitened).sum() + (n * half_log_dets).sum() + len(z) * 0.5 * z.shape[1] * math.log(2 * math.pi)
    grad_means[present] = -whitened.sum(1)
    grad_covs[present] = symmetric(0.5 * (n[:, None, None] * precisions - whitened.transpose(1, 2) @ whitened))
    return loss, grad_means, grad_covs


def batch_nll(z: torch.Tensor, labels: torch.Tensor, means: torch.Tensor, covs: torch.Tensor) -> torch.Tensor:
    """−Σ_i log N(z_i; μ_{y_i}, Σ_{y_i}); only the classes present are decomposed, as in the code (NaN if one
    of them is not positive definite)."""
    return nll_and_grad(z, labels, means, covs)[0]


# Adam's defaults in optax, which the code runs: β₁, β₂, ε
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def adam_step(params: torch.Tensor, grad: torch.Tensor, moments: tuple[torch.Tensor, torch.Tensor], t: int,
              lr: float) -> None:
    """Adam step t (0-based) on `params` in place, in torch.optim.Adam's arithmetic (its single-tensor form:
    the same operations in the same order), on one flat tensor: a step of the optimiser object cost more than
    the step's arithmetic."""
    first, second = moments
    first.lerp_(grad, 1 - BETA1)
    second.mul_(BETA2).addcmul_(grad, grad, value=1 - BETA2)
    correction1, correction2 = 1 - BETA1 ** float(t + 1), 1 - BETA2 ** float(t + 1)
    params.addcdiv_(first, (second.sqrt() / correction2 ** 0.5).add_(EPS), value=-lr / correction1)


def fit_gaussians(z: torch.Tensor, labels: torch.Tensor, n_classes: int, *, iters: int, lr: float,
                  batch_size: int, gen: torch.Generator,
                  stop: Callable[[torch.Tensor], bool] | None = None) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """Means and covariance matrices of classes 0..n_classes−1 from (0, I) by `iters` Adam steps on
    −(N/B)·Σ_batch log N(z_i; μ_{y_i}, Σ_{y_i}) (`labels` in 0..n_classes−1), and the loss of each step.
    A class without an image stays at (0, I): its gradient is zero, and so is Adam's step."""
    n, d = z.shape
    params = torch.cat([z.new_zeros(n_classes * d), torch.eye(d, dtype=z.dtype, device=z.device).repeat(n_classes, 1, 1).flatten()])
    means, covs = params[:n_classes * d].view(n_classes, d), params[n_classes * d:].view(n_classes, d, d)
    moments = (torch.zeros_like(params), torch.zeros_like(params))
    batch = min(batch_size, n)
    previous, losses = None, []
    for t in range(iters):
        if stop is not None and previous is not None and t > STOP_AFTER * iters and stop(covs):
            params.copy_(previous)  # the parameters before the step that crossed the line
            break
        previous = params.clone()
        rows = torch.randperm(n, generator=gen)[:batch].to(z.device) if batch < n else torch.arange(n, device=z.device)
        loss, grad_means, grad_covs = nll_and_grad(z[rows], labels[rows], means, covs)
        if not torch.isfinite(loss):
            break  # the code keeps the parameters whose loss was NaN and stops
        scale = n / batch  # the plate's subsample scale
        adam_step(params, torch.cat([grad_means.flatten(), grad_covs.flatten()]) * scale, moments, t, learning_rate(t, lr))
        losses.append(float(loss * scale))
    return means.clone(), covs.clone(), losses


def not_known(z: torch.Tensor, known: tuple[torch.Tensor, torch.Tensor], new: tuple[torch.Tensor, torch.Tensor],
              future: bool) -> torch.Tensor:
    """The images whose most likely class is not a known one: a new class, or, while classes are still to come
    (`future`), N(0, I), which the code's untrained future classes still are and which it counts as novel."""
    scored = [gaussian_log_likelihood(z, *known), gaussian_log_likelihood(z, *new)]
    if future:
        eye = torch.eye(z.shape[1], dtype=z.dtype, device=z.device)
        scored.append(gaussian_log_likelihood(z, z.new_zeros(1, z.shape[1]), eye[None]))
    return torch.cat(scored, 1).argmax(1) >= len(known[0])


def pca_fit(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean and the top `dim` principal axes (D × dim, each signed so that its largest entry in
    absolute value is positive) of the rows of x, from the eigenvectors of their covariance."""
    mean = x.mean(0)
    centred = x - mean
    values, vectors = torch.linalg.eigh(centred.T @ centred)
    axes = vectors[:, values.argsort(descending=True)[:dim]]
    signs = torch.sign(axes.gather(0, axes.abs().argmax(0, keepdim=True)))
    return mean, axes * signs


def cluster(x: torch.Tensor, k: int, hparams: dict[str, Any], seed: int) -> torch.Tensor:
    """The code's clustering (clustering/gmm.py): scikit-learn's full-covariance Gaussian mixture of k
    components on the raw features, k-means initialised, here seeded; the component of each image."""
    gmm = GaussianMixture(n_components=k, covariance_type="full", max_iter=hparams["gmm_max_iter"],
                          n_init=hparams["gmm_n_init"], reg_covar=hparams["gmm_reg_covar"], random_state=sklearn_seed(seed))
    return torch.as_tensor(gmm.fit_predict(x.double().cpu().numpy()), dtype=torch.long)


@METHODS.register_module(name="VB-CGCD")
class VBCGCD(Method):
    preset_file = "vb_cgcd"
    # the PCA is fitted on the first step only and the known classes never change
    runs_on = RunsOn(trains_on_views=False, settings=("incd", "mixed"), frozen_task_heads=True)

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        if hparams["pca_dim"] < 1 or hparams["gmm_n_init"] < 1 or hparams["gmm_reg_covar"] < 0:
            raise ValueError("VB-CGCD needs pca_dim >= 1, gmm_n_init >= 1 and gmm_reg_covar >= 0")
        self.pca_mean = torch.empty(0)  # x̄ (D), fitted on the first step; float32
        self.pca_axes = torch.empty(0, 0)  # P (D × d)
        self.means = torch.empty(0, 0)  # one row per class so far (float32, CPU)
        self.covs = torch.empty(0, 0, 0)  # Σ_c, symmetric (float32, CPU)
        self.task_sizes: list[int] = []
        self._moved: tuple[torch.device, tuple[torch.Tensor, ...]] | None = None

    def _on(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(x̄, P, μ, Σ) in float64 on `device`, moved once per device."""
        if self._moved is None or self._moved[0] != device:
            tensors = (self.pca_mean, self.pca_axes, self.means, self.covs)
            self._moved = (device, tuple(t.to(device, torch.float64) for t in tensors))
        return self._moved[1]

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """z = Pᵀ(x − x̄) in float64."""
        mean, axes, _, _ = self._on(x.device)
        return (x.double() - mean) @ axes

    def _fit(self, z: torch.Tensor, labels: torch.Tensor, n_classes: int, step: Step, round_: int,
             stop: Callable[[torch.Tensor], bool] | None) -> tuple[torch.Tensor, torch.Tensor]:
        hp = self.hparams
        gen = torch.Generator().manual_seed(self.seed * 1000 + 2 * step.index + round_)
        means, covs, losses = fit_gaussians(z, labels, n_classes, iters=hp["svi_iters"], lr=hp["lr"],
                                            batch_size=hp["batch_size"], gen=gen, stop=stop)
        record_epochs(losses, unit="SVI step")  # one value per Adam step of the fit, not per epoch
        return means, covs

    def _stop(self, log_old: float, scale: float) -> Callable[[torch.Tensor], bool] | None:
        return covariance_stop(log_old, scale) if self.hparams["early_stop"] else None

    def _unlabelled(self, x: torch.Tensor, z: torch.Tensor, step: Step) -> tuple[torch.Tensor, torch.Tensor]:
        known, k = step.offset, step.n_classes
        pseudo = cluster(x, k, self.hparams, self.seed * 1000 + step.index).to(z.device)
        if known == 0:  # class-iNCD's first step: nothing known to filter against or to compare with
            return self._fit(z, pseudo, k, step, 0, None)
        _, _, old_means, old_covs = self._on(z.device)
        base = self.task_sizes[0]
        means, covs = self._fit(z, pseudo, k, step, 0, self._stop(log_mean_det(old_covs[:base]), (known + k) / base))
        kept = not_known(z, (old_means, old_covs), (means, covs), future=not step.last)
        scale = math.sqrt(k / (known + k)) if self.hparams["correct_scaling"] else (known + k) / base
        log_old = log_mean_det(old_covs) if self.hparams["correct_scaling"] else log_mean_det(old_covs[:base])
        if not kept.any():  # nothing to refit on: round 2 would leave every new class at its start
            eye = torch.eye(z.shape[1], dtype=z.dtype, device=z.device)
            return z.new_zeros(k, z.shape[1]), eye.repeat(k, 1, 1)
        return self._fit(z[kept], pseudo[kept], k, step, 1, self._stop(log_old, scale))

    def learn(self, step: Step) -> None:
        if step.offset != len(self.means):
            raise ValueError(f"step {step.index} starts at class {step.offset}, but {len(self.means)} are known")
        x = step.features.plain.double()
        if not self.task_sizes:  # the first step fits the PCA (the code: the labelled step's features)
            dim = min(self.hparams["pca_dim"], x.shape[0], x.shape[1])
            self.pca_mean, self.pca_axes = (t.float().cpu() for t in pca_fit(x, dim))
            self._moved = None
        z = self.reduce(x.to(step.device))
        if step.labels is not None:
            if step.offset:
                raise ValueError("a labelled step must be the first: its labels are the classes 0..n_classes-1")
            labels = check_labels(step.labels, step.n_classes).to(z.device)
            means, covs = self._fit(z, labels, step.n_classes, step, 0, None)
        else:
            means, covs = self._unlabelled(x, z, step)
        d = z.shape[1]
        self.means = torch.cat([self.means.reshape(-1, d), means.float().cpu()])
        self.covs = torch.cat([self.covs.reshape(-1, d, d), symmetric(covs).float().cpu()])
        self.task_sizes.append(step.n_classes)
        self._moved = None

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        _, _, means, covs = self._on(x.device)
        return gaussian_log_likelihood(self.reduce(x), means, covs)

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        start = sum(self.task_sizes[:task])
        classes = slice(start, start + self.task_sizes[task])
        _, _, means, covs = self._on(x.device)
        return gaussian_log_likelihood(self.reduce(x), means[classes], covs[classes])

    def state_dict(self) -> dict[str, Any]:
        return {"pca_mean": self.pca_mean.clone(), "pca_axes": self.pca_axes.clone(), "means": self.means.clone(),
                "covs": self.covs.clone(), "task_sizes": list(self.task_sizes)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pca_mean, self.pca_axes = state["pca_mean"].float().cpu(), state["pca_axes"].float().cpu()
        self.means, self.covs = state["means"].float().cpu(), state["covs"].float().cpu()
        self.task_sizes = [int(n) for n in state["task_sizes"]]
        self._moved = None

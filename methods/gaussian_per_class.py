"""Gaussian per class: every class a Gaussian on frozen features, new classes by anchored k-means and EM
(docs/methods.md#gaussian-per-class).

After VB-CGCD (Dai & Chauhan, "Continual Generalized Category Discovery: Learning and Forgetting from a
Bayesian Perspective", ICML'25): classes are Gaussians with their own covariances, an image goes to
the class under which it is most likely (a covariance-aware nearest class mean), and an unlabelled
step clusters its images, then re-estimates the new classes' Gaussians while the known classes'
stay as stored. Unlike VB-CGCD the backbone stays frozen (no fine-tuning on the labelled step), the
Gaussians are fitted by plain EM instead of (stochastic) variational inference, and everything is
deterministic given the seed. Not a method of the paper's tables.

On L2-normalised plain features z (`normalize`), in float64, with D the feature dimension:

    the shrunk covariance of a class with (responsibility-weighted) sample covariance S (÷ n) and
    n images' weight, α = `shrinkage`, σ²_min = `min_variance`:
        Σ(S, n) = (1 − α)·S + α·max(tr(S)/D, σ²_min)·I;  α = 1 when n < 2 (one image: σ²_min·I)
    a labelled step (step.labels given, the first step of the `mixed` setting):
        μ_c, S_c <- mean and covariance of the images labelled c;  Σ_c = Σ(S_c, n_c)
    an unlabelled step (every other step, every step of class-iNCD), C new classes after `offset`
    known ones:
        clusters <- anchored k-means(z, fixed = μ_0..μ_{offset-1}, k = C)   # methods/anchored_kmeans.py
        r <- the clusters, one-hot (N × (offset + C))                    # first responsibilities
        M-step(r): for each NEW class c: n_c = Σ_i r_ic, μ_c = Σ_i r_ic z_i / n_c,
                   S_c = Σ_i r_ic (z_i − μ_c)(z_i − μ_c)ᵀ / n_c, Σ_c = Σ(S_c, n_c);
                   π_c = n_c / N for EVERY class (how much of the step each holds: known classes too)
        repeat `em_iters` times:
            E-step: r_ic ∝ π_c N(z_i; μ_c, Σ_c) over all offset + C classes, the known ones fixed
            M-step(r)
    logits(x) = log N(z(x); μ_c, Σ_c) for every class so far (no prior π: it is the step's mix);
    task_logits(x, t): the classes of step t only.

A new class whose responsibilities all vanish (n_c < 1e-8) keeps its previous Gaussian. The Gaussians
are kept as means and lower Cholesky factors L_c (Σ_c = L_c L_cᵀ) in float32, half the size of a
checkpoint (D² numbers a class); log-likelihoods are computed from them in float64.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from bench.methods.anchored_kmeans import anchored_kmeans
from bench.methods.base import Method, RunsOn, Step, built
from bench.methods.ncm_kmeans import check_labels
from bench.registries import METHODS

EMPTY = 1e-8  # a new class with less responsibility than this keeps its Gaussian in the M-step


def shrunk_covariance(s: torch.Tensor, n: float, shrinkage: float, min_variance: float) -> torch.Tensor:
    """Σ = (1 − α)·S + α·max(tr(S)/D, σ²_min)·I, with α = 1 for a class of fewer than two images."""
    d = s.shape[0]
    alpha = 1.0 if n < 2 else shrinkage
    variance = max(float(torch.trace(s)) / d, min_variance)
    return (1 - alpha) * s + alpha * variance * torch.eye(d, dtype=s.dtype, device=s.device)


def fit_gaussian(z: torch.Tensor, weights: torch.Tensor, shrinkage: float,
                 min_variance: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The weighted mean of the rows of `z` and the lower Cholesky factor of their shrunk covariance."""
    n = float(weights.sum())
    mean = weights @ z / n
    centred = z - mean
    s = (centred * weights[:, None]).T @ centred / n
    return mean, torch.linalg.cholesky(shrunk_covariance(s, n, shrinkage, min_variance))


def gaussian_log_likelihood(z: torch.Tensor, means: torch.Tensor, chols: torch.Tensor) -> torch.Tensor:
    """N × K: log N(z_i; μ_k, L_k L_kᵀ) = −½‖L_k⁻¹(z_i − μ_k)‖² − Σ_j log L_k[j, j] − (D/2)·log 2π, in float64."""
    z = z.double()
    out = z.new_empty(len(z), len(means))
    constant = 0.5 * z.shape[1] * math.log(2 * math.pi)
    for k in range(len(means)):
        chol = chols[k].to(z)
        y = torch.linalg.solve_triangular(chol, (z - means[k].to(z)).T, upper=False)
        out[:, k] = -0.5 * y.square().sum(0) - chol.diagonal().log().sum() - constant
    return out


@METHODS.register_module(name="Gaussian per class")
class GaussianPerClass(Method):
    preset_file = "gaussian_per_class"
    # EM re-estimates the new classes only; the known Gaussians stay as stored
    runs_on = RunsOn(trains_on_views=False, settings=("incd", "mixed"), frozen_task_heads=True)

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        if not 0 < hparams["shrinkage"] <= 1 or not hparams["min_variance"] > 0:
            raise ValueError("Gaussian per class needs 0 < shrinkage <= 1 and min_variance > 0 (a covariance "
                             "that can be singular has no log-likelihood)")
        self.means = torch.empty(0, feature_dim)  # one row per class so far (float32, CPU)
        self.chols = torch.empty(0, feature_dim, feature_dim)  # Σ_c = L_c L_cᵀ (float32, CPU)
        self.task_sizes: list[int] = []  # the class count of each step
        self._moved: tuple[torch.device, torch.Tensor, torch.Tensor] | None = None  # both on a device

    def _on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The means and factors on `device`, moved once per device (not once per batch)."""
        if self._moved is None or self._moved[0] != device:
            self._moved = (device, self.means.to(device), self.chols.to(device))
        return self._moved[1], self._moved[2]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return F.normalize(x, dim=1) if self.hparams["normalize"] else x

    def _fit(self, z: torch.Tensor, resp: torch.Tensor, means: torch.Tensor,
             chols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """M-step for the classes of the columns of `resp` (N × C); a class without weight keeps the
        Gaussian it had (`means`, `chols`)."""
        hp = self.hparams
        means, chols = means.clone(), chols.clone()
        for c in range(resp.shape[1]):
            if resp[:, c].sum() >= EMPTY:
                means[c], chols[c] = fit_gaussian(z, resp[:, c], hp["shrinkage"], hp["min_variance"])
        return means, chols

    def _labelled(self, z: torch.Tensor, step: Step) -> tuple[torch.Tensor, torch.Tensor]:
        if step.offset:
            raise ValueError("a labelled step must be the first: its labels are the classes 0..n_classes-1")
        resp = F.one_hot(check_labels(built(step.labels, "a labelled step's labels"), step.n_classes).to(z.device), step.n_classes).to(z.dtype)
        empty = z.new_zeros(step.n_classes, z.shape[1]), z.new_zeros(step.n_classes, z.shape[1], z.shape[1])
        return self._fit(z, resp, *empty)

    def _unlabelled(self, z: torch.Tensor, step: Step) -> tuple[torch.Tensor, torch.Tensor]:
        hp, known, k = self.hparams, step.offset, step.n_classes
        gen = torch.Generator().manual_seed(self.seed * 1000 + step.index)
        clusters = anchored_kmeans(z, self.means, k, max_iter=hp["max_iter"], n_init=hp["n_init"], gen=gen)
        resp = F.one_hot(clusters.labels, known + k).to(z.dtype)  # the clusters as responsibilities
        # the new classes from their clusters; one without a point: its centroid, the floor covariance
        floor = math.sqrt(hp["min_variance"]) * torch.eye(z.shape[1], dtype=z.dtype, device=z.device)
        means, chols = self._fit(z, resp[:, known:], clusters.centroids, floor.expand(k, -1, -1))
        known_loglik = gaussian_log_likelihood(z, *self._on(z.device))
        for _ in range(hp["em_iters"]):
            log_weights = torch.log(resp.sum(0) / len(z))  # π_c, every class (log 0 = −inf: no share)
            log_joint = torch.cat([known_loglik, gaussian_log_likelihood(z, means, chols)], 1) + log_weights
            resp = torch.softmax(log_joint, 1)  # E-step
            means, chols = self._fit(z, resp[:, known:], means, chols)  # M-step, new classes only
        return means, chols

    def learn(self, step: Step) -> None:
        if step.offset != len(self.means):
            raise ValueError(f"step {step.index} starts at class {step.offset}, but {len(self.means)} are known")
        z = self.features(step.features.plain)
        means, chols = self._labelled(z, step) if step.labels is not None else self._unlabelled(z, step)
        self.means = torch.cat([self.means, means.float().cpu()])
        self.chols = torch.cat([self.chols, chols.float().cpu()])
        self.task_sizes.append(step.n_classes)
        self._moved = None

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return gaussian_log_likelihood(self.features(x), *self._on(x.device))

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        start = sum(self.task_sizes[:task])
        classes = slice(start, start + self.task_sizes[task])
        means, chols = self._on(x.device)
        return gaussian_log_likelihood(self.features(x), means[classes], chols[classes])

    def state_dict(self) -> dict[str, Any]:
        return {"means": self.means.clone(), "chols": self.chols.clone(), "task_sizes": list(self.task_sizes)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.means = state["means"].float().cpu()
        self.chols = state["chols"].float().cpu()
        self.task_sizes = [int(n) for n in state["task_sizes"]]
        self._moved = None

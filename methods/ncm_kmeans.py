"""NCM + k-means: nearest class mean on frozen features, new classes found by anchored k-means
(docs/methods.md#ncm--k-means).

A training-free baseline for continual generalized category discovery, not a method of the paper's
tables: the nearest-class-mean classifier that VB-CGCD (Dai & Chauhan, ICML'25) makes covariance-aware
(here plain Euclidean; the covariance-aware form is methods/gaussian_per_class.py), with each unlabelled
step's new classes found by k-means around the known classes, as GCD's semi-supervised k-means (Vaze et
al., CVPR'22) clusters around labelled ones; no label is left after the first step, so the known
classes' centroids are held fixed.

One prototype per class, on L2-normalised plain features (`normalize`), per step:

    z <- the step's plain features, L2-normalised
    a labelled step (step.labels given, the first step of the `mixed` setting):
        μ_c <- mean of z over the images labelled c, for c = 0..C-1     # nearest class mean
    an unlabelled step (every other step, every step of class-iNCD):
        μ_new <- anchored k-means(z, fixed = μ_0..μ_{offset-1}, k = C)  # methods/anchored_kmeans.py
                 (the known prototypes never move; k-means++ seeds, Lloyd, best of `n_init` by inertia)
        the new classes' prototypes: μ_new, output ids offset..offset+C-1
    logits(x) = −‖z(x) − μ_c‖² over every class so far; task_logits(x, t): the classes of step t only.

With offset 0 (the first step of class-iNCD) the anchored k-means is plain k-means. Nothing but the
prototypes (and each step's class count) is kept between steps.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bench.methods.anchored_kmeans import anchored_kmeans, squared_distances
from bench.methods.base import Method, RunsOn, Step
from bench.registries import METHODS


def check_labels(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """A labelled step's labels, refused unless each of its n_classes classes has an image."""
    labels = labels.long()
    if len(labels) and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"a labelled step's labels must lie in 0..{n_classes - 1}")
    missing = torch.nonzero(torch.bincount(labels.cpu(), minlength=n_classes) == 0).flatten().tolist()
    if missing:
        raise ValueError(f"the labelled step holds no image of class(es) {missing}: no prototype to compute")
    return labels


def class_means(z: torch.Tensor, labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """n_classes × D: the mean of the rows of `z` of each class."""
    labels = check_labels(labels, n_classes).to(z.device)
    sums = torch.zeros(n_classes, z.shape[1], dtype=z.dtype, device=z.device).index_add_(0, labels, z)
    return sums / torch.bincount(labels, minlength=n_classes).to(z.dtype)[:, None]


@METHODS.register_module(name="NCM + k-means")
class NCMKMeans(Method):
    preset_file = "ncm_kmeans"
    # the known prototypes are held fixed (anchored k-means), so a step's classes answer as at their step
    runs_on = RunsOn(trains_on_views=False, settings=("incd", "mixed"), frozen_task_heads=True)

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.prototypes = torch.empty(0, feature_dim)  # one row per class so far (float32, CPU)
        self.task_sizes: list[int] = []  # the class count of each step

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return F.normalize(x, dim=1) if self.hparams["normalize"] else x

    def learn(self, step: Step) -> None:
        if step.offset != len(self.prototypes):
            raise ValueError(f"step {step.index} starts at class {step.offset}, but {len(self.prototypes)} are known")
        z = self.features(step.features.plain)
        if step.labels is not None:  # the labelled step: nearest class mean
            if step.offset:
                raise ValueError("a labelled step must be the first: its labels are the classes 0..n_classes-1")
            new = class_means(z, step.labels, step.n_classes)
        else:  # an unlabelled step: k-means around the known prototypes
            gen = torch.Generator().manual_seed(self.seed * 1000 + step.index)
            new = anchored_kmeans(z, self.prototypes, step.n_classes, max_iter=self.hparams["max_iter"],
                                  n_init=self.hparams["n_init"], gen=gen).centroids
        self.prototypes = torch.cat([self.prototypes, new.float().cpu()])
        self.task_sizes.append(step.n_classes)

    def _neg_distance(self, x: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
        z = self.features(x)
        return -squared_distances(z, prototypes.to(device=z.device, dtype=z.dtype)).float()

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self._neg_distance(x, self.prototypes)

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        start = sum(self.task_sizes[:task])
        return self._neg_distance(x, self.prototypes[start:start + self.task_sizes[task]])

    def state_dict(self) -> dict[str, Any]:
        return {"prototypes": self.prototypes.clone(), "task_sizes": list(self.task_sizes)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.prototypes = state["prototypes"].float().cpu()
        self.task_sizes = [int(n) for n in state["task_sizes"]]

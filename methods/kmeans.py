"""K-means reference ("pseudo lower bound", docs/methods.md#k-means).

On L2-normalised frozen plain features, at step t: a single k-means on D^t with C_t clusters (the
task-specific "head") and a joint k-means on D^1..D^t with Σ C clusters (the unified "head"). It is a
reference method and sees earlier steps' data. In the mixed setting the labelled step's own "head"
is its classes' mean features; the joint k-means never reads a label. Logits are negative squared distances to centroids.
Its joint cluster ids are unrelated to the per-task mappings, so its A is reported with one
Hungarian match over all seen classes, sample-weighted (the authors' `Acc_all_W_cluster`), and its F
task-agnostically like every other method: single-task k-means accuracy minus a near-chance W/O
accuracy, which is what the paper's K-means F (62-99) measures (docs/methods.md#a-and-f).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bench.core.numerics import sklearn_seed
from bench.methods.base import Method, RunsOn, Step
from bench.registries import METHODS


@METHODS.register_module(name="K-means")
class KMeansReference(Method):
    preset_file = "kmeans"
    # a reference on plain features only; a later step re-fits the joint centroids, never a task's own
    runs_on = RunsOn(sees_past_steps=True, trains_on_views=False, settings=("incd", "mixed"), frozen_task_heads=True)
    reported = {"A": ("w", "A_sample"), "F": ("wo", "F")}
    hparam_choices = {"init": ("k-means++", "random")}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.task_centroids: list[torch.Tensor] = []
        self.joint_centroids: torch.Tensor | None = None

    def _fit(self, x: torch.Tensor, k: int, step: int) -> torch.Tensor:
        from sklearn.cluster import KMeans

        hp = self.hparams
        km = KMeans(n_clusters=k, init=hp["init"], n_init=hp["n_init"], max_iter=hp["max_iter"],
                    algorithm="lloyd", random_state=sklearn_seed(self.seed * 1000 + step))
        km.fit(F.normalize(x.float(), dim=1).cpu().numpy().astype(np.float64))
        return torch.as_tensor(km.cluster_centers_, dtype=torch.float32)

    def learn(self, step: Step) -> None:
        if step.labels is None:
            self.task_centroids.append(self._fit(step.features.plain, step.n_classes, step.index))
        else:  # a labelled step (the mixed setting): its classes' means; the joint k-means stays unsupervised
            x = F.normalize(step.features.plain.float(), dim=1).cpu()
            labels = step.labels.cpu()
            self.task_centroids.append(torch.stack([x[labels == c].mean(0) for c in range(step.n_classes)]))
        union = torch.cat([past.plain for past in step.past] + [step.features.plain])
        k_total = step.offset + step.n_classes
        self.joint_centroids = self._fit(union, k_total, step.index)

    @staticmethod
    def _neg_distance(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(F.normalize(x.float(), dim=1), centroids.to(x.device)) ** 2

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        assert self.joint_centroids is not None, "learn() first"
        return self._neg_distance(x, self.joint_centroids)

    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        return self._neg_distance(x, self.task_centroids[task])

    def state_dict(self) -> dict[str, Any]:
        return {"task_centroids": self.task_centroids, "joint_centroids": self.joint_centroids}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.task_centroids = list(state["task_centroids"])
        self.joint_centroids = state["joint_centroids"]

"""Happy (Ma et al., "Happy: A Debiased Learning Framework for Continual Generalized Category Discovery",
NeurIPS'24; docs/methods.md#happy): continual SimGCD (`methods.simgcd`) with its three debiasing parts and a
feature distillation, as its code (Happy-CGCD's `train_happy.py`) computes them (`methods.happy_parts`):

    labelled step: continual SimGCD's; then the prototypes: μ_c, the unit mean feature of each labelled class, and
                    the shared radius r, from the step's images and labels
    step t > 0:    the new rows of W <- clustering-guided initialisation on the previous model's features
                    L = L_distil + L_ser + L_con + w_hap·L_hap + w_kd·L_kd        (no global entropy term)
                    after it: a unit prototype per new class, the mean feature of the step's images predicted
                    as that class (its row of W where none is); the radius stays the labelled step's
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from bench.methods.base import Step, built
from bench.methods.draws import Draws
from bench.methods.gcd_objective import Past, Weights
from bench.methods.happy_parts import Prototypes, class_means, clustered_rows, shared_radius
from bench.methods.simgcd import ContinualSimGCD
from bench.methods.tails import Tail
from bench.registries import METHODS


@METHODS.register_module(name="Happy")
class Happy(ContinualSimGCD):
    preset_file = "happy"

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.prototypes = Prototypes()
        self.previous: Tail | None = None  # the tail as the previous step left it (feature distillation's target)

    def _features(self, step: Step) -> torch.Tensor:
        """The current tail's features of the step's images, plain (no augmentation)."""
        with torch.no_grad():
            return torch.cat([self.tail(x) for x in step.tokens.batches(self.hparams["batch_size"])])

    def initial_rows(self, step: Step, draws: Draws) -> torch.Tensor | None:
        self.previous = self.tail.frozen_copy()
        if not self.hparams["init_new_head"]:
            return None
        old = built(self.head, "the head").weight[:step.offset].detach()
        return clustered_rows(self._features(step), old, step.n_classes, draws.kmeans)

    def weights(self, step: Step) -> Weights:
        """The labelled step is continual SimGCD's, global entropy term included; after it, Happy's soft entropy
        in its place, L_hap and L_kd."""
        hp = self.hparams
        if step.labels is not None:
            return super().weights(step)
        return replace(super().weights(step), soft_entropy=(hp["w_old_new"], hp["w_old_in"], hp["w_new_in"]),
                       proto=hp["proto_weight"], proto_samples=hp["proto_samples"],
                       hardness_temperature=hp["hardness_temperature"], radius_scale=hp["radius_scale"],
                       kd=hp["kd_weight"])

    def past(self, step: Step) -> Past:
        return replace(super().past(step), prototypes=self.prototypes)

    def previous_features(self, views: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor | None:
        """L_kd's target: the previous step's tail on the same views' tokens."""
        if not self.hparams["kd_weight"]:
            return None
        with torch.no_grad():
            previous = built(self.previous, "the previous step's tail")
            return torch.cat([previous(t) for t in views])

    def end_step(self, step: Step) -> None:
        z = self._features(step)
        if step.labels is not None:
            labels = step.labels.to(z.device)
            self.prototypes.add(class_means(z, labels, range(step.n_classes), z.new_zeros(step.n_classes, z.shape[1])))
            self.prototypes.radius = shared_radius(z, labels)
            return
        with torch.no_grad():
            head = built(self.head, "the head")
            predicted = head(z).argmax(1)
        new = range(step.offset, step.offset + step.n_classes)
        self.prototypes.add(class_means(z, predicted, new, head.weight[step.offset:].detach()))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "prototypes": self.prototypes.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.prototypes.load_state_dict(state["prototypes"])

"""Baseline++ (docs/methods.md#baseline-ktrfr): Baseline followed, from the second step on, by knowledge
transfer with robust feature replay (KTRFR).

At step t the Baseline head h^t is trained as in Baseline. Then a unified "student" head over all
classes so far is trained on the current step's two views, pseudo-labelled by h^t, together with
features replayed from Gaussians around the stored per-class prototypes of earlier steps. At the end
of each step the prototypes of its classes are computed from its own images and head and stored;
old images are never read again. Task-agnostic inference uses the student.

Presets: `equations` normalises the student's weights every batch, draws replay per class with the
class's own σ, replays as many features per batch as the batch holds, trains 200 epochs and
fine-tunes the previous student (cumulative); `code`, the default, reproduces the authors' scripts (no weight
normalisation, one shared σ̄, a fixed count per previous class, 100 epochs, re-initialised from the
Baseline heads at every step, per-class variances ÷ (n − 1) as `torch.var`).
"""
from __future__ import annotations

from typing import Any

import torch

from bench.methods.base import RunsOn, Step
from bench.methods.baseline import WithStudent
from bench.methods.blocks import CosineHead, PrototypeStats, concatenated_head, hard_cross_entropy
from bench.methods.loop import train_epochs
from bench.registries import METHODS

KTRFR_REDUCTIONS = ("sum", "mean")
STUDENT_INITS = ("previous_student", "baseline_heads")


def ktrfr_loss(current_logits: torch.Tensor, current_targets: torch.Tensor, replay_logits: torch.Tensor,
               replay_targets: torch.Tensor, temperature: float, reduction: str) -> torch.Tensor:
    """L_past + L_current (Eq. 6, Algorithm 2), each the mean cross-entropy of its own rows (`sum`),
    or one mean over the concatenated rows (`mean`, the authors' code), which weighs the replayed
    features by their share of the rows. With nothing to replay both are L_current."""
    if reduction not in KTRFR_REDUCTIONS:
        raise ValueError(f"unknown KTRFR reduction {reduction!r}; choose from {', '.join(KTRFR_REDUCTIONS)}")
    if reduction == "mean" or len(replay_targets) == 0:
        return hard_cross_entropy(torch.cat([current_logits, replay_logits]),
                                  torch.cat([current_targets, replay_targets]), temperature)
    return (hard_cross_entropy(replay_logits, replay_targets, temperature)
            + hard_cross_entropy(current_logits, current_targets, temperature))


@METHODS.register_module(name="Baseline++")
class BaselinePlusPlus(WithStudent):
    preset_file = "baseline_pp"
    # KTRFR trains the student, a copy of the heads (`concatenated_head`): the Baseline heads h^s stay as trained
    runs_on = RunsOn(settings=("incd", "mixed"), frozen_task_heads=True)
    hparam_choices = {**WithStudent.hparam_choices, "ktrfr_reduction": KTRFR_REDUCTIONS, "init_from": STUDENT_INITS}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.prototypes = PrototypeStats()

    def student_normalizes(self) -> bool:
        return self.hparams["ktrfr_normalize_weights"]

    def learn(self, step: Step) -> None:
        super().learn(step)  # h^t, exactly as Baseline
        if step.index > 0:
            self.student = self._ktrfr(step)
        head = self.heads[step.index]
        with torch.no_grad():  # a labelled step's prototypes are its classes' (the mixed setting)
            pseudo = (head(step.features.plain.float()).argmax(1).cpu() if step.labels is None
                      else step.labels.cpu()) + step.offset
        # `code`: the per-class variance ÷ (n − 1), as the code's torch.var; σ̄ is the mean of these σ
        self.prototypes.add_step(step.features.plain.cpu(), pseudo, step.n_classes,
                                 unbiased=self.hparams["unbiased_variance"])

    def _init_student(self) -> CosineHead:
        hp = self.hparams
        if hp["init_from"] == "previous_student" and self.student is not None:
            parts = [self.student, self.heads[-1]]
        elif hp["init_from"] in STUDENT_INITS:
            parts = self.heads
        else:
            raise ValueError(f"unknown init_from {hp['init_from']!r}; choose from {', '.join(STUDENT_INITS)}")
        return concatenated_head(parts, hp["ktrfr_normalize_weights"])

    def _ktrfr(self, step: Step) -> CosineHead:
        hp = self.hparams
        student = self._init_student().to(step.device)
        teacher = self.heads[step.index]
        gen = torch.Generator().manual_seed(self.seed * 1000 + 500 + step.index)

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            x1, x2 = step.features.two_views(index[0], gen)
            with torch.no_grad():
                y = torch.cat([teacher(x1).argmax(1), teacher(x2).argmax(1)]) + step.offset
            counts = self.prototypes.replay_counts(len(index[0]), hp["replay_per_class"], gen)
            xr, yr = self.prototypes.sample(counts, hp["shared_std"], gen)
            student.renormalize()
            return ktrfr_loss(student(torch.cat([x1, x2])), y, student(xr.to(x1.device)), yr.to(y.device),
                              hp["temperature"], hp["ktrfr_reduction"])

        student.train()
        with step.selection.over(student.parameters(), student, [student]) as after_epoch:
            train_epochs(student.parameters(), hp, epochs=hp["ktrfr_epochs"], sizes=[len(step.features)],
                         batch_size=hp["ktrfr_batch_size"], gen=gen, loss_of=loss_of, after_epoch=after_epoch)
        return student.eval()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "prototypes": self.prototypes.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.prototypes.load_state_dict(state["prototypes"])

"""LwF adapted to class-iNCD (docs/methods.md#lwf): the warm-up and main stages of
`methods.finetuned`, every head training in the main stage, plus a distillation term on view 1
against the model as it was at the end of the previous step (its tail and heads, frozen, on the
student's prefix tokens):

    L = L_SK(h^t) + w · Σ_{s<t} KD(h^s(g(x¹)), h_old^s(g_old(x¹)))       (a sum over old heads, as the code)

KD is FACIL's: both softmaxes raised to 1/T (T = 2) and renormalised, the predicted one smoothed by
ε/C. `standard` (the `equations` preset) is −Σ p_old · log p̃_new, the knowledge-distillation direction
LwF means; `reversed` (the `code` preset, the default) is the authors' −Σ p_new · log p̃_old, whose
gradient reaches the student through the weights p_new. Tab. 5's LwF numbers came from the code, so
the default `LwF` row is the one to set beside them. w is in units of the code's mean swapped loss:
under a summed one (`equations`) the term doubles with it.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bench.methods.base import RunsOn, Step
from bench.methods.blocks import CosineHead
from bench.methods.finetuned import FineTunedIL
from bench.methods.tails import Tail
from bench.registries import METHODS

KD_DIRECTIONS = ("standard", "reversed")


def tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    p = F.softmax(logits, dim=1).pow(1 / temperature)
    return p / p.sum(1, keepdim=True)


def distillation(student: torch.Tensor, teacher: torch.Tensor, temperature: float, direction: str,
                 eps: float = 1e-5) -> torch.Tensor:
    """FACIL's `cross_entropy(outputs, targets, exp=1/T)`, averaged over rows: the log is taken of the
    ε-smoothed student (`standard`) or, as the authors' call swaps the arguments, of the teacher."""
    if direction not in KD_DIRECTIONS:
        raise ValueError(f"unknown distillation direction {direction!r}; choose from {', '.join(KD_DIRECTIONS)}")
    p_new, p_old = tempered(student, temperature), tempered(teacher, temperature)
    weights, logged = (p_old, p_new) if direction == "standard" else (p_new, p_old)
    smoothed = logged + eps / logged.shape[1]
    smoothed = smoothed / smoothed.sum(1, keepdim=True)
    return -(weights * smoothed.log()).sum(1).mean()


@METHODS.register_module(name="LwF")
class LwF(FineTunedIL):
    preset_file = "lwf"
    runs_on = RunsOn(inputs="tokens")
    trains_old_heads = True
    hparam_choices = {**FineTunedIL.hparam_choices, "kd_direction": KD_DIRECTIONS}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.teacher: tuple[Tail, list[CosineHead]] | None = None

    def begin_step(self, step: Step) -> None:
        """The teacher is the model at the end of the previous step: what the checkpoint holds now."""
        if step.index == 0:
            self.teacher = None
            return
        heads = [CosineHead.from_weight(h.weight, self.hparams["normalize_weights"]).requires_grad_(False).eval()
                 for h in self.heads]
        self.teacher = (self.tail.frozen_copy(), heads)

    def regulariser(self, step: Step, tokens1: torch.Tensor, features1: torch.Tensor,
                    gen: torch.Generator) -> torch.Tensor:
        if self.teacher is None:
            return features1.new_zeros(())
        hp = self.hparams
        teacher_tail, teacher_heads = self.teacher
        with torch.no_grad():  # the teacher reads the student's tokens: no second prefix pass
            old_features = teacher_tail(tokens1)
        terms = [distillation(self.heads[s](features1), old_head(old_features), hp["kd_temperature"],
                              hp["kd_direction"]) for s, old_head in enumerate(teacher_heads)]
        return hp["kd_weight"] * torch.stack(terms).sum()

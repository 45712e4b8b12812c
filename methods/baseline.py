"""Baseline ("direct concat", docs/methods.md#baseline).

Frozen backbone features; at step t a new cosine head h^t with C_t outputs is trained with the
swapped Sinkhorn-Knopp cross-entropy on two views per image. Only the heads are kept between
steps; task-agnostic inference concatenates [h^1; …; h^t] and takes the argmax. In the mixed setting
a labelled step trains its head with the cross-entropy of the labels instead; every unlabelled step
is learned as above (its old-class images have no head of their own to go to: what the setting measures).
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable, Sequence

import torch

from bench.methods.base import Method, RunsOn, Step
from bench.methods.batched_heads import PER_TRIAL, train_heads
from bench.methods.blocks import SWAP_REDUCTIONS, CosineHead, train_head_supervised, train_head_swapped
from bench.registries import METHODS


@METHODS.register_module(name="Baseline")
class Baseline(Method):
    preset_file = "baseline"
    # h^s is trained at step s only and kept as it is: on frozen features it answers the same at every later step
    runs_on = RunsOn(settings=("incd", "mixed"), frozen_task_heads=True)
    hparam_choices = {"swap_reduction": SWAP_REDUCTIONS}
    batchable = PER_TRIAL  # `bench tune --batch`: trials' heads trained together (methods.batched_heads)

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.heads: list[CosineHead] = []
        self.losses: list[list[float]] = []

    def new_head(self, n_classes: int) -> CosineHead:
        return CosineHead(self.feature_dim, n_classes, self.hparams["normalize_weights"])

    def learn(self, step: Step) -> None:
        hp = self.hparams
        head = self.new_head(step.n_classes).to(step.device)
        gen = torch.Generator().manual_seed(self.seed * 1000 + step.index)
        epochs = hp["epochs_per_step"][step.index] if hp.get("epochs_per_step") else hp["epochs"]
        # the mixed setting's epoch selection scores the heads as they will predict: [h^1; …; h^t]
        heads = [*self.heads, head]
        with step.selection.over(head.parameters(), lambda x: torch.cat([h(x) for h in heads], 1),
                                 [head]) as after_epoch:
            if step.labels is None:
                self.losses.append(train_head_swapped(head, step.features, hp, epochs=epochs,
                                                      batch_size=hp["batch_size"], gen=gen, after_epoch=after_epoch))
            else:  # a labelled step (the mixed setting): the same head, trained on the labels
                self.losses.append(train_head_supervised(head, step.features, step.labels, hp, epochs=epochs,
                                                         batch_size=hp["batch_size"], gen=gen, after_epoch=after_epoch))
        self.heads.append(head)

    @classmethod
    def learn_batched(cls, methods: Sequence[Any], steps: Sequence[Step]) -> list[list[list[float]]]:
        """`learn` of each method, their new heads trained together (`methods.batched_heads.train_heads`): each head
        made from the random state its run alone would make it from, the same generator draws, each method's own
        epoch selection."""
        rng = torch.get_rng_state()
        heads = []
        for method, step in zip(methods, steps):
            torch.set_rng_state(rng)
            heads.append(method.new_head(step.n_classes).to(step.device))
        first, hp = steps[0], methods[0].hparams
        gen = torch.Generator().manual_seed(methods[0].seed * 1000 + first.index)
        epochs = hp["epochs_per_step"][first.index] if hp.get("epochs_per_step") else hp["epochs"]
        def predicts(heads_so_far: list[CosineHead]) -> Callable[[torch.Tensor], torch.Tensor]:
            return lambda x: torch.cat([h(x) for h in heads_so_far], 1)

        with ExitStack() as selections:  # each run's own epoch selection, over [h^1; …; h^t] as `learn`'s
            after = [selections.enter_context(step.selection.over(head.parameters(), predicts([*method.heads, head]),
                                                                  [head]))
                     for method, step, head in zip(methods, steps, heads)]
            for head in heads:
                head.train()
            losses = train_heads(heads, first.features, [m.hparams for m in methods], epochs=epochs,
                                 batch_size=hp["batch_size"], gen=gen, labels=first.labels, after_epoch=after)
        for method, head, loss in zip(methods, heads, losses):
            method.losses.append(loss)
            method.heads.append(head)
        return [[loss] for loss in losses]

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([head(x) for head in self.heads], dim=1)

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        return self.heads[task](x)

    def state_dict(self) -> dict[str, Any]:
        return {"heads": [h.weight.detach().cpu().clone() for h in self.heads], "losses": self.losses}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.heads = [CosineHead.from_weight(w, self.hparams["normalize_weights"]).eval() for w in state["heads"]]
        self.losses = list(state["losses"])


class WithStudent(Baseline):
    """Baseline heads h^1..h^t plus a unified "student" head that does task-agnostic inference
    (Baseline++, Joint (frozen)); the Baseline heads still give the task-specific predictions."""

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.student: CosineHead | None = None

    def student_normalizes(self) -> bool:
        return True

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.student(x) if self.student is not None else super().logits(x)

    def state_dict(self) -> dict[str, Any]:
        student = None if self.student is None else self.student.weight.detach().cpu().clone()
        return {**super().state_dict(), "student": student}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.student = None
        if state["student"] is not None:
            self.student = CosineHead.from_weight(state["student"], self.student_normalizes()).eval()

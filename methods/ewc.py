"""EwC adapted to class-iNCD (docs/methods.md#ewc, as the authors' code has it from
FACIL): the warm-up and main stages of `methods.finetuned`, old heads fixed, plus

    L = L_SK(h^t) + λ/2 · Σ_i F_i (θ_i − θ*_i)²      over the tail's parameters θ (zero at step 0)

where after each step, on the step's images (plain view), F_new is the mean over images of the
squared gradient of the cross-entropy of h^t's raw cosine logits against their own argmax (FACIL's
`grad² · batch size`, divided by ⌊N/B⌋·B as the code does), fused F ← α F + (1 − α) F_new, and the
single anchor θ* is overwritten with the current tail. λ: 10000 (`code`, the default), 8000
(`equations`, where the summed swapped loss doubles the penalty with it: finetuned.py).
"""
from __future__ import annotations

from typing import Any, Iterable

import torch
import torch.nn.functional as F

from bench.methods.base import RunsOn, Step
from bench.methods.finetuned import FineTunedIL
from bench.registries import METHODS


def fisher_diagonal(tail: torch.nn.Module, head: torch.nn.Module, batches: Iterable[torch.Tensor],
                    batch_size: int) -> dict[str, torch.Tensor]:
    """FACIL's empirical Fisher with the model's own predictions as targets: Σ_batches grad² · |batch|,
    divided by ⌊N/B⌋·B (N when a single partial batch is all there is)."""
    params = dict(tail.named_parameters())
    fisher = {name: torch.zeros_like(p) for name, p in params.items()}
    tail.train(), head.train()  # as the code: train mode, the head's weights as they are (not renormalised)
    n = 0
    for tokens in batches:
        logits = head(tail(tokens))
        loss = F.cross_entropy(logits, logits.argmax(1))
        tail.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        loss.backward()
        for name, p in params.items():
            if p.grad is not None:
                fisher[name] += p.grad.detach().pow(2) * len(tokens)
        n += len(tokens)
    full = (n // batch_size) * batch_size or n
    tail.zero_grad(set_to_none=True)
    head.zero_grad(set_to_none=True)
    return {name: f / full for name, f in fisher.items()}


def ewc_penalty(tail: torch.nn.Module, fisher: dict[str, torch.Tensor], anchor: dict[str, torch.Tensor],
                strength: float) -> torch.Tensor:
    """λ/2 · Σ F (θ − θ*)² over the tail's parameters."""
    terms = [(fisher[name] * (p - anchor[name]).pow(2)).sum() for name, p in tail.named_parameters()]
    return strength / 2 * torch.stack(terms).sum()


@METHODS.register_module(name="EwC")
class EwC(FineTunedIL):
    preset_file = "ewc"
    runs_on = RunsOn(inputs="tokens")

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.fisher: dict[str, torch.Tensor] = {}
        self.anchor: dict[str, torch.Tensor] = {}

    def regulariser(self, step: Step, tokens1: torch.Tensor, features1: torch.Tensor,
                    gen: torch.Generator) -> torch.Tensor:
        if not self.fisher:  # step 0: nothing to protect yet
            return features1.new_zeros(())
        return ewc_penalty(self.tail, self.fisher, self.anchor, self.hparams["ewc_lambda"])

    def end_step(self, step: Step) -> None:
        hp = self.hparams
        # one batch of tokens at a time: a step's tokens at once would not fit (0.6 MB an image for ViT-B)
        new = fisher_diagonal(self.tail, self.heads[step.index], step.tokens.batches(hp["batch_size"]), hp["batch_size"])
        alpha = hp["fisher_alpha"]
        self.fisher = new if not self.fisher else {k: alpha * self.fisher[k] + (1 - alpha) * new[k] for k in new}
        self.anchor = {name: p.detach().clone() for name, p in self.tail.named_parameters()}

    def state_dict(self) -> dict[str, Any]:
        cpu = {k: {n: v.cpu() for n, v in getattr(self, k).items()} for k in ("fisher", "anchor")}
        return {**super().state_dict(), **cpu}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.fisher = {n: v.to(self.device) for n, v in state["fisher"].items()}
        self.anchor = {n: v.to(self.device) for n, v in state["anchor"].items()}

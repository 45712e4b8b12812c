"""Happy++ (Ma et al., "Happy++: Towards Stable and Unified Continual Generalized Category Discovery", TPAMI'26;
docs/methods.md#happy-tpami26): Happy (`methods.happy`) with the switches of its code (Happy-CGCD's
`train_happy_plus_plus.py`), each off at its argparse default, on its unlabelled steps (`methods.happy_pp_parts`):

    protogcd:            L_distil → ProtoGCD's confident self-distillation, ρ over `protogcd_ramp_epochs`
    old_head_l2_weight:  + w_l2·L_l2 on the rows known before the step
    stch_mu:             Σ_i L_i → μ·log Σ_i exp(L_i/μ) over (L_distil + L_ser, L_con, w_hap·L_hap, w_kd·L_kd, w_l2·L_l2)
    ema_new, ema_old:    an EMA of the trained weights, written into them at each epoch's end (1, 0: none)
    swa:                 SWALR's rate (swa_lr_ratio·lr, annealed over swa_anneal_epochs) from epoch swa_start + 1
    lora_rank:           r > 0: each unlabelled step freezes the linear weights of the trained blocks and, with
                         lora_applied (`equations`), adds a rank-r term to each that trains (`methods.lora`); the
                         script's terms never enter its forward (`code`: the weights freeze, nothing is added)

The labelled step is Happy's (the README runs `train_happy.py` for it).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import torch
from torch import nn

from bench.errors import BenchError
from bench.methods.base import Step, built
from bench.methods.draws import Draws
from bench.methods.gcd_objective import Past, Weights
from bench.methods.happy import Happy
from bench.methods.happy_pp_parts import WeightAverage, swa_lr
from bench.methods.lora import add_lora, freeze_linear, terms_in
from bench.methods.loop import cosine_after_epoch
from bench.methods.tails import Tail
from bench.registries import METHODS


@METHODS.register_module(name="Happy++")
class HappyPlusPlus(Happy):
    preset_file = "happy_pp"

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        rank = self.hparams["lora_rank"]
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise BenchError(f"bad method.lora_rank={rank!r}: 0 (no LoRA: the trained blocks train whole, the script's "
                             "default) or a rank >= 1 (a new low-rank term per unlabelled step, the blocks' linear "
                             "weights frozen)")
        self.previous_rows: torch.Tensor | None = None  # the head's rows as the previous step left them

    def initial_rows(self, step: Step, draws: Draws) -> torch.Tensor | None:
        self.previous_rows = built(self.head, "the head").weight[:step.offset].detach().clone()
        rows = super().initial_rows(step, draws)  # after the previous step's tail is copied (L_kd's target)
        if self.hparams["lora_rank"] and self.hparams["lora_applied"]:
            # the step's new terms: A drawn from a stream of their own (seed·1000 + 600 + t), so that switching LoRA
            # on shifts no other draw of the step (methods.draws)
            gen = torch.Generator().manual_seed(self.seed * 1000 + 600 + step.index)
            add_lora(self.tail.blocks, self.hparams["lora_rank"], None, gen)
        elif self.hparams["lora_rank"]:  # the script's: its terms never enter the forward, its layers' weights freeze
            freeze_linear(self.tail.blocks)
        return rows

    def new_tail(self, state: dict[str, torch.Tensor] | None = None, first: int | None = None) -> Tail:
        """A tail from a checkpoint holding LoRA terms gets its layers wrapped with as many terms first."""
        terms = terms_in(state) if state is not None else 0
        if state is None or not terms:
            return super().new_tail(state, first)
        tail = super().new_tail(None, first)
        for _ in range(terms):
            add_lora(tail.blocks, self.hparams["lora_rank"] or 1, None, torch.Generator())  # values: the state's
        return tail.load_trainable_state(state)

    def weights(self, step: Step) -> Weights:
        hp = self.hparams
        if step.labels is not None:
            return super().weights(step)
        return replace(super().weights(step), confident_ramp=hp["protogcd_ramp_epochs"] if hp["protogcd"] else None,
                       l2=hp["old_head_l2_weight"], stch_mu=hp["stch_mu"])

    def past(self, step: Step) -> Past:
        return replace(super().past(step), rows=self.previous_rows)

    def unlabelled_lr(self, epochs: int, lr: float) -> Callable[[int], float]:
        hp = self.hparams
        if not hp["swa"]:
            return super().unlabelled_lr(epochs, lr)
        cosine = [cosine_after_epoch(e, epochs, lr, lr * hp["eta_min_ratio"]) for e in range(max(epochs, hp["swa_start"] + 1))]
        return lambda e: swa_lr(e, cosine, hp["swa_lr_ratio"] * lr, hp["swa_start"], hp["swa_anneal_epochs"])

    def training_hooks(self, step: Step, modules: list[nn.Module]) -> tuple[Callable[[], None] | None,
                                                                            Callable[[int], None] | None]:
        hp = self.hparams
        if hp["ema_new"] == 1 and hp["ema_old"] == 0:  # the script's default: the average is the weights
            return None, None
        average = WeightAverage(modules, hp["ema_new"], hp["ema_old"])
        return average.update, average.apply

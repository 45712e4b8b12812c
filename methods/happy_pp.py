"""Happy++ (Ma et al., "Happy++: Towards Stable and Unified Continual Generalized Category Discovery", TPAMI'26;
docs/methods.md#happy-tpami26): Happy (`methods.happy`) with the switches of its code (Happy-CGCD's
`train_happy_plus_plus.py`), each off at its argparse default, on its unlabelled steps (`methods.happy_pp_parts`):

    protogcd:            L_distil → ProtoGCD's confident self-distillation, ρ over `protogcd_ramp_epochs`
    old_head_l2_weight:  + w_l2·L_l2 on the rows known before the step
    stch_mu:             Σ_i L_i → μ·log Σ_i exp(L_i/μ) over (L_distil + L_ser, L_con, w_hap·L_hap, w_kd·L_kd, w_l2·L_l2)
    ema_new, ema_old:    an EMA of the trained weights, written into them at each epoch's end (1, 0: none)
    swa:                 SWALR's rate (swa_lr_ratio·lr, annealed over swa_anneal_epochs) from epoch swa_start + 1
    lora_rank:           LoRA on the trained blocks: not implemented, refused when above 0

The labelled step is Happy's (the README runs `train_happy.py` for it).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from bench.errors import BenchError
from bench.methods.base import Step, built
from bench.methods.happy import Happy
from bench.methods.happy_pp_parts import WeightAverage, confident_distil, confident_ratio, old_rows_l2, smooth_max, swa_lr
from bench.methods.loop import cosine_after_epoch
from bench.registries import METHODS


@METHODS.register_module(name="Happy++")
class HappyPlusPlus(Happy):
    preset_file = "happy_pp"

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        if self.hparams["lora_rank"]:
            raise BenchError(f"Happy++'s LoRA (method.lora_rank={self.hparams['lora_rank']}) is not implemented in "
                             "bench; valid: method.lora_rank=0 (the script's default: the last block trains whole)")
        self.previous_rows: torch.Tensor | None = None  # the head's rows as the previous step left them

    def initial_rows(self, step: Step) -> torch.Tensor | None:
        self.previous_rows = built(self.head, "the head").weight[:step.offset].detach().clone()
        return super().initial_rows(step)

    def self_distillation(self, s1: torch.Tensor, s2: torch.Tensor, tau_t: float, epoch: int) -> torch.Tensor:
        hp = self.hparams
        if not hp["protogcd"]:
            return super().self_distillation(s1, s2, tau_t, epoch)
        return confident_distil(s1, s2, hp["student_temperature"], tau_t,
                                confident_ratio(epoch, hp["protogcd_ramp_epochs"]))

    def unlabelled_loss(self, step: Step, views: tuple[torch.Tensor, torch.Tensor], z: torch.Tensor,
                        gen: torch.Generator, cluster: torch.Tensor, contrastive: torch.Tensor) -> torch.Tensor:
        hp = self.hparams
        l2 = (old_rows_l2(built(self.head, "the head").weight, built(self.previous_rows, "the previous step's rows"))
              if hp["old_head_l2_weight"] else None)
        if not hp["stch_mu"]:
            loss = super().unlabelled_loss(step, views, z, gen, cluster, contrastive)
            return loss if l2 is None else loss + hp["old_head_l2_weight"] * l2
        zero = z.new_zeros(())  # a term switched off is 0 in the script's stack, and still counts in the smooth max
        terms = [cluster, contrastive,
                 hp["proto_weight"] * self.prototype_term(gen) if hp["proto_weight"] else zero,
                 hp["kd_weight"] * self.distillation_term(views, z) if hp["kd_weight"] else zero,
                 hp["old_head_l2_weight"] * l2 if l2 is not None else zero]
        return smooth_max(terms, hp["stch_mu"])

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

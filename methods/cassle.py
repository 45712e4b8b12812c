"""CaSSLe adapted to class-iNCD (docs/methods.md#cassle; Fini et al. CVPR'22, BYOL).

The authors trained CaSSLe's backbones with cassle's own code (ResNets only) and loaded them from
files; here the ViT's last `unfreeze` blocks train inside the run. At every step, on that step's
unlabelled images only:

1. self-supervised (`ssl_epochs`): the tail g, a projector π and a predictor q train with BYOL
   against an EMA target (g_m, π_m), plus CaSSLe's predictive distillation from step 1 on:

       L = ℓ(q(π(g(x¹))), π_m(g_m(x²))) + ℓ(q(π(g(x²))), π_m(g_m(x¹)))                   (BYOL, summed)
         + λ · [ℓ(d(π(g(x¹))), π_old(g_old(x¹))) + ℓ(d(π(g(x²))), π_old(g_old(x²)))] / 2   (distillation)

   with ℓ(p, z) = 2 − 2 cos(p, sg(z)), d the distillation predictor, (g_old, π_old) a frozen copy of
   the model at the end of the previous step and the two views cassle's CIFAR views (`byol_views`),
   augmented differently (BYOL's asymmetric blur and solarisation). After every optimiser step the
   target follows θ_m ← τ θ_m + (1 − τ) θ, τ rising from 0.99 to 1 along a cosine over the step's
   optimiser steps (cassle's schedule, restarting every step). cassle's online linear probe reads
   labels: it is left out.
2. discovery: Baseline's procedure (cosine head, swapped Sinkhorn, weight normalisation) on the
   features of this step's tail, frozen.

Inference: the last step's tail with every step's head concatenated (earlier heads were trained on
earlier tails: that drift is CaSSLe's forgetting).
"""
from __future__ import annotations

import copy
import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from bench.methods.base import REFITTED, RunsOn, Step
from bench.methods.blocks import SWAP_REDUCTIONS, CosineHead, train_head_swapped
from bench.methods.loop import train_epochs
from bench.methods.tails import OneTailHeads, Tail
from bench.registries import METHODS


def mlp(in_dim: int, hidden: int, out_dim: int) -> nn.Sequential:
    """cassle's projector and predictors: Linear, BatchNorm, ReLU, Linear."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, out_dim))


def byol_loss(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """2 − 2·cos(p, z), z a target (no gradient), averaged over the batch."""
    return 2 - 2 * F.cosine_similarity(p, z.detach(), dim=-1).mean()


# Fixed in cassle's CifarTransform (not options of its scripts): ColorJitter applied with p 0.8,
# RandomGrayscale p 0.2, and Solarization = PIL's ImageOps.solarize at its default threshold 128.
JITTER_P, GRAYSCALE_P, SOLARIZE_THRESHOLD = 0.8, 0.2, 128.0


def byol_views(hp: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two BYOL views' policy fields (`bench.features.augment.policy_variant`), cassle's CIFAR views:
    RandomResizedCrop(scale=(view_crop_min_scale, 1)) only (no padded RandomCrop), ColorJitter with the
    `view_*` strengths, grayscale, blur and solarisation with one probability per view, a flip; no
    equalisation. They replace every colour field of the dataset's policy, whichever preset it is."""
    common = dict(resized_only=True, crop_min_scale=hp["view_crop_min_scale"],
                  jitter=(hp["view_brightness"], hp["view_contrast"], hp["view_saturation"], hp["view_hue"]),
                  jitter_p=JITTER_P, grayscale_p=GRAYSCALE_P, equalize_p=0.0, solarize_threshold=SOLARIZE_THRESHOLD)
    first, second = ({**common, "blur_p": b, "solarize_p": s} for b, s in zip(hp["view_blur_p"], hp["view_solarize_p"]))
    return first, second


def ema_tau(k: int, total: int, base: float, final: float) -> float:
    """τ after k of `total` optimiser steps: final − (final − base)·(cos(πk/total) + 1)/2."""
    return final - (final - base) * (math.cos(math.pi * k / total) + 1) / 2


@torch.no_grad()
def ema_update(online: nn.Module, target: nn.Module, tau: float) -> None:
    for o, t in zip(online.parameters(), target.parameters()):
        t.mul_(tau).add_(o.detach(), alpha=1 - tau)


class Projected(nn.Module):
    """A tail and its projector: what BYOL's target, and CaSSLe's frozen teacher, copy."""

    def __init__(self, tail: Tail, projector: nn.Sequential) -> None:
        super().__init__()
        self.tail, self.projector = tail, projector

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.projector(self.tail(tokens))

    def frozen_copy(self) -> "Projected":
        return copy.deepcopy(self).requires_grad_(False)


class StepFeatures:
    """Features of a step's images through a frozen tail, fresh views every draw (Baseline's data)."""

    def __init__(self, tokens: Any, tail: Tail) -> None:
        self.tokens, self.tail = tokens, tail

    def __len__(self) -> int:
        return len(self.tokens)

    @torch.no_grad()
    def two_views(self, index: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        t1, t2 = self.tokens.two_views(index, gen)
        return self.tail(t1), self.tail(t2)


@METHODS.register_module(name="CaSSLe")
class CaSSLe(OneTailHeads):
    preset_file = "cassle"
    runs_on = RunsOn(inputs="tokens")
    reported = REFITTED  # its tester re-fits each task's map at every evaluation from the current block
    hparam_choices = {"swap_reduction": SWAP_REDUCTIONS}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.heads: list[CosineHead] = []
        self._nets: dict[str, nn.Module] | None = None
        self._state: dict[str, Any] | None = None  # from a checkpoint, until the networks are built

    @property
    def nets(self) -> dict[str, nn.Module]:
        """online (tail + projector), predictor, distill_predictor and target (the EMA copy of online)."""
        if self._nets is None:
            hp = self.hparams
            with torch.random.fork_rng(devices=[]):  # the MLPs' initialisation, seeded by the run
                torch.manual_seed(self.seed)
                online = Projected(self.new_tail(), mlp(self.feature_dim, hp["proj_hidden_dim"], hp["output_dim"]))
                nets = {"online": online,
                        "predictor": mlp(hp["output_dim"], hp["pred_hidden_dim"], hp["output_dim"]),
                        "distill_predictor": mlp(hp["output_dim"], hp["distill_hidden_dim"], hp["output_dim"]),
                        "target": online.frozen_copy()}
            if self._state is not None:
                for name, net in nets.items():
                    net.load_state_dict(self._state[name])
            self._nets = {name: net.to(self.device).eval() for name, net in nets.items()}
        return self._nets

    @property
    def tail(self) -> Tail:
        return cast(Projected, self.nets["online"]).tail

    def learn(self, step: Step) -> None:
        self._self_supervised(step)
        self._discover(step)

    def _self_supervised(self, step: Step) -> None:
        hp, nets = self.hparams, self.nets
        online, predictor, distiller, target = nets["online"], nets["predictor"], nets["distill_predictor"], nets["target"]
        # the model at the end of step t − 1; cassle's frozen copy and its EMA target run in train mode
        # (the projector's batch norm on batch statistics), as everything in its training step
        teacher = cast(Projected, online).frozen_copy().train() if step.index > 0 else None
        gen = torch.Generator().manual_seed(self.seed * 1000 + 100 + step.index)
        variants = byol_views(hp)
        total = max(1, len(step.tokens) // hp["ssl_batch_size"]) * hp["ssl_epochs"]
        done = [0]

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen, variants)
            z1, z2 = online(t1), online(t2)
            with torch.no_grad():
                m1, m2 = target(t1), target(t2)
            loss = byol_loss(predictor(z1), m2) + byol_loss(predictor(z2), m1)
            if teacher is not None:
                with torch.no_grad():  # the frozen previous model reads the same views
                    f1, f2 = teacher(t1), teacher(t2)
                loss = loss + hp["distill_weight"] * (byol_loss(distiller(z1), f1) + byol_loss(distiller(z2), f2)) / 2
            return loss

        def follow() -> None:  # the EMA target, after every optimiser step, then τ moves on
            ema_update(online, target, ema_tau(done[0], total, hp["base_tau"], hp["final_tau"]))
            done[0] += 1

        trained = [online, predictor] + ([distiller] if teacher is not None else [])
        for net in [*trained, target]:
            net.train()
        optimiser = {"lr": hp["ssl_lr"], "momentum": hp["ssl_momentum"], "weight_decay": hp["ssl_weight_decay"],
                     "eta_min": hp["ssl_eta_min"]}
        train_epochs([p for net in trained for p in net.parameters()], optimiser, epochs=hp["ssl_epochs"],
                     sizes=[len(step.tokens)], batch_size=hp["ssl_batch_size"], gen=gen, loss_of=loss_of,
                     after_step=follow, drop_last=True)
        for net in nets.values():
            net.eval()

    def _discover(self, step: Step) -> None:
        hp = self.hparams
        head = CosineHead(self.feature_dim, step.n_classes, hp["normalize_weights"]).to(self.device)
        gen = torch.Generator().manual_seed(self.seed * 1000 + 200 + step.index)
        train_head_swapped(head, StepFeatures(step.tokens, self.tail), hp, epochs=hp["epochs"],
                           batch_size=hp["batch_size"], gen=gen)
        self.heads.append(head)

    def state_dict(self) -> dict[str, Any]:
        state = {name: {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
                 for name, net in self.nets.items()}
        return {**state, "heads": [h.weight.detach().cpu().clone() for h in self.heads]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._nets, self._state = None, state
        normalize = self.hparams["normalize_weights"]
        self.heads = [CosineHead.from_weight(w.to(self.device), normalize).eval() for w in state["heads"]]

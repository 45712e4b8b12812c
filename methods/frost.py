"""FRoST adapted to class-iNCD (docs/methods.md#frost; Roy et al. ECCV'22).

The backbone's last block (`unfreeze=1`) continues from step to step. At step t a task head h^t
(cosine, C_t outputs) and, from step 1 on, a joint head rebuilt from the stored task heads
h^0..h^{t−1} and the new h^t train together with the tail, in one step of `epochs`, on

    L = L_label(h^t) + w(e) · MSE(p(x¹), p(x²))                                (every step)
      + w(e)/w_max · 0.05 · CE(joint(x¹), argmax h^t(x¹) + offset)            (t ≥ 1: self-training)
      + 10 · ‖vec(g_{t−1}(x¹))/‖·‖ − vec(g(x¹))/‖·‖‖₂                           (t ≥ 1: feature KD)
      + 1 · CE(joint(x̃), k),  x̃ ~ N(μ_k, σ²) for the earlier steps' classes k (t ≥ 1: feature replay)

where L_label is the pairwise BCE on rank statistics (`rankstats`, the shipped scripts' default) or
the swapped Sinkhorn loss (`sinkhorn`), w(e) the sigmoid ramp-up, g_{t−1} the previous step's
backbone (frozen) on the student's tokens, and vec(·) flattens the whole batch's features into one
vector. The prototypes of step s are computed when it ends, from its images through its own final
(tail, h^s), with Baseline++'s `PrototypeStats`. Every step's (tail, h^s) is stored.

Inference: the joint head on the current backbone (step 0: h^0); task s's task-specific head is its
stored (tail, h^s).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bench.methods.base import RunsOn, Step, built
from bench.methods.blocks import SWAP_REDUCTIONS, CosineHead, PrototypeStats, clustering_scale, swapped_loss
from bench.methods.loop import step_lr, train_epochs
from bench.methods.rankstats import pairwise_bce, rank_pair_targets, sigmoid_rampup
from bench.methods.tails import PairedTails, Tail
from bench.registries import METHODS

LABELLINGS = ("rankstats", "sinkhorn")
SCHEDULES = ("step", "cosine")
Pair = tuple[dict[str, torch.Tensor], torch.Tensor]  # (tail blocks' weights, task head weight)


def feature_distance(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """‖u/‖u‖ − v/‖v‖‖₂ of the two batches' features, each flattened into one vector (unsquared)."""
    return torch.dist(F.normalize(old.reshape(-1), dim=0), F.normalize(new.reshape(-1), dim=0))


@METHODS.register_module(name="FRoST")
class FRoST(PairedTails):
    preset_file = "frost"
    runs_on = RunsOn(inputs="tokens")
    hparam_choices = {"labelling": LABELLINGS, "schedule": SCHEDULES, "swap_reduction": SWAP_REDUCTIONS}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.pairs: list[Pair] = []
        self.joint: torch.Tensor | None = None  # the joint head after the last step (from step 1 on)
        self.prototypes = PrototypeStats()
        self._models: dict[Any, tuple[Tail, CosineHead]] = {}

    def _head(self, weight: torch.Tensor) -> CosineHead:
        return CosineHead.from_weight(weight.to(self.device), self.hparams["normalize_weights"])

    def _model(self, key: Any) -> tuple[Tail, CosineHead]:
        """Step `key`'s stored (tail, task head), or for "joint" the current tail and the unified head."""
        if key not in self._models:
            tail = self.new_tail(self.pairs[-1 if key == "joint" else key][0]).eval()
            weight = self.pairs[key][1] if key != "joint" else (self.joint if self.joint is not None else self.pairs[0][1])
            self._models[key] = (tail, self._head(weight).eval())
        return self._models[key]

    def learn(self, step: Step) -> None:
        hp, t = self.hparams, step.index
        tail = self.new_tail(self.pairs[-1][0] if self.pairs else None).train()  # continues from step t−1's
        previous = self.new_tail(self.pairs[-1][0]).frozen_copy() if t > 0 else None
        head = CosineHead(self.feature_dim, step.n_classes, hp["normalize_weights"]).to(self.device).train()
        joint = None
        if t > 0:  # rebuilt every step from the stored task heads and the new one (non-cumulative)
            joint = self._head(torch.cat([w.to(self.device) for _, w in self.pairs] + [head.weight.detach()])).train()
        heads = [head] + ([joint] if joint is not None else [])
        gen = torch.Generator().manual_seed(self.seed * 1000 + 100 + step.index)
        ramp = {"w": 0.0}

        def start_epoch(epoch: int) -> None:
            ramp["w"] = hp["rampup_coefficient"] * sigmoid_rampup(epoch, hp["rampup_length"])

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            for h in heads:
                h.renormalize()  # only with normalize_weights (the sinkhorn variant)
            z1, z2 = tail(t1), tail(t2)
            logits1, logits2 = head(z1), head(z2)
            p1, p2 = F.softmax(logits1, dim=1), F.softmax(logits2, dim=1)
            if hp["labelling"] == "rankstats":
                loss, scale = pairwise_bce(p1, p2, rank_pair_targets(z1, hp["topk"])), 1.0
            else:  # the other terms' weights are in units of the code's mean swapped loss
                loss, scale = swapped_loss(logits1, logits2, hp), clustering_scale(hp)
            loss = loss + scale * ramp["w"] * F.mse_loss(p1, p2)
            if joint is None:
                return loss
            pseudo = logits1.detach().argmax(1) + step.offset
            loss = loss + scale * (ramp["w"] / hp["rampup_coefficient"] * hp["increment_coefficient"]
                           * F.cross_entropy(joint(z1), pseudo))
            with torch.no_grad():  # the previous backbone reads the student's tokens
                old = built(previous, "the previous step's tail")(t1)
            loss = loss + scale * hp["feature_kd_weight"] * feature_distance(old, z1)
            counts = self.prototypes.replay_counts(len(index[0]), hp["replay_per_class"], gen)
            replayed, classes = self.prototypes.sample(counts, hp["shared_std"], gen)
            if len(classes):
                loss = loss + scale * hp["replay_weight"] * F.cross_entropy(joint(replayed.to(z1.device)), classes.to(z1.device))
            return loss

        if hp["schedule"] not in SCHEDULES:
            raise ValueError(f"unknown schedule {hp['schedule']!r}; choose from {', '.join(SCHEDULES)}")
        lr_at = (lambda e: step_lr(e, hp["lr"], hp["step_size"], hp["gamma"])) if hp["schedule"] == "step" else None
        train_epochs([*tail.parameters(), *(p for h in heads for p in h.parameters())], hp, epochs=hp["epochs"],
                     sizes=[len(step.tokens)], batch_size=hp["batch_size"], gen=gen, loss_of=loss_of, lr_at=lr_at,
                     on_epoch=start_epoch, read_ahead=[step.tokens])
        tail.eval(), head.eval()
        self.pairs.append((tail.trainable_state(), head.weight.detach().cpu().clone()))
        self.joint = None if joint is None else joint.weight.detach().cpu().clone()
        self._models.clear()
        self._add_prototypes(step)

    @torch.no_grad()
    def _add_prototypes(self, step: Step) -> None:
        """Step t's classes' prototypes, from its plain images through its own final (tail, h^t)."""
        tail, head = self._model(step.index)
        features = torch.cat([tail(x) for x in step.tokens.batches()])
        pseudo = head(features).argmax(1) + step.offset
        self.prototypes.add_step(features.cpu(), pseudo.cpu(), step.n_classes, unbiased=self.hparams["unbiased_variance"])

    def state_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "joint": self.joint, "prototypes": self.prototypes.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pairs, self.joint = list(state["pairs"]), state["joint"]
        self.prototypes.load_state_dict(state["prototypes"])
        self._models.clear()

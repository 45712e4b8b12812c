"""The per-batch objective of the mixed setting's trained methods (continual SimGCD, Happy, Happy++;
docs/methods.md#happy), a function of its inputs alone: the model's outputs on a batch's two views, the labels of
a labelled step, the step's weights, the epoch, the generator of its draws, and what the steps before it left. The
methods differ only in the `Weights` they hand it, so a test calls it on hand-made tensors.

    labelled step:    L = (1 − λ)·(L_distil + ε·(log K − H(p̄)) + L_con) + λ·(L_ce + L_supcon)
    unlabelled step:  L = L_1 + L_2 + L_3 + L_4 [+ L_5]          or, with STCH (μ > 0), μ·log Σ_i exp(L_i/μ)
                      L_1 = L_distil (ProtoGCD's confident one with a ramp) + the entropy term (SimGCD's global
                      ε·(log K − H(p̄)), or Happy's soft L_ser where its weights are given)
                      L_2 = L_con, L_3 = w_hap·L_hap, L_4 = w_kd·L_kd, L_5 = w_l2·L_l2

The terms are added in this order (the order the methods added them in before this function existed: the sums
are the same floats).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bench.methods.base import built
from bench.methods.gcd_losses import NormedHead, distil, entropy_regulariser, info_nce, supcon, teacher_temperature
from bench.methods.happy_parts import Prototypes, feature_distillation, soft_entropy
from bench.methods.happy_pp_parts import confident_distil, confident_ratio, old_rows_l2, smooth_max


@dataclass(frozen=True)
class Outputs:
    """What the model made of one batch of B images' two views: each 2B rows, the first view's B, then the
    second's."""

    z: torch.Tensor                    # the tail's features
    logits: torch.Tensor               # the head's cosine logits s
    projections: torch.Tensor          # φ(z), L2-normalised
    z_previous: torch.Tensor | None = None  # the previous step's tail on the same views (Happy's L_kd)

    @property
    def n(self) -> int:
        return len(self.z) // 2


@dataclass(frozen=True)
class Weights:
    """One step's temperatures and weights (a method's hyper-parameters, read once per step). A part whose weight
    is 0 (or None) is not computed, and draws nothing."""

    student_temperature: float                    # τ_s
    teacher: tuple[float, float, int, int]        # τ_t: from, to, over how many epochs, of the step's epochs
    info_nce_temperature: float                   # τ_c
    memax: float = 0.0                            # ε of the global entropy term (SimGCD's)
    sup_weight: float = 0.0                       # λ (a labelled step)
    supcon_temperature: float = 0.07
    soft_entropy: tuple[float, float, float] | None = None  # Happy's (w_on, w_oi, w_ni): L_ser, in ε's place
    proto: float = 0.0                            # w_hap
    proto_samples: int = 0                        # M
    hardness_temperature: float = 0.1             # τ_h
    radius_scale: float = 1.0
    kd: float = 0.0                               # w_kd
    confident_ramp: int | None = None             # ProtoGCD's ramp in epochs (Happy++'s `protogcd`); None: off
    l2: float = 0.0                               # w_l2 (Happy++)
    stch_mu: float = 0.0                          # μ of STCH (Happy++); 0: the plain sum


@dataclass(frozen=True)
class Past:
    """What an unlabelled step's objective reads of the steps before it."""

    known: int                                    # K_seen: the logits' first columns are the old classes
    prototypes: Prototypes | None = None          # the old classes' prototypes (L_hap)
    rows: torch.Tensor | None = None              # the head's rows as the previous step left them (L_l2)


def objective(out: Outputs, labels: torch.Tensor | None, w: Weights, epoch: int, gen: torch.Generator,
              head: NormedHead | None = None, past: Past | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The batch's loss and its terms by name, each weighted as it is added. `labels` (the B images') make it a
    labelled step's; otherwise `past` is needed, and `head` (whose rows the prototype samples go through and L_l2
    reads) where L_hap or L_l2 is on. Only L_hap draws, from `gen`."""
    n, s, h = out.n, out.logits, out.projections
    tau_s = w.student_temperature
    tau_t = teacher_temperature(epoch, w.teacher[3], *w.teacher[:3])
    if labels is not None:
        y = torch.cat([labels, labels])
        terms = {"distil": distil(s[:n], s[n:], tau_s, tau_t), "entropy": w.memax * entropy_regulariser(s, tau_s),
                 "contrastive": info_nce(h[:n], h[n:], w.info_nce_temperature),
                 "ce": F.cross_entropy(s / tau_s, y), "supcon": supcon(h[:n], h[n:], labels, w.supcon_temperature)}
        unsupervised = terms["distil"] + terms["entropy"] + terms["contrastive"]
        return (1 - w.sup_weight) * unsupervised + w.sup_weight * (terms["ce"] + terms["supcon"]), terms
    past = built(past, "what the steps before an unlabelled step left (past)")
    terms = {"distil": (distil(s[:n], s[n:], tau_s, tau_t) if w.confident_ramp is None
                        else confident_distil(s[:n], s[n:], tau_s, tau_t, confident_ratio(epoch, w.confident_ramp))),
             "entropy": (w.memax * entropy_regulariser(s, tau_s) if w.soft_entropy is None
                         else soft_entropy(s, past.known, tau_s, w.soft_entropy)),
             "contrastive": info_nce(h[:n], h[n:], w.info_nce_temperature)}
    if w.proto:
        prototypes = built(past.prototypes, "the prototypes")
        terms["proto"] = w.proto * prototypes.loss(built(head, "the head"), w.proto_samples,
                                                   w.hardness_temperature, w.radius_scale, tau_s, gen)
    if w.kd:
        terms["kd"] = w.kd * feature_distillation(out.z, built(out.z_previous, "the previous step's features"))
    if w.l2:
        terms["l2"] = w.l2 * old_rows_l2(built(head, "the head").weight, built(past.rows, "the previous rows"))
    cluster = terms["distil"] + terms["entropy"]
    if w.stch_mu:  # a term switched off is 0 in Happy++'s stack, and still counts in the smooth max
        zero = out.z.new_zeros(())
        stack = [cluster, terms["contrastive"], *(terms.get(k, zero) for k in ("proto", "kd", "l2"))]
        return smooth_max(stack, w.stch_mu), terms
    extra = out.z.new_zeros(())
    for k in ("proto", "kd"):
        if k in terms:
            extra = extra + terms[k]
    loss = cluster + terms["contrastive"] + extra
    return (loss + terms["l2"] if "l2" in terms else loss), terms

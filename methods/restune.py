"""ResTune adapted to class-iNCD (docs/methods.md#restune).

The base encoder's last `unfreeze` blocks (2: blocks 10 and 11 of ViT-B/16, the code's g = 10) form
a trainable tail; from step 1 on, each step grows a residual branch: a copy of the pre-trained last
block with its own final norm, reading the tokens that enter the base's last block. At step t

    mix_s = base(x) + Σ_{1≤i≤s} branch_i(x)        (the cumulative mixed feature up to step s)
    res_t = branch_t(x)

and two cosine heads: head_mix^t (inference) and head_res^t (training only, from step 1 on).

1. warm-up (`warmup_epochs`): the encoder frozen, the step's heads train with the swapped Sinkhorn
   loss on mix_t and res_t (step 0: head_mix^0 on the base feature);
2. main (`epochs`): the base tail, every branch and the step's heads train with the same loss plus

       KD = Σ_{s<t} w_s · CE(softmax(h_old^s(mix_old_s(x¹)) / T), log_softmax(h_old^s(mix_s(x¹)) / T))

   with the model as it was at the end of step t − 1 (its encoder and heads, frozen) on view 1,
   T = 2, w_0 = 1 and w_s = β (`kd_weight`) for s ≥ 1, no T². The frozen old heads read the new
   features, so only the encoders get KD's gradient.

Inference: head_mix^s on mix_s for every step s, concatenated.
"""
from __future__ import annotations

import copy
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from bench.features.precision import autocast_for
from bench.features.tokens import rotary, run_block, vit_of
from bench.methods.base import REFITTED, RunsOn, Step, built
from bench.methods.blocks import SWAP_REDUCTIONS, CosineHead, clustering_scale, swapped_loss
from bench.methods.loop import train_epochs
from bench.methods.tails import SharesBackbone, Tail, TailMethod
from bench.registries import METHODS

# The code's branch norm is `nn.LayerNorm(768)`: PyTorch's default eps, where DINO's norms use 1e-6.
BRANCH_NORM_EPS = 1e-5


class ResidualBranch(SharesBackbone):
    """A grown block: a copy of the pre-trained last block and its own final norm (initialised from
    the backbone's final norm, eps 1e-5): tokens entering the last block in, pooled feature out,
    computed in `precision` on CUDA as the base tail."""

    def __init__(self, backbone: nn.Module, precision: str = "fp32") -> None:
        super().__init__()
        model = vit_of(backbone)
        self.block = copy.deepcopy(model.blocks[-1]).requires_grad_(True)
        self.norm = nn.LayerNorm(model.norm.normalized_shape, eps=BRANCH_NORM_EPS)
        self.norm.load_state_dict(model.norm.state_dict())
        self._finish = [model]  # pooling and the backbone's own head, shared and frozen
        self.precision = precision

    def forward(self, entry: torch.Tensor) -> torch.Tensor:
        model = self._finish[0]
        with autocast_for(entry.device, self.precision):
            x = run_block(model, len(model.blocks) - 1, self.block, entry, rotary(model, entry))
            return model.forward_head(self.norm(x)).float()


class ResidualEncoder(nn.Module):
    """The base tail and the branches grown so far."""

    def __init__(self, base: Tail, branches: list[ResidualBranch]) -> None:
        super().__init__()
        self.base, self.branches = base, nn.ModuleList(branches)

    def forward(self, tokens: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The mixed features mix_0 .. mix_n and the branches' outputs res_1 .. res_n."""
        entry, feature = self.base.entry_and_feature(tokens)
        residuals = [branch(entry) for branch in self.branches]
        mixes = [feature]
        for residual in residuals:
            mixes.append(mixes[-1] + residual)
        return mixes, residuals

    def frozen_copy(self) -> "ResidualEncoder":
        branches = [cast(ResidualBranch, copy.deepcopy(b)) for b in self.branches]
        for branch in branches:
            branch.requires_grad_(False)
        return ResidualEncoder(self.base.frozen_copy(), branches).eval()


def heads_swapped_loss(pairs: list[tuple[torch.Tensor, torch.Tensor]], hp: dict) -> torch.Tensor:
    """Several heads' swapped Sinkhorn losses (each a pair of the two views' logits) as one: `sum`
    adds them; `mean` is the code's one mean over all their concatenated rows, i.e. their average."""
    losses = torch.stack([swapped_loss(a, b, hp) for a, b in pairs])
    return losses.mean() if hp["swap_reduction"] == "mean" else losses.sum()


def restune_kd(student: list[torch.Tensor], teacher: list[torch.Tensor], old_heads: list[CosineHead],
               temperature: float, weight: float) -> torch.Tensor:
    """Σ_s w_s · CE(softmax(h^s(teacher_s)/T), log_softmax(h^s(student_s)/T)) over the old heads, w_0 = 1
    and w_s = `weight` after: the code's terms, unscaled by T²."""
    total = student[0].new_zeros(())
    for s, head in enumerate(old_heads):
        target = F.softmax(head(teacher[s]) / temperature, dim=1)
        term = -(target * F.log_softmax(head(student[s]) / temperature, dim=1)).sum(1).mean()
        total = total + (term if s == 0 else weight * term)
    return total


@METHODS.register_module(name="ResTune")
class ResTune(TailMethod):
    preset_file = "restune"
    runs_on = RunsOn(inputs="tokens")
    reported = REFITTED  # its tester re-fits each task's map at every evaluation from the current encoder
    hparam_choices = {"swap_reduction": SWAP_REDUCTIONS}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.heads_mix: list[CosineHead] = []
        self.heads_res: list[CosineHead | None] = []  # step 0 has none
        self._encoder: ResidualEncoder | None = None
        self._state: dict[str, Any] | None = None  # from a checkpoint, until the encoder is built

    @property
    def encoder(self) -> ResidualEncoder:
        if self._encoder is None:
            state = self._state or {"base": None, "branches": []}
            branches = [self._branch(s) for s in state["branches"]]
            self._encoder = ResidualEncoder(self.new_tail(state["base"]), branches).to(self.device).eval()
        return self._encoder

    def _branch(self, state: dict[str, torch.Tensor] | None = None) -> ResidualBranch:
        branch = ResidualBranch(built(self.backbone, "the backbone (bind)"), self.precision)
        if state is not None:
            branch.load_state_dict(state)
        return branch.to(self.device)

    def new_head(self, n_classes: int) -> CosineHead:
        return CosineHead(self.feature_dim, n_classes, self.hparams["normalize_weights"]).to(self.device)

    def learn(self, step: Step) -> None:
        hp, t = self.hparams, step.index
        encoder = self.encoder
        teacher = None
        if t > 0:  # the model at the end of the previous step, frozen, before this step grows it
            teacher = (encoder.frozen_copy(), [CosineHead.from_weight(h.weight, hp["normalize_weights"])
                                               .requires_grad_(False).eval() for h in self.heads_mix])
            encoder.branches.append(self._branch())
        heads = [self.new_head(step.n_classes)] + ([self.new_head(step.n_classes)] if t > 0 else [])
        self.heads_mix.append(heads[0])
        self.heads_res.append(heads[1] if t > 0 else None)
        gen = torch.Generator().manual_seed(self.seed * 1000 + 100 + step.index)
        sizes = [len(step.tokens)]

        def discovery(views: list[tuple[list[torch.Tensor], list[torch.Tensor]]]) -> torch.Tensor:
            """The swapped loss of head_mix^t on mix_t and, from step 1 on, head_res^t on res_t."""
            for head in heads:
                head.renormalize()
            pairs = [(heads[0](views[0][0][t]), heads[0](views[1][0][t]))]
            if t > 0:
                pairs.append((heads[1](views[0][1][t - 1]), heads[1](views[1][1][t - 1])))
            return heads_swapped_loss(pairs, hp)

        def warm_up(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            with torch.no_grad():  # the encoder is frozen during the warm-up
                views = [encoder(t1), encoder(t2)]
            return discovery(views)

        def main(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            views = [encoder(t1), encoder(t2)]
            loss = discovery(views)
            if teacher is not None:
                old_encoder, old_heads = teacher
                with torch.no_grad():  # the teacher reads the student's tokens: no second prefix pass
                    old_mixes, _ = old_encoder(t1)
                # KD's weights are in units of the code's one mean: they scale with a summed loss (2 heads)
                loss = loss + clustering_scale(hp, heads=2) * restune_kd(views[0][0], old_mixes, old_heads,
                                                                         hp["kd_temperature"], hp["kd_weight"])
            return loss

        encoder.eval()
        for head in heads:
            head.train()
        train_epochs([p for h in heads for p in h.parameters()], hp, epochs=hp["warmup_epochs"], sizes=sizes,
                     batch_size=hp["batch_size"], gen=gen, loss_of=warm_up, read_ahead=[step.tokens])
        encoder.train()
        train_epochs([*encoder.parameters(), *(p for h in heads for p in h.parameters())], hp, epochs=hp["epochs"],
                     sizes=sizes, batch_size=hp["batch_size"], gen=gen, loss_of=main, read_ahead=[step.tokens])
        encoder.eval()
        for head in heads:
            head.eval()

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        mixes, _ = self.encoder(x)
        return torch.cat([head(mix) for head, mix in zip(self.heads_mix, mixes)], dim=1)

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        mixes, _ = self.encoder(x)
        return self.heads_mix[task](mixes[task])

    def state_dict(self) -> dict[str, Any]:
        encoder = self.encoder
        return {"base": encoder.base.trainable_state(),
                "branches": [{k: v.detach().cpu().clone() for k, v in b.state_dict().items()} for b in encoder.branches],
                "heads_mix": [h.weight.detach().cpu().clone() for h in self.heads_mix],
                "heads_res": [None if h is None else h.weight.detach().cpu().clone() for h in self.heads_res]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._encoder, self._state = None, {"base": state["base"], "branches": state["branches"]}
        normalize = self.hparams["normalize_weights"]
        self.heads_mix = [CosineHead.from_weight(w.to(self.device), normalize).eval() for w in state["heads_mix"]]
        self.heads_res = [None if w is None else CosineHead.from_weight(w.to(self.device), normalize).eval()
                          for w in state["heads_res"]]

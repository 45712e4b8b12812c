"""The incremental-learning methods adapted to class-iNCD (EwC, LwF, DER; docs/methods.md#adapted-il-methods): what
they share, written once.

At every step t a new cosine head h^t is trained in two stages, each a fresh SGD with its own cosine
schedule (docs/methods.md#epoch-loop):

1. warm-up: the encoder frozen (the current tail, not only the pre-trained one: from step 1 on it has
   been fine-tuned), h^t alone with the swapped Sinkhorn loss for `warmup_epochs`;
2. main: the tail (the last `unfreeze` blocks) and h^t (LwF and DER: every head) train with the
   swapped Sinkhorn loss on h^t plus the method's regulariser, for `epochs`; the trained heads'
   weights are normalised every batch. The regulariser's weight was tuned against the code's mean
   over the two views: with the views summed (`equations`) it doubles (`clustering_scale`).

Inference: the current tail, then every step's head, concatenated. A method file supplies only its
regulariser (`regulariser`), what it keeps (`end_step`, `state_dict`) and, for DER, what it observes.
"""
from __future__ import annotations

from typing import Any

import torch

from bench.methods.base import REFITTED, Step
from bench.methods.blocks import SWAP_REDUCTIONS, CosineHead, clustering_scale, swapped_loss
from bench.methods.loop import train_epochs
from bench.methods.tails import OneTail, OneTailHeads


class FineTunedIL(OneTail, OneTailHeads):
    reported = REFITTED  # the authors' EwC, LwF and DER testers re-fit each task's map at every evaluation
    trains_old_heads = False  # LwF and DER put every head in the main stage's optimiser; EwC only h^t
    hparam_choices = {"swap_reduction": SWAP_REDUCTIONS}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.heads: list[CosineHead] = []

    def new_head(self, n_classes: int) -> CosineHead:
        return CosineHead(self.feature_dim, n_classes, self.hparams["normalize_weights"])

    # --- what a method adds ------------------------------------------------------------------------
    def begin_step(self, step: Step) -> None:
        """Before the warm-up (LwF takes its teacher here)."""

    def observe(self, step: Step, index: torch.Tensor, logits1: torch.Tensor) -> None:
        """Every batch of both stages: h^t's logits on view 1 of the step's images `index` (DER)."""

    def regulariser(self, step: Step, tokens1: torch.Tensor, features1: torch.Tensor,
                    gen: torch.Generator) -> torch.Tensor:
        """The main stage's not-forgetting term for one batch (view 1's prefix tokens and features)."""
        return features1.new_zeros(())

    def end_step(self, step: Step) -> None:
        """After the main stage (EwC's Fisher)."""

    # --- the procedure -----------------------------------------------------------------------------
    def learn(self, step: Step) -> None:
        hp, tail = self.hparams, self.tail
        self.begin_step(step)
        head = self.new_head(step.n_classes).to(step.device)
        self.heads.append(head)
        gen = torch.Generator().manual_seed(self.seed * 1000 + 100 + step.index)
        sizes = [len(step.tokens)]

        def warm_up(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            with torch.no_grad():  # the encoder is frozen during the warm-up
                z1, z2 = tail(t1), tail(t2)
            head.renormalize()
            logits1 = head(z1)
            self.observe(step, index[0], logits1)
            return swapped_loss(logits1, head(z2), hp)

        tail.eval(), head.train()
        train_epochs(head.parameters(), hp, epochs=hp["warmup_epochs"], sizes=sizes, batch_size=hp["batch_size"],
                     gen=gen, loss_of=warm_up, read_ahead=[step.tokens])

        trained = self.heads if self.trains_old_heads else [head]

        def main(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            for h in trained:
                h.renormalize()
            z1, z2 = tail(t1), tail(t2)
            logits1 = head(z1)
            self.observe(step, index[0], logits1)
            # the regulariser's weight is in units of the code's mean loss: it scales with a summed one
            return swapped_loss(logits1, head(z2), hp) + clustering_scale(hp) * self.regulariser(step, t1, z1, gen)

        tail.train()
        for h in trained:
            h.train()
        train_epochs([*tail.parameters(), *(p for h in trained for p in h.parameters())], hp, epochs=hp["epochs"],
                     sizes=sizes, batch_size=hp["batch_size"], gen=gen, loss_of=main, read_ahead=[step.tokens])
        self.end_step(step)
        tail.eval()
        for h in self.heads:
            h.eval()

    def state_dict(self) -> dict[str, Any]:
        return {"tail": self.tail.trainable_state(), "heads": [h.weight.detach().cpu().clone() for h in self.heads]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.restore_tail(state["tail"])
        normalize = self.hparams["normalize_weights"]
        self.heads = [CosineHead.from_weight(w.to(self.device), normalize).eval() for w in state["heads"]]

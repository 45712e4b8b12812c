"""Continual SimGCD: the parametric GCD learner (SimGCD, Wen et al. ICCV'23) fine-tuned step after step, the row
the continual category discovery tables start from (docs/methods.md#simgcd-continual). The mixed setting only: its first step
is learned with labels.

The model is the last ViT block (a tail, `methods.tails`), a projector φ (`methods.gcd_losses.Projector`) and one
cosine classifier W over every class so far (`NormedHead`); z is the tail's feature, s = W·z its cosine logits,
τ_s the student temperature, on two views of each image of a batch (`methods.gcd_losses` has each term):

    labelled step (labels y):  L = (1 − λ)·(L_distil + ε·(log K − H(p̄)) + L_con) + λ·(L_ce + L_supcon),
                                τ_t warming from `teacher_warmup` to `teacher` over `teacher_warmup_epochs`
    step t > 0 (no label):     W grows by the step's K_new rows (fresh, or `initial_rows`); φ is drawn afresh;
                                L = L_distil + ε·(log K − H(p̄)) + L_con      (Happy's `weights` add its terms)
    predict: argmax_c s_c over every class so far

The per-batch loss is `methods.gcd_objective.objective`, handed the step's `weights`; every random draw of a step
(the fresh head rows, φ, the loader's orders and views, Happy's samples and k-means) comes from the one `Draws` made
at its start from the run's seed and the step's index (`methods.draws`), never from a global generator.

Each step is its own SGD (momentum, weight decay but none on biases and 1-D weights) with a cosine schedule from
its `lr` to lr·`eta_min_ratio`, stepped after each epoch, as Happy-CGCD's `train_happy.py`, whose steps this follows
with Happy's parts off and SimGCD's global entropy term on (Happy's code comments it out; Happy is `methods.happy`).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from bench.errors import BenchError
from bench.methods.base import RunsOn, Step, built
from bench.methods.draws import Draws
from bench.methods.gcd_losses import NormedHead, Projector
from bench.methods.gcd_objective import Outputs, Past, Weights, objective
from bench.methods.loop import cosine_after_epoch, parameter_groups, train_epochs
from bench.methods.tails import OneTail
from bench.registries import METHODS


@METHODS.register_module(name="SimGCD (continual)")
class ContinualSimGCD(OneTail):
    preset_file = "simgcd"
    runs_on = RunsOn(inputs="tokens", settings=("mixed",))

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        own = self.hparams.get("labelled_memax_weight")
        if own is not None and (isinstance(own, bool) or not isinstance(own, (int, float)) or not own >= 0):
            raise BenchError(f"bad config value method.labelled_memax_weight={own!r}: must be None (the labelled "
                             "step takes method.memax_weight) or a number >= 0")
        self.head: NormedHead | None = None

    # --- what Happy and Happy++ change ------------------------------------------------------------------
    def initial_rows(self, step: Step, draws: Draws) -> torch.Tensor | None:
        """The new classes' first rows (K_new × D), or None for fresh ones."""
        return None

    def weights(self, step: Step) -> Weights:
        """The step's weights of the objective (`methods.gcd_objective`): SimGCD's terms; the labelled step's ε is
        `labelled_memax_weight` where set (SimGCD's own runs: the `simgcd_offline` preset)."""
        hp = self.hparams
        labelled = step.labels is not None
        own = hp.get("labelled_memax_weight") if labelled else None
        teacher = ((hp["labelled_teacher_warmup"], hp["labelled_teacher"], hp["labelled_teacher_epochs"])
                   if labelled else (hp["teacher"], hp["teacher"], 0))
        return Weights(student_temperature=hp["student_temperature"],
                       teacher=(*teacher, hp["labelled_epochs"] if labelled else hp["epochs"]),
                       info_nce_temperature=hp["info_nce_temperature"],
                       memax=hp["memax_weight"] if own is None else own,
                       sup_weight=hp["sup_weight"], supcon_temperature=hp["supcon_temperature"])

    def past(self, step: Step) -> Past:
        """What an unlabelled step's objective reads of the steps before it."""
        return Past(known=step.offset)

    def previous_features(self, views: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor | None:
        """The previous step's tail on a batch's views, where the objective reads it (Happy's L_kd)."""
        return None

    def end_step(self, step: Step) -> None:
        """After a step's training (and its epoch selection)."""

    def unlabelled_lr(self, epochs: int, lr: float) -> Callable[[int], float]:
        """An unlabelled step's learning rate at each epoch."""
        return lambda e: cosine_after_epoch(e, epochs, lr, lr * self.hparams["eta_min_ratio"])

    def training_hooks(self, step: Step, modules: list[nn.Module]) -> tuple[Callable[[], None] | None,
                                                                            Callable[[int], None] | None]:
        """What runs after each optimiser step, and after each epoch before its selection scores it."""
        return None, None

    # --- the procedure -----------------------------------------------------------------------------------
    def learn(self, step: Step) -> None:
        hp, tail = self.hparams, self.tail
        labelled = step.labels is not None
        draws = Draws.of(self.seed, step.index)  # every draw of the step comes from here (methods.draws)
        if self.head is None:
            self.head = NormedHead(self.feature_dim, step.n_classes, draws.init).to(self.device)
        else:
            self.head = self.head.grown(step.n_classes, draws.init)
            rows = self.initial_rows(step, draws)
            if rows is not None:  # directions only: the rows keep the norm fresh rows have (their gradient scale)
                with torch.no_grad():
                    fresh = self.head.weight[step.offset:]
                    fresh.copy_(rows.to(fresh) * fresh.norm(dim=1).mean())
        head = self.head
        projector = Projector(self.feature_dim, hp["proj_hidden_dim"], hp["proj_dim"], draws.init).to(self.device)
        epochs = hp["labelled_epochs"] if labelled else hp["epochs"]
        lr = hp["labelled_lr"] if labelled else hp["lr"]
        weights, past = self.weights(step), (None if labelled else self.past(step))
        labels = step.labels.to(self.device) if step.labels is not None else None
        epoch_now = [0]

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], draws.train)
            z = torch.cat([tail(t1), tail(t2)])
            out = Outputs(z, head(z), projector(z), None if labelled else self.previous_features((t1, t2)))
            y = labels[index[0].to(labels.device)] if labels is not None else None
            return objective(out, y, weights, epoch_now[0], draws.train, head, past)[0]

        def on_epoch(epoch: int) -> None:
            epoch_now[0] = epoch

        tail.train(), head.train(), projector.train()
        modules = [tail, head, projector]
        loop_hp = {"lr": lr, "momentum": hp["momentum"], "weight_decay": hp["weight_decay"], "eta_min": 0.0}
        lr_at = (self.unlabelled_lr(epochs, lr) if not labelled
                 else lambda e: cosine_after_epoch(e, epochs, lr, lr * hp["eta_min_ratio"]))
        after_step, epoch_end = (None, None) if labelled else self.training_hooks(step, modules)
        with step.selection.over([*tail.parameters(), *head.parameters()], self.logits, [tail, head]) as select:
            after_epoch = select if epoch_end is None else _chained(epoch_end, select)
            train_epochs(parameter_groups(modules, hp["weight_decay"]), loop_hp, epochs=epochs, sizes=[len(step.tokens)],
                         batch_size=hp["batch_size"], gen=draws.train, loss_of=loss_of, drop_last=True, lr_at=lr_at,
                         on_epoch=on_epoch, after_step=after_step, read_ahead=[step.tokens], after_epoch=after_epoch)
        tail.eval(), head.eval()
        self.end_step(step)

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return built(self.head, "the head")(self.tail(x))

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(x)

    def state_dict(self) -> dict[str, Any]:
        return {"tail": self.tail.trainable_state(), "head": built(self.head, "the head").weight.detach().cpu().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.restore_tail(state["tail"])
        weight = state["head"]
        self.head = NormedHead(weight.shape[1], weight.shape[0]).to(self.device)
        self.head.weight.data.copy_(weight.to(self.device))
        self.head.eval()


def _chained(first: Callable[[int], None], then: Callable[[int], None] | None) -> Callable[[int], None]:
    def both(epoch: int) -> None:
        first(epoch)
        if then is not None:
            then(epoch)
    return both

"""Joint (unfrozen), the upper reference (docs/methods.md#joint-unfrozen): the last transformer block trains.

Stage 1, at step t: a fresh pre-trained tail (the last block) and a head warm-started from the
Baseline head h^t ("saturate the classifier first, then unfreeze") are trained with the swapped
Sinkhorn loss on step t's images. Stage 2: a fresh tail and a joint head initialised from the
concatenated stage-1 heads are trained on zipped batches of every step's images, each pseudo-labelled
by its own stage-1 (tail, head) pair on the same prefix tokens. A reference method: it sees earlier
steps' images. The task-agnostic mapping of step s comes from its stage-1 pair.
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from bench.methods.base import RunsOn, Step, built
from bench.methods.baseline import Baseline
from bench.methods.blocks import CosineHead, concatenated_head, hard_cross_entropy, swapped_loss
from bench.methods.loop import train_epochs
from bench.methods.tails import PairedTails, Tail, TeacherLabels
from bench.registries import METHODS

Pair = tuple[dict[str, torch.Tensor], torch.Tensor]  # (tail blocks' weights, head weight)


@METHODS.register_module(name="Joint (unfrozen)")
class JointUnfrozen(PairedTails, Baseline):
    preset_file = "joint_unfrozen"
    # a reference on every step seen so far; its Baseline head h^t warms up on frozen features (step.train)
    runs_on = RunsOn(inputs="tokens", sees_past_steps=True, warms_up_on_features=True)

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.stage1: list[Pair] = []
        self.stage2: Pair | None = None
        self._models: dict[Any, tuple[Tail, CosineHead]] = {}

    def _model(self, key: Any) -> tuple[Tail, CosineHead]:
        """The (tail, head) pair of stage 1 of step `key`, or of stage 2 for key "joint"."""
        if key not in self._models:
            blocks, weight = built(self.stage2, "stage 2's pair") if key == "joint" else self.stage1[key]
            self._models[key] = (self.new_tail(blocks).eval(), CosineHead.from_weight(weight.to(self.device)).eval())
        return self._models[key]

    def learn(self, step: Step) -> None:
        super().learn(step)  # the Baseline head h^t on frozen features: stage 1's warm start
        self.stage1.append(self._stage1(step))
        self.stage2 = self._stage2(step)
        self._models.clear()

    def _stage1(self, step: Step) -> Pair:
        hp = self.hparams
        tail = self.new_tail().train()
        head = concatenated_head([self.heads[step.index]], True).train()
        gen = torch.Generator().manual_seed(self.seed * 1000 + 800 + step.index)

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            head.renormalize()
            return swapped_loss(head(tail(t1)), head(tail(t2)), hp)

        train_epochs([*tail.parameters(), *head.parameters()], hp, epochs=hp["stage1_epochs"], sizes=[len(step.tokens)],
                     batch_size=hp["stage1_batch_size"], gen=gen, loss_of=loss_of, read_ahead=[step.tokens])
        return tail.trainable_state(), head.weight.detach().cpu().clone()

    def _stage2(self, step: Step) -> Pair:
        hp = self.hparams
        sources = [*step.past_tokens, step.tokens]
        teachers = [self._model(s) for s in range(step.index + 1)]  # stage 1 of this step is stored already
        offsets = torch.tensor([0] + [w.shape[0] for _, w in self.stage1]).cumsum(0).tolist()
        tail = self.new_tail().train()
        joint = concatenated_head([head for _, head in teachers], True).train()
        gen = torch.Generator().manual_seed(self.seed * 1000 + 900 + step.index)

        # each step's images labelled by their own stage-1 pair, on the student's tokens (one prefix
        # pass per view; on a token bank each stored view is labelled once, here)
        def label_of(t: torch.Tensor, s: int) -> torch.Tensor:  # step s's images by step s's own pair
            return teachers[s][1](teachers[s][0](t)).argmax(1) + offsets[s]

        labelled = [TeacherLabels(source, functools.partial(label_of, s=s), hp["stage2_batch_size"])
                    for s, source in enumerate(sources)]

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            tokens, labels = [], []
            for views, rows in zip(labelled, index):
                t1, t2, y1, y2 = views.two_views(rows, gen)
                tokens += [t1, t2]
                labels += [y1, y2]
            joint.renormalize()
            return hard_cross_entropy(joint(tail(torch.cat(tokens))), torch.cat(labels), hp["temperature"])

        train_epochs([*tail.parameters(), *joint.parameters()], hp, epochs=hp["stage2_epochs"],
                     sizes=[len(s) for s in sources], batch_size=hp["stage2_batch_size"], gen=gen, loss_of=loss_of,
                     read_ahead=sources)
        return tail.trainable_state(), joint.weight.detach().cpu().clone()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "stage1": self.stage1, "stage2": self.stage2}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.stage1, self.stage2 = list(state["stage1"]), state["stage2"]
        self._models.clear()

"""Joint (frozen), the upper reference (docs/methods.md#joint-frozen).

Like Baseline++ but with the real data of every step instead of replay: at step t the Baseline head
h^t is trained on the current step, then a unified student head (initialised from the Baseline heads
h^1..h^t) is trained on zipped batches of every step's data, each step's images pseudo-labelled by
that step's own head. A reference method: it sees earlier steps' data.
"""
from __future__ import annotations


import torch

from bench.methods.base import RunsOn, Step
from bench.methods.baseline import WithStudent
from bench.methods.blocks import CosineHead, concatenated_head, hard_cross_entropy
from bench.methods.loop import train_epochs
from bench.registries import METHODS


@METHODS.register_module(name="Joint (frozen)")
class JointFrozen(WithStudent):
    preset_file = "joint_frozen"
    # a reference: trains on every step seen so far; only its student (a copy of the heads) does, h^s stay as trained
    runs_on = RunsOn(sees_past_steps=True, settings=("incd", "mixed"), frozen_task_heads=True)

    def learn(self, step: Step) -> None:
        super().learn(step)
        self.student = self._joint(step)

    def _joint(self, step: Step) -> CosineHead:
        hp = self.hparams
        student = concatenated_head(self.heads, normalize_weights=True).to(step.device)
        datasets = [*step.past, step.features]
        offsets = torch.tensor([0] + [h.weight.shape[0] for h in self.heads]).cumsum(0).tolist()
        gen = torch.Generator().manual_seed(self.seed * 1000 + 700 + step.index)

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            xs, ys = [], []
            for s, (data, rows) in enumerate(zip(datasets, index)):
                x1, x2 = data.two_views(rows, gen)
                with torch.no_grad():  # each step's images labelled by that step's own head
                    ys += [self.heads[s](x1).argmax(1) + offsets[s], self.heads[s](x2).argmax(1) + offsets[s]]
                xs += [x1, x2]
            student.renormalize()
            return hard_cross_entropy(student(torch.cat(xs)), torch.cat(ys), hp["temperature"])

        student.train()
        with step.selection.over(student.parameters(), student, [student]) as after_epoch:
            train_epochs(student.parameters(), hp, epochs=hp["joint_epochs"], sizes=[len(d) for d in datasets],
                         batch_size=hp["joint_batch_size"], gen=gen, loss_of=loss_of, after_epoch=after_epoch)
        return student.eval()

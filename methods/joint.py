"""Joint (frozen), the upper reference of methods-spec §3.4.

Like Baseline++ but with the real data of every step instead of replay: at step t the Baseline head
h^t is trained on the current step, then a unified student head (initialised from the Baseline heads
h^1..h^t) is trained on zipped batches of every step's data, each step's images pseudo-labelled by
that step's own head. A reference method: it sees earlier steps' data.
"""
from __future__ import annotations


import torch

from methods.base import Step
from methods.baseline import WithStudent
from methods.blocks import CosineHead, concatenated_head, cosine_lr, hard_cross_entropy
from registries import METHODS


@METHODS.register_module(name="Joint (frozen)")
class JointFrozen(WithStudent):
    preset_file = "joint_frozen"
    sees_past_steps = True

    def learn(self, step: Step) -> None:
        super().learn(step)
        self.student = self._joint(step)

    def _joint(self, step: Step) -> CosineHead:
        hp = self.hparams
        student = concatenated_head(self.heads, normalize_weights=True).to(step.device)
        datasets = [*step.past, step.train]
        offsets = torch.tensor([0] + [h.weight.shape[0] for h in self.heads]).cumsum(0).tolist()
        opt = torch.optim.SGD(student.parameters(), lr=hp["lr"], momentum=hp["momentum"],
                              weight_decay=hp["weight_decay"])
        gen = torch.Generator().manual_seed(self.seed * 1000 + 700 + step.index)
        batch, epochs = hp["joint_batch_size"], hp["joint_epochs"]
        # zipped loaders: an epoch has as many iterations as the shortest task loader (drop_last=False)
        iterations = min(-(-len(d) // batch) for d in datasets)
        student.train()
        for epoch in range(epochs):
            for group in opt.param_groups:
                group["lr"] = cosine_lr(epoch, epochs, hp["lr"], hp["eta_min"])
            orders = [torch.randperm(len(d), generator=gen) for d in datasets]
            for it in range(iterations):
                xs, ys = [], []
                for s, (data, order) in enumerate(zip(datasets, orders)):
                    x1, x2 = data.two_views(order[it * batch: (it + 1) * batch], gen)
                    with torch.no_grad():
                        head = self.heads[s]
                        ys += [head(x1).argmax(1) + offsets[s], head(x2).argmax(1) + offsets[s]]
                    xs += [x1, x2]
                student.renormalize()
                loss = hard_cross_entropy(student(torch.cat(xs)), torch.cat(ys), hp["temperature"])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return student.eval()

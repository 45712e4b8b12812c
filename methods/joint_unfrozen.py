"""Joint (unfrozen), the upper reference of methods-spec §3.5: the last transformer block trains.

Stage 1, at step t: a copy of the pre-trained ViT with its last block trainable and a head warm-started
from the Baseline head h^t ("saturate the classifier first, then unfreeze") are trained with the
swapped Sinkhorn loss on step t's images. Stage 2: a fresh copy (last block trainable) and a joint
head initialised from the concatenated stage-1 heads are trained on zipped batches of every step's
images, each pseudo-labelled by its own stage-1 (backbone, head) pair. A reference method: it sees
earlier steps' images. The task-agnostic mapping of step s comes from its stage-1 pair.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from methods.base import Step
from methods.baseline import Baseline
from methods.blocks import (CosineHead, LastBlocksTrainable, concatenated_head, cosine_lr, hard_cross_entropy,
                            swapped_prediction_loss)
from registries import METHODS


@METHODS.register_module(name="Joint (unfrozen)")
class JointUnfrozen(Baseline):
    inputs = "images"
    sees_past_steps = True
    preset_file = "joint_unfrozen"

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.frozen_backbone: nn.Module | None = None  # set by the runner: the pre-trained backbone to copy
        self.stage1: list[tuple[dict[str, torch.Tensor], torch.Tensor]] = []
        self.stage2: tuple[dict[str, torch.Tensor], torch.Tensor] | None = None
        self._models: dict[Any, tuple[LastBlocksTrainable, CosineHead]] = {}

    def _model(self, key: Any) -> tuple[LastBlocksTrainable, CosineHead]:
        """The (backbone, head) pair of stage 1 of step `key`, or of stage 2 for key "joint"."""
        if key not in self._models:
            blocks, weight = self.stage2 if key == "joint" else self.stage1[key]
            net = LastBlocksTrainable(self.frozen_backbone, self.hparams["unfreeze"])
            net.load_trainable_state(blocks)
            head = CosineHead(weight.shape[1], weight.shape[0], True)
            head.weight.data.copy_(weight)
            device = next(self.frozen_backbone.parameters()).device
            self._models[key] = (net.to(device).eval(), head.to(device).eval())
        return self._models[key]

    def _optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        hp = self.hparams
        return torch.optim.SGD(params, lr=hp["lr"], momentum=hp["momentum"], weight_decay=hp["weight_decay"])

    def learn(self, step: Step) -> None:
        if step.images is None or step.backbone is None:
            raise RuntimeError("Joint (unfrozen) needs the step's images and the backbone (inputs = 'images')")
        self.frozen_backbone = step.backbone
        super().learn(step)  # the Baseline head h^t on frozen features: stage 1's warm start
        self.stage1.append(self._stage1(step))
        self.stage2 = self._stage2(step)
        self._models.clear()

    def _stage1(self, step: Step) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        hp = self.hparams
        net = LastBlocksTrainable(step.backbone, hp["unfreeze"]).to(step.device).train()
        head = concatenated_head([self.heads[step.index]], True).train()
        opt = self._optimizer(net.trainable_parameters() + list(head.parameters()))
        gen = torch.Generator().manual_seed(self.seed * 1000 + 800 + step.index)
        n, epochs, batch = len(step.images), hp["stage1_epochs"], hp["stage1_batch_size"]
        for epoch in range(epochs):
            opt.param_groups[0]["lr"] = cosine_lr(epoch, epochs, hp["lr"], hp["eta_min"])
            order = torch.randperm(n, generator=gen)
            for start in range(0, n, batch):
                x1, x2 = step.images.two_views(order[start: start + batch], gen)
                head.renormalize()
                loss = swapped_prediction_loss(head(net(x1)), head(net(x2)), hp["temperature"], hp["sk_epsilon"],
                                               hp["sk_iters"], reduction=hp["swap_reduction"])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return net.trainable_state(), head.weight.detach().cpu().clone()

    def _stage2(self, step: Step) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        hp = self.hparams
        sources = [*step.past_images, step.images]
        teachers = [self._model(s) for s in range(step.index + 1)]  # stage 1 of this step is stored already
        offsets = torch.tensor([0] + [w.shape[0] for _, w in self.stage1]).cumsum(0).tolist()
        net = LastBlocksTrainable(step.backbone, hp["unfreeze"]).to(step.device).train()
        joint = concatenated_head([teacher[1] for teacher in teachers], True).train()
        opt = self._optimizer(net.trainable_parameters() + list(joint.parameters()))
        gen = torch.Generator().manual_seed(self.seed * 1000 + 900 + step.index)
        batch, epochs = hp["stage2_batch_size"], hp["stage2_epochs"]
        iterations = min(-(-len(s) // batch) for s in sources)  # zipped loaders: the shortest decides
        for epoch in range(epochs):
            opt.param_groups[0]["lr"] = cosine_lr(epoch, epochs, hp["lr"], hp["eta_min"])
            orders = [torch.randperm(len(s), generator=gen) for s in sources]
            for it in range(iterations):
                xs, ys = [], []
                for s, (source, order) in enumerate(zip(sources, orders)):
                    x1, x2 = source.two_views(order[it * batch: (it + 1) * batch], gen)
                    teacher_net, teacher_head = teachers[s]
                    with torch.no_grad():
                        ys += [teacher_head(teacher_net(x)).argmax(1) + offsets[s] for x in (x1, x2)]
                    xs += [x1, x2]
                joint.renormalize()
                loss = hard_cross_entropy(joint(net(torch.cat(xs))), torch.cat(ys), hp["temperature"])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return net.trainable_state(), joint.weight.detach().cpu().clone()

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        net, head = self._model("joint")
        return head(net(x))

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        net, head = self._model(task)
        return head(net(x))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "stage1": self.stage1, "stage2": self.stage2}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.stage1, self.stage2 = list(state["stage1"]), state["stage2"]
        self._models.clear()

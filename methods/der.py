"""DER adapted to class-iNCD (docs/methods.md#der; DER, not DER++): the warm-up and
main stages of `methods.finetuned`, every head training in the main stage, plus one reservoir buffer
per step but the last of (un-augmented image, h^s's logits on view 1 when it was seen), filled during
both stages of step s, and in the main stage of every later step, per earlier step s:

    L = L_SK(h^t) + α · Σ_{s<t} MSE(h^s(g(aug(x_buf))), z_buf)        α = 0.5

where `batch_size` buffer images are drawn and re-augmented on the device (no PIL round trip); on a
token bank the buffer keeps the images' rows and a replayed image is one of its stored views. The
buffers are part of the state, so a resumed run replays the same images.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bench.methods.base import RunsOn, Step
from bench.methods.buffers import ReservoirBuffer
from bench.methods.finetuned import FineTunedIL
from bench.registries import METHODS


@METHODS.register_module(name="DER")
class DER(FineTunedIL):
    preset_file = "der"
    runs_on = RunsOn(inputs="tokens")
    trains_old_heads = True

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.buffers: list[ReservoirBuffer] = []
        self._gen = torch.Generator()

    def begin_step(self, step: Step) -> None:
        # the buffers' own draws (reservoir slots, replay samples, their views), seeded per step so that a
        # resumed run draws the same
        self._gen = torch.Generator().manual_seed(self.seed * 1000 + 300 + step.index)
        self.buffers = self.buffers[: step.index]
        if not step.last:  # the last step needs no buffer: nothing comes after it
            self.buffers.append(ReservoirBuffer(self.hparams["buffer_size"]))

    def observe(self, step: Step, index: torch.Tensor, logits1: torch.Tensor) -> None:
        if step.last:
            return
        buffer = self.buffers[step.index]
        positions, slots = buffer.offer(len(index), self._gen)
        if positions:  # load (decode) only the images the reservoir keeps
            buffer.store(slots, step.tokens.keep(index[positions]), logits1[positions])

    def regulariser(self, step: Step, tokens1: torch.Tensor, features1: torch.Tensor,
                    gen: torch.Generator) -> torch.Tensor:
        terms = []
        for s in range(step.index):
            images, logits = self.buffers[s].sample(self.hparams["batch_size"], self._gen)
            replayed = self.heads[s](self.tail(step.tokens.views_of(images, self._gen)))
            terms.append(F.mse_loss(replayed, logits.to(replayed.device)))  # a resumed buffer is on the CPU
        return self.hparams["der_alpha"] * torch.stack(terms).sum() if terms else features1.new_zeros(())

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "buffers": [b.state_dict() for b in self.buffers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.buffers = [ReservoirBuffer.from_state(b) for b in state["buffers"]]

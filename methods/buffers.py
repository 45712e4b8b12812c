"""Replay buffers: what rehearsal methods keep of earlier steps' images (DER)."""
from __future__ import annotations

from typing import Any

import torch

from bench.methods.base import built


class ReservoirBuffer:
    """At most `size` (image, logits) pairs, a uniform sample of every pair ever offered (reservoir
    sampling, Vitter's algorithm R, as Mammoth's `reservoir`): the n-th pair takes a free slot while
    there is one, later replaces a random slot with probability size/n. Images are kept as the token
    source's `keep` gives them (the dataset's uint8 H×W×C, un-augmented, or a token bank's rows);
    draws come from the caller's generator."""

    def __init__(self, size: int) -> None:
        self.size, self.seen = size, 0
        self.images: torch.Tensor | None = None
        self.logits: torch.Tensor | None = None

    def __len__(self) -> int:
        return min(self.seen, self.size)

    def offer(self, n: int, gen: torch.Generator) -> tuple[list[int], list[int]]:
        """Offer `n` more pairs: which of them (positions 0..n-1) are kept, and in which slots. Only
        those need loading: once the buffer is full, few are."""
        positions, slots = [], []
        for position in range(n):
            slot = self.seen if self.seen < self.size else int(torch.randint(0, self.seen + 1, (1,), generator=gen))
            if slot < self.size:
                positions.append(position)
                slots.append(slot)
            self.seen += 1
        return positions, slots

    def store(self, slots: list[int], images: torch.Tensor, logits: torch.Tensor) -> None:
        """Put the kept pairs in their slots, in order (a later pair of the same batch wins a slot)."""
        if self.images is None or self.logits is None:
            self.images = images.new_empty((self.size, *images.shape[1:]))
            self.logits = logits.new_empty((self.size, *logits.shape[1:]))
        stored_images, stored_logits = self.images, self.logits
        for slot, image, logit in zip(slots, images, logits.detach()):
            stored_images[slot], stored_logits[slot] = image, logit

    def add(self, images: torch.Tensor, logits: torch.Tensor, gen: torch.Generator) -> None:
        positions, slots = self.offer(len(images), gen)
        self.store(slots, images[positions], logits[positions])

    def sample(self, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`min(n, len)` distinct stored pairs, uniformly."""
        index = torch.randperm(len(self), generator=gen)[:n]
        images, logits = built(self.images, "the buffer"), built(self.logits, "the buffer")
        return images[index], logits[index.to(logits.device)]

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "seen": self.seen,
                "images": None if self.images is None else self.images[: len(self)].cpu(),
                "logits": None if self.logits is None else self.logits[: len(self)].cpu()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ReservoirBuffer":
        buffer = cls(state["size"])
        buffer.seen = state["seen"]
        if state["images"] is not None:
            buffer.images = state["images"].new_empty((buffer.size, *state["images"].shape[1:]))
            buffer.logits = state["logits"].new_empty((buffer.size, *state["logits"].shape[1:]))
            buffer.images[: len(buffer)], buffer.logits[: len(buffer)] = state["images"], state["logits"]
        return buffer

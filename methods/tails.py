"""Trainable tails: the last blocks of a ViT on top of the shared frozen prefix (`bench.features.tokens`).

A `Tail` owns copies of blocks[g:] only; the final norm and the backbone's own head (identity, or
CLIP's 512-d projection) stay frozen and are read from the backbone, never copied. On CUDA a tail
computes in its `precision` (the run's `precision.tails`: fp32 as the authors trained, or bf16
autocast); heads, projectors and losses take its fp32 output. Its state is the
blocks' weights (7M parameters per ViT-B block): snapshots, teachers and checkpoints store that,
never a whole ViT. `TailMethod` is the base of the methods that train tails.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from bench.features.precision import autocast_for
from bench.features.tokens import first_trainable_block, rotary, run_block, vit_of
from bench.methods.base import Method, RunsOn, built


class SharesBackbone(nn.Module):
    """A module that reads the frozen backbone through `self._finish` (a list, which keeps the backbone
    out of its parameters and state): its copies share that backbone, never copy it."""

    _finish: list[Any]  # the frozen ViT, read by its attributes' names (`bench.features.tokens`)

    def __deepcopy__(self, memo: dict) -> "SharesBackbone":
        memo[id(self._finish)] = self._finish
        twin = self.__class__.__new__(self.__class__)
        memo[id(self)] = twin
        twin.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return twin


class Tail(SharesBackbone):
    """blocks[first:] of a ViT backbone as trainable copies, then its frozen norm and head:
    prefix tokens in, the backbone's own feature out (fp32), computed in `precision` on CUDA."""

    def __init__(self, backbone: nn.Module, first: int, precision: str = "fp32") -> None:
        super().__init__()
        model = vit_of(backbone)
        self.blocks = copy.deepcopy(model.blocks[first:]).requires_grad_(True)
        self.first = first  # the index of its first block in the backbone (an Eva's rotary embedding is per block)
        self._finish = [model]
        self.precision = precision  # copies (teachers, targets, snapshots) compute as their original

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.entry_and_feature(tokens)[1]

    def entry_and_feature(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The tokens entering the last block (what ResTune's residual branches read) and the feature."""
        model = self._finish[0]
        rope = rotary(model, tokens)
        with autocast_for(tokens.device, self.precision):
            x = tokens
            for index, block in enumerate(self.blocks[:-1], start=self.first):
                x = run_block(model, index, block, x, rope)
            return x, self.finish(run_block(model, len(model.blocks) - 1, self.blocks[-1], x, rope))

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """The backbone's frozen final norm, pooling and own head on the last block's tokens: at least fp32 (an
        autocast bf16 output is widened for the heads and losses; a float64 tail, as the checks against the authors'
        code run it, stays float64: narrowing it made two chained Happy steps drift 3.9e-5 instead of 2.2e-7)."""
        model = self._finish[0]
        with autocast_for(x.device, self.precision):
            out = model.forward_head(model.norm(x))
        return out if out.dtype == torch.float64 else out.float()

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self.blocks.state_dict().items()}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> "Tail":
        self.blocks.load_state_dict(state)
        return self

    def frozen_copy(self) -> "Tail":
        """A teacher: the same weights, no gradient, in eval mode."""
        return copy.deepcopy(self).requires_grad_(False).eval()


class TeacherLabels:
    """A frozen teacher's hard labels on the training views of one token source.

    Fresh views (live tokens) are labelled as they are drawn. A token bank's views are stored ones,
    so every (image, stored view) is labelled once, when this is made: V·N teacher passes per step
    instead of 2·N per epoch. The draws from `gen` and the tokens are those of `source.two_views`."""

    def __init__(self, source: Any, teacher: Callable[[torch.Tensor], torch.Tensor], batch_size: int) -> None:
        self.source, self.teacher = source, teacher
        self.table: torch.Tensor | None = None  # image × stored view → label
        if hasattr(source, "stored_views"):
            self.table = torch.empty(len(source), source.n_views, dtype=torch.long)
            for start in range(0, len(source), batch_size):
                index = np.arange(start, min(start + batch_size, len(source)))
                for view in range(source.n_views):
                    self.table[index, view] = self._label(source.stored_views(index, np.full(len(index), view))).cpu()

    @torch.no_grad()
    def _label(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.teacher(tokens)

    def two_views(self, index: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        """Two views' tokens of the images `index` and the teacher's labels of each: (t1, t2, y1, y2)."""
        if self.table is None:
            t1, t2 = self.source.two_views(index, gen)
            return t1, t2, self._label(t1), self._label(t2)
        first, second = self.source.draw_views(index, gen)
        rows = index.cpu()
        t1, t2 = self.source.stored_views(rows, first), self.source.stored_views(rows, second)
        y1, y2 = self.table[rows, torch.from_numpy(first)], self.table[rows, torch.from_numpy(second)]
        return t1, t2, y1.to(t1.device), y2.to(t2.device)


class TailMethod(Method):
    """A method that trains the last `unfreeze` blocks of a ViT backbone (count, or the first
    trainable block's name) on prefix tokens. The runner binds the frozen backbone and the run's
    `precision.tails` before the first step (also after a resume) and builds the prefix up to
    `first_trainable`."""

    runs_on = RunsOn(inputs="tokens")

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.backbone: nn.Module | None = None
        self.first_trainable = 0
        self.precision = "fp32"

    def bind(self, backbone: nn.Module, precision: str = "fp32") -> None:
        self.backbone, self.precision = backbone, precision
        self.first_trainable = first_trainable_block(len(vit_of(backbone).blocks), self.hparams["unfreeze"])

    @property
    def device(self) -> torch.device:
        """Where the backbone is (the runner moved it to the run's device), so where tails and heads go."""
        return next(self.backbone.parameters()).device if self.backbone is not None else torch.device("cpu")

    def new_tail(self, state: dict[str, torch.Tensor] | None = None, first: int | None = None) -> Tail:
        """A fresh copy of the pre-trained tail (from block `first`, default `first_trainable`), or one holding
        `state`, on the backbone's device."""
        tail = Tail(built(self.backbone, "the backbone (bind)"), self.first_trainable if first is None else first,
                    self.precision)
        if state is not None:
            tail.load_trainable_state(state)
        return tail.to(self.device)


class OneTail(TailMethod):
    """A method that keeps one tail, fine-tuned from step to step (EwC, LwF, DER, continual SimGCD, Happy, PromptCCD):
    built when first asked for, from the blocks a checkpoint restored (`restore_tail`) or the pre-trained ones."""

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self._tail: Tail | None = None
        self._tail_state: dict[str, torch.Tensor] | None = None  # from a checkpoint, until the tail is built

    @property
    def tail_first(self) -> int:
        """The tail's first block (PromptCCD's trains fewer blocks than its prefix leaves it)."""
        return self.first_trainable

    @property
    def tail(self) -> Tail:
        """The one tail, in eval mode until a method trains it."""
        if self._tail is None:
            self._tail = self.new_tail(self._tail_state, self.tail_first).eval()
        return self._tail

    def restore_tail(self, state: dict[str, torch.Tensor]) -> None:
        """The tail's blocks from a checkpoint (the tail is built again from them when next asked for)."""
        self._tail, self._tail_state = None, state


class OneTailHeads(TailMethod):
    """Inference of a method that keeps one tail and a head per step (EwC, LwF, DER, CaSSLe): the
    current tail, then every step's head, concatenated; task k's head on that same tail."""

    heads: list[Any]

    @property
    def tail(self) -> Tail:
        """The current tail (each subclass says where it keeps it)."""
        raise NotImplementedError

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        z = self.tail(x)
        return torch.cat([head(z) for head in self.heads], dim=1)

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        return self.heads[task](self.tail(x))

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(x)


class PairedTails(TailMethod):
    """Inference of a method that stores (tail, head) pairs (Joint (unfrozen), FRoST): `_model("joint")`
    gives the unified pair, `_model(k)` task k's own."""

    def _model(self, key: Any) -> tuple[Tail, nn.Module]:
        raise NotImplementedError

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        tail, head = self._model("joint")
        return head(tail(x))

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        tail, head = self._model(task)
        return head(tail(x))

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self._model("joint")[0](x)

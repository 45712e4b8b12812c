"""Prefix tokens: what methods that fine-tune a ViT's last blocks train on.

Seven methods train only a ViT's last one or two blocks, and every old model they keep (a teacher,
an earlier step's backbone, an EMA target) differs from the pre-trained one only there. So the
backbone splits into a frozen **prefix** (patch and position embedding and blocks[:g], shared, never
copied, run under `no_grad`, bf16 on CUDA) and trainable **tails** (`methods.tails`). A method asks
a token source for the prefix's output on two augmented views of the images it names, and on plain
images for evaluation; whether the tokens were computed now (`LiveTokens`) or read from a store is
the source's business. Teachers run on the student's tokens: the prefix runs once per batch.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np
import torch
from torch import nn

from bench.data.base import ImageSet
from bench.errors import BenchError
from bench.features.precision import cuda_bf16
from bench.features.views import Encoder
from bench.data.decode import ViewInput, view_input
from bench.features.augment import policy_variant
from bench.data.preprocess import to_tensor
from bench.config.spec import first_trainable_block  # noqa: F401  (where tail methods look for it)


# A timm ViT or Eva is read by its attributes' names (`blocks`, `patch_embed`, `rope`...), which timm's models share by
# convention, not by a declared type: `model: Any` below says so.
def vit_of(backbone: nn.Module) -> Any:
    """The timm ViT inside a backbone, or a `BenchError` for backbones without transformer blocks."""
    model = getattr(backbone, "model", backbone)
    if not hasattr(model, "blocks"):
        raise BenchError(f"this method trains a ViT's last blocks; the backbone is a {type(model).__name__} "
                         f"without transformer blocks")
    return model


def embed(model: Any, x: torch.Tensor) -> torch.Tensor:
    """The tokens entering block 0 of a timm ViT or Eva: patch embedding, prefix tokens (class, registers,
    DINOv3's storage tokens) and absolute position embedding, as the model's own forward makes them."""
    out = model._pos_embed(model.patch_embed(x))
    if isinstance(out, tuple):  # an Eva: (tokens, rotary embedding), patch dropout already applied
        return model.norm_pre(out[0])
    return model.norm_pre(model.patch_drop(out))


def rotary(model: Any, tokens: torch.Tensor) -> torch.Tensor | None:
    """The rotary position embedding an Eva's blocks take for `tokens` (None for a model without, as timm's
    ViT): it depends on the patch grid only, so it is made again from the token count (a square grid, as
    bench's preprocessing crops), never stored with the tokens."""
    rope = getattr(model, "rope", None)
    if rope is None:
        return None
    if not getattr(model, "dynamic_img_size", False):
        return rope.get_embed() if hasattr(rope, "feat_shape") else rope.get_embed(shape=model.patch_embed.grid_size)
    patches = tokens.shape[1] - model.num_prefix_tokens
    side = int(round(patches ** 0.5))
    if side * side != patches:
        raise BenchError(f"{patches} patch tokens are not a square grid; bench feeds square images")
    return rope.get_embed(shape=(side, side)).to(tokens.device)


def run_block(model: Any, index: int, block: nn.Module, x: torch.Tensor, rope: torch.Tensor | None) -> torch.Tensor:
    """Block `index` of `model` (or a trainable copy of it) on `x`, with its rotary embedding where it has one."""
    if rope is None:
        return block(x)
    return block(x, rope=rope[index] if getattr(model, "rope_mixed", False) else rope)


class Prefix:
    """The frozen first `first` blocks of a ViT backbone (with its patch and position embedding):
    preprocessed images in, tokens out, under `no_grad`. It holds the backbone, never a copy."""

    def __init__(self, backbone: nn.Module, first: int) -> None:
        self.model, self.first = vit_of(backbone), first
        self.calls = 0  # prefix passes so far: one per batch however many models read its tokens

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        m = self.model
        with cuda_bf16(x.device):
            x = embed(m, x)
            rope = rotary(m, x)
            for index, block in enumerate(m.blocks[: self.first]):
                x = run_block(m, index, block, x, rope)
        return x


class LiveTokens:
    """Prefix tokens of some unlabelled images, computed now: augment, preprocess, prefix.

    `two_views` gives the tokens of two independently augmented views (the policy's random draws come
    from the caller's generator); `keep` what a replay buffer keeps of some images (here the stored
    images themselves, uint8 N×H×W×C) and `views_of` the tokens of one augmented view of what it
    kept; `batches` the plain (test-transform) tokens in order, for evaluation."""

    def __init__(self, images: ImageSet, encoder: Encoder, prefix: Prefix) -> None:
        self.images = ImageSet(images.images, np.full(len(images), -1))  # never the labels
        self.encoder, self.prefix = encoder, prefix

    def __len__(self) -> int:
        return len(self.images)

    def subset(self, index: np.ndarray) -> "LiveTokens":
        return LiveTokens(self.images.subset(np.asarray(index)), self.encoder, self.prefix)

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        """The prefix's tokens of float images, augmented or plain: preprocessed as the encoder does."""
        return self.prefix(self.encoder.preprocess(x))

    def _view(self, x: ViewInput, gen: torch.Generator, policy: Any = None) -> torch.Tensor:
        """Tokens of one augmented view of images on the device (the encoder's policy unless told)."""
        return self._tokens((policy or self.encoder.policy)(x, gen))

    def one_view(self, index: np.ndarray, gen: torch.Generator) -> torch.Tensor:
        """Tokens of one augmented view of the indexed images (what a token bank stores V of)."""
        return self._view(view_input(self.images, np.asarray(index)).to(self.encoder.device), gen)

    def two_views(self, index: torch.Tensor, gen: torch.Generator,
                  variants: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Two views; `variants` changes each view's policy (`bench.features.augment.policy_variant`),
        for methods whose two views are augmented differently (CaSSLe's BYOL)."""
        x = view_input(self.images, index.cpu().numpy()).to(self.encoder.device)
        first, second = ((policy_variant(self.encoder.policy, v) for v in variants) if variants
                         else (None, None))
        return self._view(x, gen, first), self._view(x, gen, second)

    def keep(self, index: torch.Tensor | np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.images.load(np.asarray(index))))

    def views_of(self, kept: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return self._view(to_tensor(kept.numpy()).to(self.encoder.device), gen)

    def plain(self, index: np.ndarray) -> torch.Tensor:
        return self._tokens(to_tensor(self.images.load(np.asarray(index))))

    def batches(self, batch_size: int = 256) -> Iterator[torch.Tensor]:
        for start in range(0, len(self), batch_size):
            yield self.plain(np.arange(start, min(start + batch_size, len(self))))

"""Backbone features for methods that keep the backbone frozen.

Per training image: the plain (test-transform) feature and V features of independently augmented
views; methods draw two of the V views per image and epoch (`bank` mode). In `exact` mode the two
views are drawn fresh through the backbone at every draw, as the paper does (`LiveViews`). Per test
image: the plain feature. Extraction runs under `no_grad`, deterministically from a seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bench.features.augment import get_policy
from bench.data.preprocess import prepare
from bench.features.backbones import Backbone
from bench.features.precision import cuda_bf16
from bench.data.base import ImageSet, LoadedDataset
from bench.data.decode import ViewInput, batches, view_input


@dataclass
class FeatureViews:
    """Unlabelled features of some images: `plain` N×D and `views` N×V×D (V may be 0)."""

    plain: torch.Tensor
    views: torch.Tensor

    def __len__(self) -> int:
        return self.plain.shape[0]

    def subset(self, index: torch.Tensor | np.ndarray) -> "FeatureViews":
        index = torch.as_tensor(index, dtype=torch.long)
        return FeatureViews(self.plain[index], self.views[index])

    def to(self, device: torch.device | str) -> "FeatureViews":
        return FeatureViews(self.plain.to(device), self.views.to(device))

    def two_views(self, index: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Two different stored views of each indexed sample (the plain feature twice when none
        are stored)."""
        v = self.views.shape[1]
        if v == 0:
            x = self.plain[index].float()
            return x, x
        if v == 1:
            x = self.views[index, 0].float()
            return x, x
        first = torch.randint(0, v, (len(index),), generator=gen)
        second = (first + torch.randint(1, v, (len(index),), generator=gen)) % v
        index = index.to(self.views.device)
        return self.views[index, first.to(index.device)].float(), self.views[index, second.to(index.device)].float()


class Encoder:
    """Backbone + preprocessing for one dataset: uint8 image batches in, features out."""

    def __init__(self, backbone: Backbone, dataset: LoadedDataset, device: torch.device | str,
                 policy: str = "code") -> None:
        self.backbone, self.device = backbone, torch.device(device)
        self.policy = get_policy(dataset.augmentation, policy, size=backbone.input_size)
        own = getattr(backbone, "mean", None) is not None  # the backbone's authors' statistics, else the dataset's
        self.norm = (((backbone.mean, backbone.std) if own else (dataset.mean, dataset.std)) if backbone.normalize
                     else (None, None))

    def preprocess(self, x: torch.Tensor, input_scale: float = 1.0) -> torch.Tensor:
        """Normalise and resize on the device: on a GPU the 256/224 upsampling is not left to the CPU."""
        return prepare(x.to(self.device, non_blocking=True), input_size=self.backbone.input_size,
                       channels=self.backbone.channels, mean=self.norm[0], std=self.norm[1], input_scale=input_scale)

    @torch.no_grad()
    def plain(self, images: np.ndarray) -> torch.Tensor:
        """Features of uint8 N×H×W×C images under the test transform: the uint8→float conversion goes
        to the device and the 1/255 is folded into the normalisation, one pass over the pixels."""
        x = torch.from_numpy(np.ascontiguousarray(images)).to(self.device, non_blocking=True)
        with cuda_bf16(self.device):
            return self.backbone(self.preprocess(x.permute(0, 3, 1, 2).float(), input_scale=1 / 255)).float()

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        with cuda_bf16(self.device):
            return self.backbone(self.preprocess(x)).float()

    @torch.no_grad()
    def augmented(self, x: ViewInput, gen: torch.Generator) -> torch.Tensor:
        """One augmented view per image, augmented on the device; the policy's random draws come
        from the CPU generator, so the views are the same on every device."""
        return self(self.policy(x.to(self.device, non_blocking=True), gen))


def extract(encoder: Encoder, images: ImageSet, *, views: int, seed: int, batch_size: int = 512,
            progress: Any = None) -> FeatureViews:
    """Plain features and `views` augmented-view features of every image, in dataset order (on CPU); `progress`
    counts the images as they are encoded."""
    gen = torch.Generator().manual_seed(seed)
    plain, augmented = [], []
    for batch, x in batches(images, batch_size, views=views > 0):
        plain.append(encoder.plain(batch).cpu())
        augmented.append(torch.stack([encoder.augmented(x, gen).cpu() for _ in range(views)], 1) if x is not None
                         else torch.empty(len(batch), 0, plain[-1].shape[1]))  # x: the views' input, with views
        if progress is not None:
            progress.advance(len(batch))
    return FeatureViews(torch.cat(plain), torch.cat(augmented))


class LiveViews(FeatureViews):
    """`exact` mode: every draw augments the images afresh and runs the frozen backbone on them.

    Holds the images only (never their labels); `plain` features come precomputed."""

    def __init__(self, plain: torch.Tensor, images: ImageSet, encoder: Encoder) -> None:
        super().__init__(plain, torch.empty(len(plain), 0, plain.shape[1], device=plain.device))
        self.images, self.encoder = images, encoder

    def subset(self, index: torch.Tensor | np.ndarray) -> "LiveViews":
        index = np.asarray(index, dtype=np.int64)
        return LiveViews(self.plain[torch.as_tensor(index)], self.images.subset(index), self.encoder)

    def to(self, device: torch.device | str) -> "LiveViews":
        return LiveViews(self.plain.to(device), self.images, self.encoder)

    def two_views(self, index: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = view_input(self.images, index.cpu().numpy())
        return self.encoder.augmented(x, gen), self.encoder.augmented(x, gen)

"""Backbone features for methods that keep the backbone frozen.

Per training image: the plain (test-transform) feature and V features of independently augmented
views; methods draw two of the V views per image and epoch. Per test image: the plain feature.
Everything is computed once per run under `no_grad`, deterministically from the run's seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bench.augment import get_policy, prepare, to_tensor
from bench.backbones import Backbone
from bench.data.base import DatasetError, ImageSet, LoadedDataset


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


def _batches(images: ImageSet, batch_size: int):
    if not images.in_memory:
        raise DatasetError("this feature path needs images held in memory; file-backed datasets are "
                           "decoded by the image pipeline")
    for start in range(0, len(images), batch_size):
        yield to_tensor(images.images[start: start + batch_size])


@torch.no_grad()
def extract(backbone: Backbone, images: ImageSet, dataset: LoadedDataset, *, views: int, seed: int,
            batch_size: int = 512, device: torch.device | str = "cpu") -> FeatureViews:
    """Plain features and `views` augmented-view features of every image, in dataset order."""
    policy = get_policy(dataset.augmentation)
    gen = torch.Generator().manual_seed(seed)
    norm = (dataset.mean, dataset.std) if backbone.normalize else (None, None)

    def encode(x: torch.Tensor) -> torch.Tensor:
        x = prepare(x, input_size=backbone.input_size, channels=backbone.channels, mean=norm[0], std=norm[1])
        return backbone(x.to(device)).float().cpu()

    plain, augmented = [], []
    for x in _batches(images, batch_size):
        plain.append(encode(x))
        augmented.append(torch.stack([encode(policy(x, gen)) for _ in range(views)], 1) if views
                         else torch.empty(x.shape[0], 0, plain[-1].shape[1]))
    return FeatureViews(torch.cat(plain), torch.cat(augmented))

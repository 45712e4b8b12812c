"""Herbarium 2019, the 683-class subset in the folder layout the paper used (small-train/,
small-validation/, one folder per category). Classes: folder names sorted as strings (torchvision
ImageFolder order, so "10" sorts before "2"). 5 images per class of small-train are held out as val,
once, with a fixed seed, persisted; small-validation is the test set."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import locate
from bench.data.partitions import persisted_partition
from bench.data.tinyimagenet import IMAGENET_MEAN, IMAGENET_STD
from bench.registries import DATASETS

LAYOUT = "herbarium_19/{small-train/<category>/*.jpg, small-validation/<category>/*.jpg}, 683 category folders each"
# torchvision ImageFolder's extensions, matched case-insensitively, files found recursively
EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def image_folder(root: Path, classes: list[str]) -> ImageSet:
    """Images and labels as torchvision's ImageFolder lists them (os.walk sorted, file names sorted)."""
    files, labels = [], []
    for i, name in enumerate(classes):
        for directory, _, names in sorted(os.walk(root / name, followlinks=True)):
            found = [Path(directory) / f for f in sorted(names) if f.lower().endswith(EXTENSIONS)]
            files += found
            labels += [i] * len(found)
    return ImageSet(files, np.array(labels, dtype=np.int64))


@DATASETS.register_module(name="herbarium19")
class Herbarium19:
    """Herbarium 2019 (683 classes): `herbarium_19/small-train`, `small-validation`, a folder per category."""

    num_classes = 683

    def __init__(self, root: str | None = None, val_per_class: int = 5, partition_seed: int = 0,
                 partitions_dir: str | None = None, num_classes: int = 683) -> None:
        # num_classes is only for small test fixtures; the paper's subset has 683
        self.root, self.val_per_class, self.seed = root, val_per_class, partition_seed
        self.partitions_dir, self.num_classes = partitions_dir, num_classes

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        return locate("herbarium19", self.root, "herbarium_19", ["small-train", "small-validation"], LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        classes = sorted(p.name for p in (path / "small-train").iterdir() if p.is_dir())
        test_classes = sorted(p.name for p in (path / "small-validation").iterdir() if p.is_dir())
        if len(classes) != self.num_classes:
            raise DatasetError(f"herbarium19: {path / 'small-train'} has {len(classes)} category folders, "
                               f"expected {self.num_classes}. Expected layout: {LAYOUT}")
        if test_classes != classes:
            only = sorted(set(classes) ^ set(test_classes))[:3]
            raise DatasetError(f"herbarium19: the category folders of {path / 'small-validation'} differ from those of "
                               f"{path / 'small-train'} (e.g. {', '.join(only)}); both must hold the same categories, "
                               f"or the class indices would not match")
        train = image_folder(path / "small-train", classes)
        empty = sorted(set(range(len(classes))) - set(train.labels.tolist()))
        if empty:
            raise DatasetError(f"herbarium19: no images in {path / 'small-train' / classes[empty[0]]}")
        val = persisted_partition("herbarium19", train.labels,
                                  [str(Path(p).relative_to(path)) for p in train.images],
                                  self.val_per_class, self.seed, self.partitions_dir)
        return LoadedDataset(name="herbarium19", class_names=classes, train=train.subset(~val),
                             val=train.subset(val), test=image_folder(path / "small-validation", classes),
                             mean=IMAGENET_MEAN, std=IMAGENET_STD, augmentation="finegrained", root=str(path),
                             extra={"partition_positions": (np.flatnonzero(~val), np.flatnonzero(val))})

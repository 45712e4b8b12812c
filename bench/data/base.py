"""What every dataset reader returns, whatever its on-disk format.

A reader turns a root directory into a `LoadedDataset`: images and labels for the train, test and
(optionally) val partitions, with labels already in the dataset's canonical class order
(docs/methods.md#class-order), so that task t is the contiguous label range the split assigns to it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from bench.data.files import DatasetError, decode

__all__ = ["DatasetError", "DatasetReader", "ImageSet", "LoadedDataset"]


@dataclass
class ImageSet:
    """Images of one partition with their labels.

    `images` is either a uint8 array N×H×W×C held in memory (CIFAR, TinyImageNet, digits,
    synthetic) or a sequence of N image file paths decoded on demand (CUB, Herbarium).
    """

    images: np.ndarray | Sequence[Path]
    labels: np.ndarray  # int64, class index in canonical order

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64)
        if len(self.images) != len(self.labels):
            raise DatasetError(f"{len(self.images)} images but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def in_memory(self) -> bool:
        return isinstance(self.images, np.ndarray)

    def load(self, index: np.ndarray | slice) -> np.ndarray:
        """uint8 N×H×W×C images at `index`: sliced from memory, or decoded from their files in
        parallel threads (shorter side resized to 256 and centre-cropped, the authors' 256 step)."""
        images = self.images
        if isinstance(images, np.ndarray):
            return images[index]
        chosen = images[index] if isinstance(index, slice) else [images[i] for i in np.asarray(index)]
        return decode(chosen)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """H×W×C of the images as `load` returns them."""
        height, width, channels = self.load(np.arange(1))[0].shape
        return height, width, channels

    def subset(self, selection: np.ndarray) -> "ImageSet":
        """The images at a boolean mask or an index array (in that order)."""
        selection = np.asarray(selection)
        index = np.flatnonzero(selection) if selection.dtype == bool else selection.astype(np.int64)
        images = self.images
        if isinstance(images, np.ndarray):
            return ImageSet(images[index], self.labels[index])
        return ImageSet([images[i] for i in index], self.labels[index])


@dataclass
class LoadedDataset:
    """A dataset as the protocol needs it.

    `val` is the partition used to freeze each task's cluster-to-class mapping (docs/methods.md#train-and-val-partitions);
    None means "use the training images with the test transform", as the authors do for CIFAR and
    TinyImageNet.
    """

    name: str
    class_names: list[str]
    train: ImageSet
    test: ImageSet
    val: ImageSet | None = None
    mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    std: tuple[float, ...] = (0.5, 0.5, 0.5)
    augmentation: str = "shift"  # the name of the training-view policy (bench.features.augment)
    root: str = ""  # the resolved path it was read from, recorded in the run spec
    extra: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def val_or_train(self) -> ImageSet:
        return self.val if self.val is not None else self.train

    def with_held_out_test(self, fraction: float, seed: int) -> "LoadedDataset":
        """The tuning protocol `validation` (docs/settings.md#tuning): `fraction` of each class's training images
        (seeded; at least one, and one always left to train on) held out as the evaluation set in place of the test
        set, which is dropped, so that a run on it never reads a test image."""
        rng = np.random.default_rng(seed)
        labels = np.asarray(self.train.labels)
        parts = []
        for c in np.unique(labels):
            members = np.flatnonzero(labels == c)
            count = min(len(members) - 1, max(1, int(round(fraction * len(members)))))
            if count > 0:
                parts.append(rng.choice(members, count, replace=False))
        held = np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
        kept = np.setdiff1d(np.arange(len(labels)), held)
        extra = dict(self.extra)
        if isinstance(extra.get("domain"), dict) and "train" in extra["domain"]:  # each image's domain follows it
            domain = np.asarray(extra["domain"]["train"])
            extra["domain"] = {"train": domain[kept], "test": domain[held]}
        return replace(self, train=self.train.subset(kept), test=self.train.subset(held), extra=extra)

    def with_whole_train(self) -> "LoadedDataset":
        """The dataset with its val partition given back to training (a protocol that trains on the whole
        official training set); no val. Its images in the official training set's order where the reader says
        where the partition's images sat in it (`extra["partition_positions"]`: the training images' positions,
        then the val ones'), else the training images, then the val ones."""
        if self.val is None:
            return self
        train, val = self.train, self.val
        images = (np.concatenate([train.images, val.images]) if train.in_memory and val.in_memory
                  else [*train.images, *val.images])
        whole = ImageSet(images, np.concatenate([train.labels, val.labels]))
        positions = self.extra.get("partition_positions")
        if positions is not None:  # back in the official order: a peer's draw indexes the images so
            whole = whole.subset(np.argsort(np.concatenate(positions), kind="stable"))
        extra = {k: v for k, v in self.extra.items() if k != "partition_positions"}
        return replace(self, train=whole, val=None, extra=extra)

    def with_class_order(self, seed: int | None) -> "LoadedDataset":
        """The dataset with its classes permuted by `seed` (None: as it is): class `order[i]` of the
        canonical order becomes class i, so that contiguous tasks hold the permuted classes."""
        if seed is None:
            return self
        return self.in_class_order(np.random.default_rng(seed).permutation(self.num_classes))

    def in_class_order(self, order: np.ndarray) -> "LoadedDataset":
        """The dataset with class `order[i]` of the canonical order as class i (`order`: a permutation)."""
        order = np.asarray(order, dtype=np.int64)
        new_id = np.empty_like(order)
        new_id[order] = np.arange(self.num_classes)

        def relabel(images: ImageSet) -> ImageSet:
            return ImageSet(images.images, new_id[images.labels])

        return replace(self, class_names=[self.class_names[c] for c in order], train=relabel(self.train),
                       test=relabel(self.test), val=None if self.val is None else relabel(self.val), extra={**self.extra, "class_order": order.tolist()})


@runtime_checkable
class DatasetReader(Protocol):
    """What a dataset reader registered in `bench.registries.DATASETS` implements: a class built with its
    options (`root` for on-disk data, `partitions_dir` where a reader persists a split it draws) whose
    `load()` returns the data. Building one reads nothing; it may also offer `check()` (locate the files
    without loading them, called before any run starts) and a `num_classes` known without reading the data.
    Readers need not subclass it: bench calls these by name (`bench.data.make_reader`)."""

    def load(self) -> LoadedDataset:
        ...

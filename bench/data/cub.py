"""CUB-200-2011 from its official text files; images decoded on demand by parallel threads.
Classes: official id − 1. The official train split is partitioned once into 80% train / 20% val per
class (fixed seed), persisted so every run trains on the same images."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import locate, read_lines
from bench.data.partitions import persisted_partition
from bench.data.tinyimagenet import IMAGENET_MEAN, IMAGENET_STD
from bench.errors import ascii_digits
from bench.registries import DATASETS

LAYOUT = ("CUB_200_2011/{images.txt, image_class_labels.txt, train_test_split.txt, classes.txt, "
          "images/<NNN.Class_Name>/*.jpg}")


def _table(path: Path, columns: int) -> dict[int, list[str]]:
    rows = {}
    for line in read_lines(path):
        parts = line.split(maxsplit=columns - 1)
        if len(parts) != columns or not ascii_digits(parts[0]):  # `²`: isdigit, not int
            raise DatasetError(f"bad line in {path}: {line!r}")
        rows[int(parts[0])] = parts[1:]
    return rows


@DATASETS.register_module(name="cub200")
class Cub200:
    """CUB-200-2011: `CUB_200_2011/` with its text files and images/; 80/20 train/val partition persisted."""

    num_classes = 200

    def __init__(self, root: str | None = None, val_fraction: float = 0.2, partition_seed: int = 0,
                 partitions_dir: str | None = None) -> None:
        self.root, self.val_fraction, self.seed, self.partitions_dir = root, val_fraction, partition_seed, partitions_dir

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        files = ["images.txt", "image_class_labels.txt", "train_test_split.txt", "classes.txt", "images"]
        return locate("cub200", self.root, "CUB_200_2011", files, LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        images = _table(path / "images.txt", 2)
        labels = _table(path / "image_class_labels.txt", 2)
        split = _table(path / "train_test_split.txt", 2)
        classes = _table(path / "classes.txt", 2)
        if len(classes) != self.num_classes:
            raise DatasetError(f"{path / 'classes.txt'} lists {len(classes)} classes; CUB-200-2011 has 200")
        ids = sorted(images)
        if set(ids) != set(labels) or set(ids) != set(split):
            raise DatasetError(f"cub200: images.txt, image_class_labels.txt and train_test_split.txt at {path} "
                               f"do not list the same image ids")
        paths = [path / "images" / images[i][0] for i in ids]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise DatasetError(f"cub200: {len(missing)} images listed in images.txt are missing, e.g. {missing[0]}")
        bad = next((i for i in ids if not ascii_digits(labels[i][0])
                    or int(labels[i][0]) not in classes), None)
        if bad is not None:
            raise DatasetError(f"cub200: image {bad} has class {labels[bad][0]!r} in {path / 'image_class_labels.txt'}, "
                               f"which {path / 'classes.txt'} does not list")
        y = np.array([int(labels[i][0]) - 1 for i in ids])
        is_train = np.array([split[i][0] == "1" for i in ids])
        train_paths = [p for p, t in zip(paths, is_train) if t]
        val = persisted_partition("cub200", y[is_train], [images[i][0] for i, t in zip(ids, is_train) if t],
                                  self.val_fraction, self.seed, self.partitions_dir)
        official_train = ImageSet(train_paths, y[is_train])
        return LoadedDataset(
            name="cub200", class_names=[classes[k][0] for k in sorted(classes)],
            train=official_train.subset(~val), val=official_train.subset(val),
            test=ImageSet([p for p, t in zip(paths, is_train) if not t], y[~is_train]),
            mean=IMAGENET_MEAN, std=IMAGENET_STD, augmentation="finegrained", root=str(path),
            # where the partition's images sit in the official training set (`with_whole_train` restores its order)
            extra={"partition_positions": (np.flatnonzero(~val), np.flatnonzero(val))})

"""TinyImageNet-200 as unzipped (wnids.txt, train/<wnid>/images, val/images + val_annotations.txt),
decoded once by parallel threads and held in memory as uint8 64×64 images. Classes: sorted wnids."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import decode_native, locate, read_lines
from bench.registries import DATASETS

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
LAYOUT = ("tiny-imagenet-200/{wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG, "
          "val/val_annotations.txt (file<TAB>wnid<TAB>bbox...)}")


@DATASETS.register_module(name="tinyimagenet")
class TinyImageNet:
    """TinyImageNet-200: `tiny-imagenet-200/` as unzipped; the official val set is the test set."""

    num_classes = 200

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        return locate("tinyimagenet", self.root, "tiny-imagenet-200",
                      ["wnids.txt", "train", "val/images", "val/val_annotations.txt"], LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        wnids = sorted(read_lines(path / "wnids.txt"))
        if len(wnids) != self.num_classes:
            raise DatasetError(f"{path / 'wnids.txt'} lists {len(wnids)} wnids; TinyImageNet-200 has 200")
        index = {w: i for i, w in enumerate(wnids)}
        train_files, train_labels = [], []
        for wnid in wnids:
            folder = path / "train" / wnid / "images"
            files = sorted(p for p in folder.glob("*") if p.suffix.lower() in (".jpeg", ".jpg"))
            if not files:
                raise DatasetError(f"tinyimagenet: no training images in {folder}. Expected layout: {LAYOUT}")
            train_files += files
            train_labels += [index[wnid]] * len(files)
        test_files, test_labels = [], []
        for line in read_lines(path / "val" / "val_annotations.txt"):
            parts = line.split("\t")
            if len(parts) < 2 or parts[1] not in index:
                raise DatasetError(f"bad line in {path / 'val/val_annotations.txt'}: {line!r}")
            test_files.append(path / "val" / "images" / parts[0])
            test_labels.append(index[parts[1]])
        missing = [str(f) for f in test_files if not f.exists()]
        if missing:
            raise DatasetError(f"tinyimagenet: {len(missing)} val images listed in val_annotations.txt are "
                               f"missing, e.g. {missing[0]}")
        return LoadedDataset(
            name="tinyimagenet", class_names=wnids,
            train=ImageSet(decode_native(train_files), np.array(train_labels)),
            test=ImageSet(decode_native(test_files), np.array(test_labels)),
            mean=IMAGENET_MEAN, std=IMAGENET_STD, augmentation="tinyimagenet", root=str(path))

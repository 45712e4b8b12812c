"""ImageNet-100, the subset of ImageNet-1k the generalized category discovery line of work uses (GCD, Vaze et al.,
CVPR'22, its `data/imagenet.py`; Happy-CGCD's `data/imagenet.py` builds it the same way): the 100 classes at the
indices numpy's legacy generator seeded 0 draws from range(1000) without replacement, sorted, into ImageNet's
1000 classes in torchvision ImageFolder's order (the wnid folders sorted); class i is the i-th of those. Read from
ImageNet's folder layout (`train/<wnid>/*.JPEG`, and the validation images sorted into `val/<wnid>/`, as
torchvision's ImageFolder reads them): the official validation set is the test set, as both codes use it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, LoadedDataset
from bench.data.files import locate
from bench.data.herbarium import image_folder
from bench.data.tinyimagenet import IMAGENET_MEAN, IMAGENET_STD
from bench.registries import DATASETS

LAYOUT = "imagenet/{train/<wnid>/*.JPEG, val/<wnid>/*.JPEG}, the 1000 ImageNet-1k wnid folders in each"
IMAGENET_CLASSES = 1000


def subset_classes(seed: int = 0, size: int = 100) -> np.ndarray:
    """The indices (into ImageNet's 1000 sorted classes) of GCD's ImageNet-100: `np.random.seed(seed)`, then
    `np.random.choice(range(1000), size, replace=False)`, sorted."""
    state = np.random.RandomState(seed)  # the legacy generator `np.random.seed` seeds: the same draws
    return np.sort(state.choice(range(IMAGENET_CLASSES), size=(size,), replace=False))


@DATASETS.register_module(name="imagenet100")
class ImageNet100:
    """ImageNet-100 (GCD's class subset, seed `class_seed`) from `imagenet/train` and `imagenet/val`."""

    num_classes = 100

    def __init__(self, root: str | None = None, class_seed: int = 0) -> None:
        self.root, self.class_seed = root, class_seed

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        return locate("imagenet100", self.root, "imagenet", ["train", "val"], LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        wnids = sorted(p.name for p in (path / "train").iterdir() if p.is_dir())
        if len(wnids) != IMAGENET_CLASSES:
            raise DatasetError(f"imagenet100: {path / 'train'} has {len(wnids)} class folders; ImageNet-1k has "
                               f"{IMAGENET_CLASSES}, and the subset's classes are indices into all of them. "
                               f"Expected layout: {LAYOUT}")
        val_wnids = sorted(p.name for p in (path / "val").iterdir() if p.is_dir())
        if val_wnids != wnids:
            raise DatasetError(f"imagenet100: the class folders of {path / 'val'} differ from those of {path / 'train'} "
                               f"({len(val_wnids)} vs {len(wnids)}); sort the validation images into val/<wnid>/ "
                               f"(the folder layout torchvision's ImageFolder reads). Expected layout: {LAYOUT}")
        chosen = [wnids[i] for i in subset_classes(self.class_seed)]
        train, test = image_folder(path / "train", chosen), image_folder(path / "val", chosen)
        for split, images in (("train", train), ("val", test)):
            empty = sorted(set(range(len(chosen))) - set(images.labels.tolist()))
            if empty:
                raise DatasetError(f"imagenet100: no images in {path / split / chosen[empty[0]]} (one of the subset's "
                                   f"{len(empty)} class folders without any)")
        return LoadedDataset(name="imagenet100", class_names=chosen, train=train, test=test,
                             mean=IMAGENET_MEAN, std=IMAGENET_STD, augmentation="finegrained", root=str(path))

"""Stanford Cars (Krause et al., 2013), 196 classes, from its devkit's annotation files (`cars_train_annos.mat`,
`cars_test_annos_withlabels.mat`, read with scipy: MATLAB data, never code); images decoded on demand by parallel
threads. Classes: the annotations' class id − 1, as GCD's, Happy's and PromptCCD's readers number them; the
official test images are the test set."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import locate
from bench.data.tinyimagenet import IMAGENET_MEAN, IMAGENET_STD
from bench.registries import DATASETS

LAYOUT = ("stanford_cars/{cars_train/*.jpg, cars_test/*.jpg, devkit/cars_train_annos.mat, "
          "devkit/cars_test_annos_withlabels.mat}")


def _annotations(path: Path, images: Path, classes: int) -> ImageSet:
    """The images and classes (0-based) of a devkit annotation file: its `fname` and `class` fields."""
    from scipy.io import loadmat

    try:
        records = loadmat(str(path))["annotations"][0]
        pairs = [(str(r["fname"][0]), int(r["class"][0][0])) for r in records]
    except Exception as err:  # scipy raises several types for a file that is not such a MATLAB file
        raise DatasetError(f"cars: cannot read the annotations in {path}: {type(err).__name__}: {err}") from None
    bad = next(((f, c) for f, c in pairs if not 1 <= c <= classes), None)
    if bad is not None:
        raise DatasetError(f"cars: {path} gives {bad[0]} the class {bad[1]}; the classes are 1..{classes}")
    files = [images / f for f, _ in pairs]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DatasetError(f"cars: {len(missing)} images listed in {path} are missing, e.g. {missing[0]}")
    return ImageSet(files, np.array([c - 1 for _, c in pairs], dtype=np.int64))


@DATASETS.register_module(name="cars")
class StanfordCars:
    """Stanford Cars, 196 classes: `stanford_cars/` with cars_train/, cars_test/ and the devkit's annotations."""

    num_classes = 196

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        files = ["cars_train", "cars_test", "devkit/cars_train_annos.mat", "devkit/cars_test_annos_withlabels.mat"]
        return locate("cars", self.root, "stanford_cars", files, LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        train = _annotations(path / "devkit" / "cars_train_annos.mat", path / "cars_train", self.num_classes)
        test = _annotations(path / "devkit" / "cars_test_annos_withlabels.mat", path / "cars_test", self.num_classes)
        empty = sorted(set(range(self.num_classes)) - set(train.labels.tolist()))
        if empty:
            raise DatasetError(f"cars: no training image of class {empty[0] + 1} (of {len(empty)} classes without one) "
                               f"in {path / 'devkit' / 'cars_train_annos.mat'}")
        return LoadedDataset(name="cars", class_names=_names(path / "devkit" / "cars_meta.mat", self.num_classes),
                             train=train, test=test, mean=IMAGENET_MEAN, std=IMAGENET_STD, augmentation="finegrained",
                             root=str(path))


def _names(path: Path, classes: int) -> list[str]:
    """The class names of the devkit's `cars_meta.mat` where it is there and holds them all, else `class <id>`."""
    if path.is_file():
        from scipy.io import loadmat

        try:
            names = [str(n[0]) for n in loadmat(str(path))["class_names"][0]]
        except Exception:  # the names are a courtesy: a run reads none of them
            names = []
        if len(names) == classes:
            return names
    return [f"class {c + 1}" for c in range(classes)]

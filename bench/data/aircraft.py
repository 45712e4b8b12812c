"""FGVC-Aircraft (Maji et al., 2013) at its `variant` level, 100 classes, from its official text files; images
decoded on demand by parallel threads. Classes: the variant names sorted (the order GCD's, Happy's and PromptCCD's
readers give them, `np.unique` of the names). Which official lists train and test is `dataset.splits`:
`trainval-test` (GCD's and Happy's: `images_variant_trainval.txt` for training, `images_variant_test.txt` as the
test set; the default) or `train-val` (PromptCCD's `util/data_util.py:load_aircraft`: `_train` and `_val`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import locate, read_lines
from bench.data.tinyimagenet import IMAGENET_MEAN, IMAGENET_STD
from bench.errors import unknown
from bench.registries import DATASETS

LAYOUT = ("fgvc-aircraft-2013b/data/{images/<id>.jpg, images_variant_trainval.txt, images_variant_test.txt "
          "(or _train.txt and _val.txt), one `<id> <variant>` per line}")
SPLITS = {"trainval-test": ("trainval", "test"), "train-val": ("train", "val")}


def _list(path: Path) -> tuple[list[str], list[str]]:
    """The image ids and variant names of an `images_variant_<split>.txt`."""
    ids, names = [], []
    for line in read_lines(path):
        image, _, name = line.partition(" ")
        if not name.strip():
            raise DatasetError(f"bad line in {path}: {line!r} (expected `<id> <variant>`)")
        ids.append(image)
        names.append(name.strip())
    return ids, names


@DATASETS.register_module(name="aircraft")
class Aircraft:
    """FGVC-Aircraft, 100 variants: `fgvc-aircraft-2013b/data/` with its image lists and images/."""

    num_classes = 100

    def __init__(self, root: str | None = None, splits: str = "trainval-test") -> None:
        if splits not in SPLITS:
            raise unknown("aircraft splits", splits, SPLITS)
        self.root, self.splits = root, splits

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        train, test = SPLITS[self.splits]
        files = ["images", f"images_variant_{train}.txt", f"images_variant_{test}.txt"]
        return locate("aircraft", self.root, "fgvc-aircraft-2013b/data", files, LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        train, test = SPLITS[self.splits]
        (train_ids, train_names), (test_ids, test_names) = (_list(path / f"images_variant_{s}.txt") for s in (train, test))
        classes = sorted(set(train_names))
        if len(classes) != self.num_classes:
            raise DatasetError(f"aircraft: {path / f'images_variant_{train}.txt'} names {len(classes)} variants; "
                               f"FGVC-Aircraft has {self.num_classes}")
        index = {name: i for i, name in enumerate(classes)}
        strange = sorted(set(test_names) - set(index))
        if strange:
            raise DatasetError(f"aircraft: {path / f'images_variant_{test}.txt'} names variants the training list "
                               f"does not, e.g. {strange[0]!r}")
        sets = []
        for ids, names in ((train_ids, train_names), (test_ids, test_names)):
            files = [path / "images" / f"{i}.jpg" for i in ids]
            missing = [str(f) for f in files if not f.is_file()]
            if missing:
                raise DatasetError(f"aircraft: {len(missing)} listed images are missing, e.g. {missing[0]}")
            sets.append(ImageSet(files, np.array([index[n] for n in names], dtype=np.int64)))
        return LoadedDataset(name="aircraft", class_names=classes, train=sets[0], test=sets[1], mean=IMAGENET_MEAN,
                             std=IMAGENET_STD, augmentation="finegrained", root=str(path))

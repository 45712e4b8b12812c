"""CIFAR-10 and CIFAR-100 from the official python pickle batches, held in memory as uint8."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import locate
from bench.registries import DATASETS


# What the official batches hold besides dicts, lists, strings and ints: numpy arrays (`data`). A pickle
# can name any callable (os.system ...), so reading one may import these and nothing else.
ALLOWED_GLOBALS = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),  # numpy < 2, >= 2
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("_codecs", "encode"),  # bytes in a protocol-2 pickle written by Python 3
})


class DisallowedGlobal(pickle.UnpicklingError):
    """A pickle asked for a global outside ALLOWED_GLOBALS."""


class _CifarUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        if (module, name) not in ALLOWED_GLOBALS:
            raise DisallowedGlobal(f"{module}.{name}")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return _CifarUnpickler(fh, encoding="latin1").load()
    except DisallowedGlobal as err:
        allowed = ", ".join(sorted(f"{m}.{n}" for m, n in ALLOWED_GLOBALS))
        raise DatasetError(f"refusing CIFAR file {path}: it asks for {err}, which a CIFAR batch never holds "
                           f"(allowed: {allowed}); replace it with the official file") from None
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, AttributeError) as err:
        raise DatasetError(f"corrupt or truncated CIFAR file {path}: {type(err).__name__}: {err}") from None


def _batch(path: Path, label_key: str, num_classes: int) -> ImageSet:
    entry = _unpickle(path)
    try:
        data = np.asarray(entry["data"], dtype=np.uint8)
        labels = np.asarray(entry[label_key], dtype=np.int64)
        images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    except (KeyError, ValueError, TypeError) as err:
        raise DatasetError(f"corrupt CIFAR file {path}: {type(err).__name__}: {err}") from None
    if len(labels) != len(images) or (len(labels) and (labels.min() < 0 or labels.max() >= num_classes)):
        raise DatasetError(f"corrupt CIFAR file {path}: {len(images)} images, {len(labels)} labels "
                           f"(expected as many, each in 0..{num_classes - 1})")
    return ImageSet(np.ascontiguousarray(images), labels)


def _concat(sets: list[ImageSet]) -> ImageSet:
    return ImageSet(np.concatenate([s.images for s in sets]), np.concatenate([s.labels for s in sets]))


@DATASETS.register_module(name="cifar10")
class Cifar10:
    """CIFAR-10: `cifar-10-batches-py/` (data_batch_1..5, test_batch, batches.meta); label ids as classes."""

    num_classes = 10
    dirname = "cifar-10-batches-py"
    train_files = [f"data_batch_{i}" for i in range(1, 6)]
    test_file, meta_file, label_key, names_key = "test_batch", "batches.meta", "labels", "label_names"
    mean, std = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads nothing)."""
        layout = f"{self.dirname}/{{{', '.join(self.train_files)}, {self.test_file}, {self.meta_file}}}"
        return locate(self.__class__.__name__.lower(), self.root, self.dirname,
                      [*self.train_files, self.test_file, self.meta_file], layout)

    def load(self) -> LoadedDataset:
        path = self.check()
        meta = _unpickle(path / self.meta_file)
        names = meta.get(self.names_key) if isinstance(meta, dict) else None
        if not names or len(names) != self.num_classes:
            raise DatasetError(f"corrupt CIFAR meta file {path / self.meta_file}: expected {self.num_classes} "
                               f"names under {self.names_key!r}")
        train = _concat([_batch(path / f, self.label_key, self.num_classes) for f in self.train_files])
        test = _batch(path / self.test_file, self.label_key, self.num_classes)
        return LoadedDataset(name=self.__class__.__name__.lower(), class_names=list(names), train=train, test=test,
                             mean=self.mean, std=self.std, augmentation="cifar", root=str(path))


@DATASETS.register_module(name="cifar100")
class Cifar100(Cifar10):
    """CIFAR-100: `cifar-100-python/` (train, test, meta); fine labels as classes."""

    num_classes = 100
    dirname = "cifar-100-python"
    train_files = ["train"]
    test_file, meta_file, label_key, names_key = "test", "meta", "fine_labels", "fine_label_names"
    mean, std = (0.507, 0.487, 0.441), (0.267, 0.256, 0.276)

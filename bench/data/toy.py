"""Datasets that need no download: scikit-learn's bundled digits, and generated planted classes."""
from __future__ import annotations

import numpy as np

from bench.data.base import ImageSet, LoadedDataset
from bench.errors import BenchError
from bench.registries import DATASETS


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask taking `test_fraction` of every class, drawn once with a fixed seed."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        test[idx[: int(round(len(idx) * test_fraction))]] = True
    return test


@DATASETS.register_module(name="digits")
class Digits:
    """scikit-learn's 1,797 handwritten 8×8 digits (10 classes), real data shipped in the wheel.

    There is no official test split: a fixed, class-stratified 30% is held out (seed 0), the same
    for every run.
    """

    num_classes = 10

    def __init__(self, test_fraction: float = 0.3) -> None:
        self.test_fraction = test_fraction

    def load(self) -> LoadedDataset:
        from sklearn.datasets import load_digits

        raw = load_digits()
        # 0..16 intensities → uint8 grey images, H×W×1, like every other in-memory dataset.
        images = np.round(raw.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
        labels = raw.target.astype(np.int64)
        test = stratified_split(labels, self.test_fraction, seed=0)
        return LoadedDataset(
            name="digits", class_names=[str(d) for d in range(10)],
            train=ImageSet(images[~test], labels[~test]), test=ImageSet(images[test], labels[test]),
            mean=(0.3,), std=(0.4,), augmentation="shift",
        )


@DATASETS.register_module(name="synthetic")
class Synthetic:
    """Generated images with planted classes, for tests: each class is a random smooth template,
    each image its template plus noise and a random small shift. Size and class count are options."""

    def __init__(self, num_classes: int = 10, image_size: int = 16, channels: int = 3,
                 train_per_class: int = 40, test_per_class: int = 20, noise: float = 0.25,
                 seed: int = 0) -> None:
        if num_classes < 1 or image_size < 4 or train_per_class < 1 or test_per_class < 1:
            raise BenchError("synthetic: num_classes, train_per_class and test_per_class must be >= 1 and image_size >= 4")
        self.num_classes, self.image_size, self.channels = num_classes, image_size, channels
        self.train_per_class, self.test_per_class = train_per_class, test_per_class
        self.noise, self.seed = noise, seed

    def _images(self, templates: np.ndarray, per_class: int, rng: np.random.Generator) -> ImageSet:
        labels = np.repeat(np.arange(self.num_classes), per_class)
        imgs = templates[labels] + self.noise * rng.standard_normal((len(labels), *templates.shape[1:]))
        shifts = rng.integers(-1, 2, size=(len(labels), 2))
        imgs = np.stack([np.roll(im, tuple(s), axis=(0, 1)) for im, s in zip(imgs, shifts)])
        return ImageSet(np.clip(imgs * 255, 0, 255).astype(np.uint8), labels)

    def load(self) -> LoadedDataset:
        rng = np.random.default_rng(self.seed)
        coarse = rng.random((self.num_classes, 4, 4, self.channels))
        # Upsample 4×4 random grids into smooth templates, so a shift keeps the class recognisable.
        reps = -(-self.image_size // 4)
        templates = np.kron(coarse, np.ones((1, reps, reps, 1)))[:, : self.image_size, : self.image_size]
        return LoadedDataset(
            name="synthetic", class_names=[f"class_{c}" for c in range(self.num_classes)],
            train=self._images(templates, self.train_per_class, rng),
            test=self._images(templates, self.test_per_class, rng),
            mean=(0.5,) * self.channels, std=(0.3,) * self.channels, augmentation="shift_flip",
        )

"""Small specs and registered test-only methods shared by the tests."""
from __future__ import annotations

from typing import Any

from bench.spec import RunSpec, expand, load_grid

# The smoke grid already shortens training (method.epochs=5 for the methods that train).
TINY = {
    "features.views": 2,
    "dataset.num_classes": 6, "dataset.image_size": 8, "dataset.train_per_class": 12, "dataset.test_per_class": 6,
}


def tiny_specs(methods=("Baseline",), splits=("2-step",), seeds=(0,), backbone="pixels", **options: Any) -> list[RunSpec]:
    """Specs of the smoke grid on tiny synthetic data; the pixel backbone unless told otherwise."""
    return expand(load_grid("smoke"), methods=list(methods), datasets=["synthetic"], splits=list(splits),
                  seeds=list(seeds), backbones=[backbone], options={**TINY, **options})

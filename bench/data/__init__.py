"""Dataset readers, registered in `bench.registries.DATASETS` by name.

A reader is a class built with its options (`root` for on-disk datasets) whose `load()` returns a
`LoadedDataset`. `build_dataset` is the one place that turns a name and options into data.

Imports from: bench.errors, bench.core, bench.splits, bench.registries.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data import aircraft, cars, cifar, cub, domainnet, herbarium, imagenet, tinyimagenet, toy  # noqa: F401  (registration)
from bench.errors import BenchError, unknown

__all__ = ["DatasetError", "ImageSet", "LoadedDataset", "build_dataset", "declared_num_classes", "draws_partition",
           "make_reader", "reader_class"]


def reader_class(name: str) -> Any:
    """The reader registered as `name`, or None. The readers registered when this package was
    imported; mmengine's `Registry.get` would also set up its logger, which imports torch. A name
    bench has not imports the plugins (`bench.registries.plugins`), which may register it."""
    from bench.registries.plugins import load
    from bench.registries import DATASETS

    if name not in DATASETS.module_dict:
        load()
    return DATASETS.module_dict.get(name)


def draws_partition(name: str) -> bool:
    """Whether the reader of dataset `name` holds a val partition out of the official training set (it persists
    the partition it draws: CUB, Herbarium); False for an unknown name."""
    cls = reader_class(name)
    return cls is not None and "partitions_dir" in inspect.signature(cls.__init__).parameters


def make_reader(name: str, options: Mapping[str, Any], root: str | None = None,
                partitions_dir: str | None = None) -> Any:
    """The configured reader; building it reads nothing from disk (`load()` does)."""
    from bench.registries import DATASETS

    cls = reader_class(name)
    if cls is None:
        raise unknown("dataset", name, DATASETS.module_dict)
    params = inspect.signature(cls.__init__).parameters
    valid = [p for p in params if p not in ("self", "partitions_dir")]
    bad = [k for k in options if k not in valid]
    if bad:
        raise BenchError(f"dataset {name!r} has no option {bad[0]!r}; valid options: {', '.join(valid) or 'none'}")
    kwargs = dict(options)
    # precedence: --data-root / BENCH_DATA_ROOT (passed as `root`) over the config's dataset.root
    if "root" in params and root:
        kwargs["root"] = root
    if "partitions_dir" in params:
        kwargs["partitions_dir"] = partitions_dir
    return cls(**kwargs)


def build_dataset(name: str, options: Mapping[str, Any], root: str | None = None,
                  partitions_dir: str | None = None) -> LoadedDataset:
    return make_reader(name, options, root, partitions_dir).load()


def declared_num_classes(name: str, options: Mapping[str, Any]) -> int | None:
    """The class count a reader declares (`num_classes`), known without reading the data."""
    n = getattr(make_reader(name, options), "num_classes", None)
    return n if isinstance(n, int) else None

"""The mmengine registries of `bench`, all in the explicit scope ``bench``.

Entries live where they are implemented (methods in `methods/`, dataset readers in `bench/data/`,
backbones in `bench/features/backbones.py`); each registry names those modules as its lazy-import
locations, and `load_all()` forces the imports before anything lists or builds. Plugins
(`bench.registries.plugins`) register into the same registries: a registry imports them with its own
locations, so that whatever looks a name up (the runner in a worker or a SLURM job) sees them.
Method presets and grids are mmengine config files beside this module (`presets/`, `grids/`). The package
also holds the plugin loader (`plugins`) and the catalogue of what is registered, read without importing the
methods or torch (`catalogue`).

Imports from: bench.errors, bench.core.
"""
from __future__ import annotations

from mmengine.registry import Registry

from bench.registries import plugins
from bench.registries.plugins import GRIDS_DIR, PRESETS_DIR  # noqa: F401  (bench's own config folders)

SCOPE = "bench"


class PluginRegistry(Registry):
    """An mmengine registry whose lazy import also imports this process's plugins (`bench.registries.plugins.load`)."""

    def import_from_location(self) -> None:
        super().import_from_location()
        plugins.load()


METHODS = PluginRegistry("method", scope=SCOPE, locations=["bench.methods"])
DATASETS = PluginRegistry("dataset", scope=SCOPE, locations=["bench.data"])
BACKBONES = PluginRegistry("backbone", scope=SCOPE, locations=["bench.features.backbones"])


def load_all() -> None:
    """Import every registry location and every plugin, so listing shows all entries (mmengine imports lazily)."""
    for registry in (METHODS, DATASETS, BACKBONES):
        registry.import_from_location()


# bench's own entries are imported before any plugin (`plugins.load`): a plugin taking one of their names fails,
# never bench
plugins.import_first(load_all)

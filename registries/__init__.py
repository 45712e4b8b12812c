"""The mmengine registries of `bench`, all in the explicit scope ``bench``.

Entries live where they are implemented (methods in `methods/`, dataset readers in `bench/data/`,
backbones in `bench/backbones.py`); each registry names those modules as its lazy-import
locations, and `load_all()` forces the imports before anything lists or builds. Plugins
(`bench.plugins`) register into the same registries: a registry imports them with its own
locations, so that whatever looks a name up (the runner in a worker or a SLURM job) sees them.
Method presets and grids are mmengine config files beside this module (`presets/`, `grids/`).
"""
from __future__ import annotations

from pathlib import Path

from mmengine.registry import Registry

SCOPE = "bench"


class PluginRegistry(Registry):
    """An mmengine registry whose lazy import also imports this process's plugins (`bench.plugins.load`)."""

    def import_from_location(self) -> None:
        super().import_from_location()
        from bench.plugins import load

        load()


METHODS = PluginRegistry("method", scope=SCOPE, locations=["bench.methods"])
DATASETS = PluginRegistry("dataset", scope=SCOPE, locations=["bench.data"])
BACKBONES = PluginRegistry("backbone", scope=SCOPE, locations=["bench.backbones"])

PRESETS_DIR = Path(__file__).parent / "presets"
GRIDS_DIR = Path(__file__).parent / "grids"


def load_all() -> None:
    """Import every registry location and every plugin, so listing shows all entries (mmengine imports lazily)."""
    for registry in (METHODS, DATASETS, BACKBONES):
        registry.import_from_location()

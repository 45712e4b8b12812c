"""Where bench's modules were before they moved into subpackages by concern (`bench.spec` is `bench.config.spec`
now): the old names still import, as the very same module objects, so that plugins and scripts written against
them keep working. Each says once, as a DeprecationWarning, where the module is now.

`bench.features` was a module and is now a package: its old names import from the package (its `__getattr__`).

Imports from: nothing of bench.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Sequence

# old name -> the module's name now, both below `bench.`
MOVED: dict[str, str] = {
    "resources": "core.resources",
    "storage": "core.storage",
    "provenance": "core.provenance",
    "numerics": "core.numerics",
    "runs_on": "core.runs_on",
    "plugins": "registries.plugins",
    "preprocess": "data.preprocess",
    "spec": "config.spec",
    "validate": "config.validate",
    "settings": "config.settings",
    "mixed": "config.manifests",
    "split_files": "config.peer_splits",
    "backbones": "features.backbones",
    "weights": "features.weights",
    "bank": "features.bank",
    "token_bank": "features.token_bank",
    "tokens": "features.tokens",
    "augment": "features.augment",
    "feeding": "protocol.feeding",
    "evaluate": "protocol.evaluate",
    "epoch_selection": "protocol.epoch_selection",
    "estimate_k": "protocol.estimate_k",
    "planning": "protocol.planning",
    "runner": "protocol.runner",
    "mixed_run": "protocol.mixed",
    "recompute": "protocol.recompute",
    "rundir": "runs.rundir",
    "runstore": "runs.runstore",
    "checkpoint": "runs.checkpoint",
    "predictions": "runs.predictions",
    "run_metrics": "runs.metrics_file",
    "outcomes": "reporting.outcomes",
    "conformance": "kit.conformance",
    "scaffold": "kit.scaffold",
    "templates": "kit.templates",
    "selection": "execution.selection",
    "preflight": "execution.preflight",
    "scheduler": "execution.scheduler",
    "workers": "execution.workers",
    "lifeline": "execution.lifeline",
    "forkserver_lifeline": "execution.forkserver_lifeline",
    "slurm": "execution.slurm",
}


class OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `bench.<old>` as the module `bench.<new>` (first on `sys.meta_path`: a folder of a source
    checkout named like an old module, `slurm/`, must not be found as a namespace package instead)."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("bench.") or fullname[6:] not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        now = "bench." + MOVED[spec.name[6:]]
        warnings.warn(f"{spec.name} moved to {now}: import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(now)
        self._specs[spec.name] = module.__spec__  # the import system sets the old name's spec on it: put back below
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._specs.pop(module.__spec__.name, module.__spec__)  # type: ignore[union-attr]


def install() -> None:
    if not any(isinstance(finder, OldNames) for finder in sys.meta_path):
        sys.meta_path.insert(0, OldNames())

"""bench: a benchmark harness for class-incremental novel class discovery.

The public API, imported on first use (PEP 562) so that `import bench` stays light (no torch, timm or
pandas: the commands that run nothing rely on it):

- `bench.run(...)`, `bench.report(...)`: what `bench run` and `bench report` do (`bench.api`; the
  report's parts are `bench.reporting`); `bench.results(...)`: the finished runs as pandas objects;
  `bench.publish(...)`: a grid's finished runs into a results store, as `bench publish` (`bench.store`);
  `bench.tune(...)`: a method's hyper-parameters tuned without the test set, as `bench tune` (`bench.tune`);
- the base classes of a plugin: `Method`, `Step` and `RunsOn` (a method and what it runs on),
  `DatasetReader` (a dataset reader), `Backbone` (a backbone);
- the registries they register in: `METHODS`, `DATASETS`, `BACKBONES`;
- `RunSpec` (one run), `Selection` (the runs a call means, given whole in place of a grid), `BenchError` (every
  user-facing error), `method_slug`, `resolve_method`.

Imports from: bench.core (the public names above are imported on first use, by their module's name).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from bench.core.resources import VERSION

__version__ = VERSION

# public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    "run": "bench.api", "report": "bench.api", "RunOutcome": "bench.api", "ReportOutcome": "bench.api",
    "results": "bench.api", "Results": "bench.api", "publish": "bench.api", "tune": "bench.api", "Selection": "bench.config.selection",
    "Method": "bench.methods.base", "Step": "bench.methods.base", "RunsOn": "bench.core.runs_on",
    "DatasetReader": "bench.data.base", "LoadedDataset": "bench.data.base", "ImageSet": "bench.data.base",
    "Backbone": "bench.features.backbones",
    "METHODS": "bench.registries", "DATASETS": "bench.registries", "BACKBONES": "bench.registries",
    "RunSpec": "bench.config.spec", "method_slug": "bench.config.spec", "resolve_method": "bench.config.spec",
    "BenchError": "bench.errors",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    value = getattr(import_module(_PUBLIC[name]), name)
    globals()[name] = value  # imported once; later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

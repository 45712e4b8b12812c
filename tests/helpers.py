"""Small specs and registered test-only methods shared by the tests."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from bench.config.spec import RunSpec

from bench.config.grids import expand, load_grid

# The smoke grid already shortens training (method.epochs=5 for the methods that train).
TINY = {
    "features.views": 2,
    "dataset.num_classes": 6, "dataset.image_size": 8, "dataset.train_per_class": 12, "dataset.test_per_class": 6,
}


def tiny_specs(methods=("Baseline",), splits=("2-step",), seeds=(0,), backbone="pixels", **options: Any) -> list[RunSpec]:
    """Specs of the smoke grid on tiny synthetic data; the pixel backbone unless told otherwise."""
    return expand(load_grid("smoke"), methods=list(methods), datasets=["synthetic"], splits=list(splits),
                  seeds=list(seeds), backbones=[backbone], options={**TINY, **options})


def killed_then_resumed(spec: RunSpec, results: Path, method_class: type, step: int, monkeypatch: Any,
                        between: Callable[[], Any] = lambda: None, resumed_as: RunSpec | None = None) -> Path:
    """Run `spec` under `results` with `method_class.learn` killed (KeyboardInterrupt) as step `step`
    starts, then again (as `resumed_as`, the same run asked for elsewhere, if given; after `between()`,
    which may change the process): the resumed run's directory, after checking its log says it resumed."""
    from bench.protocol.runner import execute
    from bench.runs.rundir import run_dir

    real = method_class.learn

    def killed(self: Any, current: Any) -> Any:
        if current.index == step:
            raise KeyboardInterrupt(f"killed before step {step}")
        return real(self, current)

    monkeypatch.setattr(method_class, "learn", killed)
    with pytest.raises(KeyboardInterrupt):
        execute(spec, results)
    monkeypatch.setattr(method_class, "learn", real)
    between()
    out = execute(resumed_as or spec, results)
    assert f"resuming after step {step - 1}" in (run_dir(results, spec) / "log.txt").read_text()
    return out

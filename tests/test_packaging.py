"""bench is one importable package: methods/ and registries/ of the checkout are `bench.methods` and
`bench.registries`, and moving them there changed no run id."""
from __future__ import annotations

import subprocess
import sys

import pytest

from bench.spec import expand, load_grid

# ids computed before methods/ and registries/ became bench.methods and bench.registries: a run id
# names a results directory, so changing one would orphan every finished run
PINNED = [
    ("demo", dict(), 0, "fe8b7ca37b5e3be2"),
    ("paper", dict(methods=["EwC"], datasets=["cifar100"], splits=["5-step"], seeds=[0]), 2, "b4fe11e9b589ea5f"),
    ("smoke", dict(methods=["Joint (unfrozen)"]), 0, "9fb1fc91b697caac"),
]


@pytest.mark.parametrize("grid, selection, index, run_id", PINNED)
def test_run_ids_survive_the_move_into_one_package(grid, selection, index, run_id):
    assert expand(load_grid(grid), **selection)[index].run_id == run_id


def test_only_bench_is_importable_at_the_top_level():
    code = ("import importlib.util, bench.methods, bench.registries; "
            "print([n for n in ('methods', 'registries', 'benchmarks') if importlib.util.find_spec(n)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/", env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert out.stdout.strip() == "[]"

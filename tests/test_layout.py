"""bench's house: the package is laid out by concern, each subpackage a layer that imports only the layers its
docstring names (`Imports from:`), with no import cycle; the modules keep to a readable length; the module
paths from before the layout still import, as the same modules (`bench._moved`)."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from bench._moved import MOVED
from tests.import_graph import ROOT, allowed_imports, cycles, read_graph, upward_imports

GRAPH = read_graph()
LONGEST = 400  # lines: a module longer than this is cut by concern


def test_no_module_of_bench_imports_itself_back():
    assert cycles(GRAPH) == []


def test_every_import_points_down_to_a_layer_its_package_names():
    allowed = allowed_imports(GRAPH)
    # every package and top-level module says what it may import
    layers = {GRAPH.layer(m) for m in GRAPH.files}
    assert layers <= set(allowed), f"no `Imports from:` line in {sorted(layers - set(allowed))}"
    assert upward_imports(GRAPH, allowed) == []


def test_the_layers_stack_without_a_cycle():
    """What the packages allow is itself an order: no two layers may import each other."""
    allowed = allowed_imports(GRAPH)
    order: list[str] = []
    pending = dict(allowed)
    while pending:
        ready = sorted(layer for layer, below in pending.items() if below <= set(order))
        assert ready, f"the layers {sorted(pending)} allow each other in a circle"
        order += ready
        for layer in ready:
            del pending[layer]
    assert order.index("bench.errors") < order.index("bench.core") < order.index("bench.runs") \
        < order.index("bench.protocol") < order.index("bench.execution") < order.index("bench.api") \
        < order.index("bench.cli")


def test_the_top_level_holds_the_public_face_and_modules_stay_short():
    top = sorted(p.name for p in (ROOT / "bench").glob("*.py"))
    assert top == ["__init__.py", "_moved.py", "api.py", "errors.py"]
    long = {str(p.relative_to(ROOT)): n for p in GRAPH.files.values()
            if (n := len(p.read_text().splitlines())) > LONGEST}
    assert long == {}


@pytest.mark.parametrize("old, now", sorted(MOVED.items()))
def test_a_modules_name_from_before_the_layout_imports_the_same_module(old, now):
    first = f"bench.{old}" not in sys.modules  # the warning comes with the first import in a process
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        module = importlib.import_module(f"bench.{old}")
    assert module is importlib.import_module(f"bench.{now}")
    assert module.__spec__.name == f"bench.{now}"  # the module keeps its own spec
    if first:
        assert [str(w.message) for w in said if issubclass(w.category, DeprecationWarning)] == \
            [f"bench.{old} moved to bench.{now}: import it from there"]


def test_an_old_name_imports_in_a_fresh_process_from_a_folder_of_the_checkout_named_like_it():
    """`bench.slurm` (now `bench.execution.slurm`) beside the checkout's `slurm/` folder: the module, never
    the folder as a namespace package; its names and the old `bench.features` names import too."""
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    import bench.slurm\nexcept DeprecationWarning as w:\n    print('warned:', w)\n"
            "warnings.simplefilter('ignore')\n"
            "import bench.slurm, bench.execution.slurm\n"
            "from bench.spec import RunSpec; from bench.features import FeatureViews; from bench.plugins import load\n"
            "print(bench.slurm is bench.execution.slurm, RunSpec.__module__, FeatureViews.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.splitlines() == ["warned: bench.slurm moved to bench.execution.slurm: import it from there",
                                       "True bench.config.spec bench.features.views"], out.stderr


def test_the_drawing_of_docs_architecture_is_the_codes():
    from tests.import_graph import mermaid

    page = (ROOT / "docs" / "architecture.md").read_text()
    drawn = page.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert drawn == mermaid(GRAPH), "run `python tests/import_graph.py` and paste its output into docs/architecture.md"

"""bench's house: the package is laid out by concern, each subpackage a layer that imports only the layers its
docstring names (`Imports from:`), with no import cycle; the modules keep to a readable length; the package is
exactly the folders it ships, and nothing else imports as part of it."""
from __future__ import annotations

import subprocess
import sys
import tomllib

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
    assert order.index("bench.errors") < order.index("bench.core") < order.index("bench.runs")\
        < order.index("bench.protocol") < order.index("bench.execution") < order.index("bench.api")\
        < order.index("bench.cli")


def test_the_top_level_holds_the_public_face_and_modules_stay_short():
    top = sorted(p.name for p in (ROOT / "bench").glob("*.py"))
    assert top == ["__init__.py", "api.py", "errors.py"]
    long = {str(p.relative_to(ROOT)): n for p in GRAPH.files.values()
            if (n := len(p.read_text().splitlines())) > LONGEST}
    assert long == {}


def test_the_package_ships_exactly_its_folders():
    """pyproject's packages are the folders of bench/ that hold an `__init__.py`, with the charter folders it maps
    in (`methods/`, `registries/`, the paper's tables, the SLURM profiles): a subpackage added without being
    listed would be missing from the wheel."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = tool["package-dir"]
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "bench").rglob("__init__.py")}
    assert set(tool["packages"]) == folders | (set(mapped) - {"bench"})
    assert all((ROOT / folder).is_dir() for folder in mapped.values())


def test_only_what_the_package_ships_imports_as_bench():
    """In a fresh process from the checkout: the module paths from before the layout (`bench.spec`) and the
    checkout's other folders (`bench.tests`, `bench.docs`) do not import as part of bench; the public names and
    the mapped folders do."""
    code = ("import importlib, bench\n"
            "for name in ('bench.spec', 'bench.slurm', 'bench.tests', 'bench.docs', 'bench.config.settings'):\n"
            "    try:\n        importlib.import_module(name)\n        print('imports', name)\n"
            "    except ModuleNotFoundError:\n        pass\n"
            "import bench.methods.base, bench.registries\n"
            "print(bench.RunSpec.__module__, bench.Method.__module__, bench.methods.base.__file__.startswith(bench.__path__[0]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.splitlines() == ["bench.config.spec bench.methods.base False"], out.stderr


def test_the_drawing_of_docs_architecture_is_the_codes():
    from tests.import_graph import mermaid

    page = (ROOT / "docs" / "architecture.md").read_text()
    drawn = page.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert drawn == mermaid(GRAPH), "run `python tests/import_graph.py` and paste its output into docs/architecture.md"

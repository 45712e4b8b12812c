"""bench's import graph, read from the sources with `ast` (every import, also those inside functions):
what `tests/test_layers.py` checks and `docs/architecture.md`'s drawing shows.

A module of bench is named as it is imported (`bench.methods.base` for `methods/base.py`), its layer is the
package it belongs to (`bench.protocol` for `bench.protocol.runner`; a top-level module is its own layer),
and what a layer may import is the `Imports from:` line of its package's docstring.
"""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the folders of the checkout that install as bench's packages (pyproject's package-dir)
FOLDERS = {"bench": "bench", "methods": "bench.methods", "registries": "bench.registries"}


@dataclass
class Graph:
    files: dict[str, Path] = field(default_factory=dict)  # module -> its file
    edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # module -> modules it imports

    def layer(self, module: str) -> str:
        """The package a module belongs to, below `bench` (`bench.protocol`), or the top-level module itself."""
        parts = module.split(".")
        if len(parts) == 1:
            return module
        if len(parts) == 2 and not self.files[module].name == "__init__.py":
            return module  # a top-level module: bench.api, bench.errors
        return ".".join(parts[:2])


def _module_name(root: Path, folder: str, path: Path) -> str:
    rel = path.relative_to(root / folder).with_suffix("")
    name = ".".join((FOLDERS[folder], *rel.parts))
    return name.removesuffix(".__init__")


def _imported(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: from the module's package, up `level - 1` packages
        base = module.split(".")[: None if is_package else -1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]


def _edges(graph: "Graph", targets: list[str]) -> list[str]:
    """What an import statement's targets name of bench: `from bench.x import y` imports the submodule
    bench.x.y where there is one (its package's __init__ runs first, as for every submodule: not counted),
    else the module bench.x."""
    prefix, names = targets[0], targets[1:]
    submodules = [t for t in names if t in graph.files]
    if submodules or not names:
        return submodules or [t for t in targets if t in graph.files]
    return [prefix] if prefix in graph.files else []


def read_graph(root: Path = ROOT) -> Graph:
    graph = Graph()
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if "templates" not in path.parts:
                graph.files[_module_name(root, folder, path)] = path
    for module, path in graph.files.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = _imported(module, node, path.name == "__init__.py")
                found = _edges(graph, targets) if isinstance(node, ast.ImportFrom) else\
                    [t for t in targets if t in graph.files]
                graph.edges[module].update(t for t in found if t != module)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph.files):
        if v not in index:
            visit(v)
    return found


def allowed_imports(graph: Graph) -> dict[str, set[str]]:
    """Each package's `Imports from:` line (its docstring), as the set of layers it names."""
    allowed = {}
    for module, path in graph.files.items():
        if graph.layer(module) != module:
            continue  # a module inside a package: its package's line holds
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        match = re.search(r"^Imports from:(.*?)(?:\n\n|\Z)", doc, re.M | re.S)
        if match:
            text = re.sub(r"\(.*?\)", "", match.group(1).replace("\n", " "))  # a remark in brackets names no layer
            allowed[module] = {name.strip().rstrip(".").strip() for name in text.split(",")
                               if name.strip() not in ("", "nothing of bench.")}
    return allowed


def upward_imports(graph: Graph, allowed: dict[str, set[str]]) -> list[str]:
    """Every import from one layer into another that its package's docstring does not allow."""
    wrong = []
    for module, targets in graph.edges.items():
        own = graph.layer(module)
        if own not in allowed:
            continue
        for target in sorted(targets):
            theirs = graph.layer(target)
            if theirs != own and theirs not in allowed[own]:
                wrong.append(f"{module} -> {target}")
    return wrong


def floors(graph: Graph) -> dict[str, int]:
    """Each module's floor: 1 + the highest floor it imports (1 for a module that imports none of bench)."""
    memo: dict[str, int] = {}

    def floor(v: str, seen: frozenset[str] = frozenset()) -> int:
        if v not in memo:
            memo[v] = 1 + max((floor(w, seen | {v}) for w in graph.edges[v] if w not in seen), default=0)
        return memo[v]

    return {v: floor(v) for v in graph.files}


def layer_edges(graph: Graph) -> set[tuple[str, str]]:
    """(layer, layer it imports) for every import between two layers, reduced to the arrows that no longer
    path implies (what a drawing shows)."""
    edges = {(graph.layer(a), graph.layer(b)) for a, targets in graph.edges.items() for b in targets
             if graph.layer(a) != graph.layer(b)}
    reach: dict[str, set[str]] = {}

    def below(layer: str) -> set[str]:
        if layer not in reach:
            reach[layer] = set()
            for a, b in edges:
                if a == layer:
                    reach[layer] |= {b} | below(b)
        return reach[layer]

    return {(a, b) for a, b in edges if not any(b in below(c) for x, c in edges if x == a and c != b)}


def mermaid(graph: Graph) -> str:
    """The layers and their arrows as a Mermaid flowchart (docs/architecture.md holds it; a test compares)."""
    packages = {graph.layer(m) for m in graph.files if graph.files[m].name == "__init__.py" and graph.layer(m) == m}
    lines = ["flowchart TD"]
    for layer in sorted({graph.layer(m) for m in graph.files}):
        label = f"{layer}/" if layer in packages and layer != "bench" else layer  # a package, or a module
        lines.append(f'  {layer.replace(".", "_")}["{label}"]')
    for a, b in sorted(layer_edges(graph)):
        lines.append(f"  {a.replace('.', '_')} --> {b.replace('.', '_')}")
    return "\n".join(lines) + "\n"


def _annotations(tree: ast.AST) -> list[ast.expr]:
    """Every annotation of a module: arguments, returns, annotated names."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
            found += [a.annotation for a in every if a.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def measures(graph: Graph, root: Path = ROOT) -> dict[str, object]:
    """What docs/architecture.md's before/after table counts: modules, the longest, and `Any` in annotations
    (bare: the annotation is `Any` itself; inside: `dict[str, Any]` and the like)."""
    lengths = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in graph.files.values()}
    bare = inside = 0
    for path in graph.files.values():
        for annotation in _annotations(ast.parse(path.read_text())):
            names = [n for n in ast.walk(annotation) if isinstance(n, ast.Name) and n.id == "Any"]
            bare += isinstance(annotation, ast.Name) and annotation.id == "Any"
            inside += len(names)
    longest = max(lengths, key=lambda k: lengths[k])
    return {"modules": len(graph.files), "longest": f"{longest} ({lengths[longest]} lines)",
            "Any (bare annotations)": bare, "Any (in annotations)": inside, "import cycles": len(cycles(graph))}


if __name__ == "__main__":  # python tests/import_graph.py: the drawing of docs/architecture.md
    import sys

    if sys.argv[1:2] == ["--measures"]:  # python tests/import_graph.py --measures [CHECKOUT]
        root = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else ROOT
        for key, value in measures(read_graph(root), root).items():
            print(f"{key}: {value}")
    else:
        print(mermaid(read_graph()), end="")

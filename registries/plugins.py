"""Plugins: methods, dataset readers, backbones, presets and grids from outside bench.

A plugin is found in two places:

- an installed package that declares a module under the entry-point group `bench.plugins`
  (`mypkg.bench_plugin = mypkg.bench_plugin` in its pyproject's `[project.entry-points."bench.plugins"]`);
- a folder given by `--include DIR` (every command) or `BENCH_INCLUDE` (an os.pathsep-separated list):
  every `*.py` in it not starting with `_` or `test_` is a plugin module.

Importing a plugin module registers its parts with `@METHODS.register_module(name=...)` and the like.
A folder is on `sys.path` (appended, as Python puts a script's folder there, so that it shadows nothing
installed): its files import each other by name (`from ncm import NCMHead`), its private helpers
(`_losses.py`) and its packages too, and a plugin file is imported once whichever comes first, bench or
another file's import. A helper or package name that an installed module or another plugin folder
already has is an error naming both, when the command starts.
`presets/*.py` and `grids/*.py` in a folder, or in an entry-point module's package folder, are its
presets and grids. A method's preset file is looked up beside the file that defines it first, then in
bench's own presets; a plugin preset or grid named like one of bench's is an error, never a silent
shadow.

The folders are resolved once, where a command starts (`activate`), and handed explicitly to every
process that runs: the local workers (their initializer) and SLURM jobs (the pickled job); each
imports them, and the entry points of its own environment, before it runs anything (`load`).
A plugin that fails to import is one warning line and is remembered (`failures`): an unknown name
then says what that plugin's import said.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Callable, Iterable

from bench.errors import BenchError, add_unknown_note, first_line

GROUP = "bench.plugins"
ENV = "BENCH_INCLUDE"
KINDS = ("presets", "grids")  # config folders a plugin root may hold
# bench's own presets and grids, beside this module (a plugin's are beside its own files)
PRESETS_DIR = Path(__file__).parent / "presets"
GRIDS_DIR = Path(__file__).parent / "grids"


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that did not import: `source` is its file (or entry point), `error` the exception's first line."""

    source: str
    error: str

    def line(self) -> str:
        return f"plugin {self.source} not loaded: {self.error}"


_dirs: tuple[Path, ...] | None = None  # None: from BENCH_INCLUDE (a process nobody configured)
_warn = True  # workers load quietly: bench itself has said it once
_loaded: set[str] = set()  # plugin sources imported (or tried) in this process
_failures: dict[str, PluginFailure] = {}
_done_for: tuple[Path, ...] | None = None  # the folders `load` has imported everything of
_loading = False  # a plugin that asks a registry for a name while it imports must not re-enter
_on_path: list[str] = []  # the plugin folders this process appended to sys.path
_generation = 0  # counts the sets of folders this process was given (`use`): what was read for another set is stale
_first: list[Callable[[], None]] = []  # what imports bench's own entries, before any plugin (`import_first`)


def resolve(include: Iterable[str | os.PathLike[str]] = ()) -> tuple[Path, ...]:
    """BENCH_INCLUDE's folders, then `include`'s, absolute and each once; a missing folder is an error."""
    raw = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p] + [str(p) for p in include]
    dirs: list[Path] = []
    for entry in raw:
        path = Path(entry).expanduser().resolve()
        if not path.is_dir():
            raise BenchError(f"--include {entry}: not a directory (plugin folders come from --include DIR and "
                             f"{ENV}={os.pathsep.join(raw)})")
        if path not in dirs:
            dirs.append(path)
    return tuple(dirs)


def use(dirs: Iterable[str | Path], *, warn: bool = True) -> None:
    """This process's plugin folders are exactly `dirs` (a worker or a job is told, never guesses).
    Modules already imported stay registered; the method catalogue is read again for the new set."""
    global _dirs, _warn, _done_for, _generation
    _dirs = tuple(Path(d).resolve() for d in dirs)
    _warn = warn
    _put_on_path(_dirs)
    _done_for = None  # the folders are looked at again: a file added since is imported by `load`
    _generation += 1  # what was read of the registered classes for the old set is read again (the catalogue)


def activate(include: Iterable[str | os.PathLike[str]] = ()) -> tuple[Path, ...]:
    """Where a command starts: BENCH_INCLUDE plus `--include`, checked for names that would shadow bench's."""
    dirs = resolve(include)
    use(dirs)
    for kind in KINDS:
        config_files(kind)  # raises on a clash, before anything else is done
    check_names(dirs)
    return dirs


def _put_on_path(dirs: tuple[Path, ...]) -> None:
    """The folders, and no other plugin folder, at the end of sys.path: a folder's modules import by name
    as a script's do, and never shadow an installed module of the same name. A folder taken off also
    takes what was imported by name from it (another folder may have a module of that name); its
    modules' bench names stay, as their registrations do."""
    for entry in [e for e in _on_path if Path(e) not in dirs]:
        while entry in sys.path:
            sys.path.remove(entry)
        _on_path.remove(entry)
        for name, module in list(sys.modules.items()):
            file = _file_of(module)
            if not name.startswith("bench_plugin_") and file is not None and file.is_relative_to(entry):
                del sys.modules[name]
    for folder in map(str, dirs):
        if folder not in sys.path:
            sys.path.append(folder)
            _on_path.append(folder)


def helper_modules(folder: Path) -> dict[str, Path]:
    """What a folder holds only to be imported by name: private modules (`_losses.py`) and packages (a
    folder with `__init__.py`), by the name an import gives them."""
    found = {p.stem: p for p in sorted(folder.glob("_*.py")) if p.stem != "__init__"}
    found.update({p.parent.name: p.parent for p in sorted(folder.glob("*/__init__.py"))})
    return found


def _location(name: str) -> Path | None:
    """Where `import name` would take module `name` from, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    where = spec.origin if spec.origin not in (None, "built-in", "frozen") else\
        next(iter(spec.submodule_search_locations or ()), None)
    return Path(where).resolve() if where else Path(f"<{spec.origin or name}>")


def check_names(dirs: Iterable[Path]) -> None:
    """A helper or package of a plugin folder whose name an installed module (or another plugin folder)
    has would silently be that other one when imported: an error naming both, before anything runs."""
    seen: dict[str, Path] = {}
    for folder in dirs:
        for name, path in helper_modules(folder).items():
            if name in seen:
                raise BenchError(f"plugin folders {seen[name].parent} and {folder} both have a module {name!r} "
                                 f"({seen[name].name}, {path.name}); rename one: both are imported by that name")
            seen[name] = path
            where = _location(name)
            if where is not None and where not in (path.resolve(), (path / "__init__.py").resolve()):
                raise BenchError(f"plugin module {path} has the name {name!r} of {where}, which `import {name}` "
                                 f"would give instead; rename {path.name}")


def active_dirs() -> tuple[Path, ...]:
    """The plugin folders of this process: what `use` set, else BENCH_INCLUDE's."""
    return _dirs if _dirs is not None else resolve()


def is_plugin_file(path: Path) -> bool:
    """A folder's plugin modules: every `*.py` file but private ones (`_*.py`) and tests (`test_*.py`, as
    `bench new` writes beside a method: pytest runs them, bench never imports them); a directory named `x.py` is
    none."""
    return path.is_file() and not path.name.startswith(("_", "test_"))


@functools.lru_cache(maxsize=1)
def _entry_points() -> tuple[EntryPoint, ...]:
    """This environment's `bench.plugins` entry points (read once: scanning the installed packages'
    metadata costs tens of milliseconds, and registries ask at every lookup)."""
    return tuple(sorted(entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value)))


def _module_path(name: str) -> Path | None:
    """The file of module `name` without importing it (nor, for `a.b`, its package `a`): a plugin that
    fails must fail where bench imports it, with a warning, not here."""
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if len(parts) == 1:
        return Path(spec.origin) if spec.origin and spec.origin not in ("built-in", "frozen") else None
    folder = next(iter(spec.submodule_search_locations or ()), None)
    if folder is None:
        return None
    path = Path(folder)
    for part in parts[1:]:
        path = path / part
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_dir(module: str) -> Path | None:
    """The package folder of an entry point's module (`a.b` → `a/`, `a` → `a/` for a package); None for
    a single-file top-level module, whose folder is site-packages itself: neither its presets nor its grids."""
    path = _module_path(module)
    if path is None or ("." not in module and path.name != "__init__.py"):
        return None
    return path.parent.resolve()


def roots() -> list[Path]:
    """Every folder whose `presets/` and `grids/` are plugins': the include folders, then each entry
    point module's package folder."""
    found = list(active_dirs())
    for ep in _entry_points():
        folder = _package_dir(ep.module)
        if folder is not None and folder not in found:
            found.append(folder)
    return found


def sources() -> list[Path]:
    """The files that make up the plugins, for the catalogue's fingerprint: every `.py` in the include
    folders (their presets and grids, private helpers and packages included), and every `.py` under an
    entry-point module's package."""
    files: list[Path] = []
    for folder in active_dirs():
        files += [p for p in sorted(folder.glob("*.py")) if not p.name.startswith("test_")]
        files += [p for kind in KINDS for p in sorted((folder / kind).glob("*.py"))]
        files += [p for package in sorted(folder.glob("*/__init__.py")) for p in sorted(package.parent.rglob("*.py"))]
    for ep in _entry_points():
        package, path = _package_dir(ep.module), _module_path(ep.module)
        files += sorted(package.rglob("*.py")) if package is not None else [path] if path is not None else []
    return [p for p in dict.fromkeys(files) if p.is_file()]  # a directory named `x.py` holds no source


def fingerprint_text() -> str:
    """What names the plugins besides their files' contents: the entry points and the folders."""
    return "\n".join([f"{ep.name}={ep.value}" for ep in _entry_points()] + [str(d) for d in active_dirs()])


def config_files(kind: str) -> dict[str, Path]:
    """Bench's own `kind` files ("presets" or "grids") and the plugins', by name. A plugin's file of a name
    bench (or another plugin) already has is an error naming both files."""
    own = PRESETS_DIR if kind == "presets" else GRIDS_DIR
    files = {p.stem: p for p in sorted(own.glob("*.py")) if not p.stem.startswith("_")}
    for root in roots():
        for path in sorted((root / kind).glob("*.py")):
            if path.stem.startswith("_") or not path.is_file():
                continue
            if path.stem in files and files[path.stem] != path:
                raise BenchError(f"plugin {kind[:-1]} {path} has the name {path.stem!r} of {files[path.stem]}; "
                                 f"rename the plugin's file (a plugin never replaces another {kind[:-1]})")
            files[path.stem] = path
    return files


def module_name(path: Path) -> str:
    """A plugin file's module name: stable (the same file, the same name in every process, so that a
    worker's classes are the command's) and unique (two folders' `my.py` never clash)."""
    digest = hashlib.sha1(str(path.parent).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"bench_plugin_{digest}_{stem}"


def _import_file(path: Path) -> None:
    """Import a plugin file under its bench name (`module_name`), and under its own name too where
    `import <stem>` would find this file: another plugin file that imports it, before or after, gets
    this module rather than a second copy (whose classes would register twice)."""
    name = module_name(path)
    by_name = sys.modules.get(path.stem)
    if by_name is not None and (file := _file_of(by_name)) is not None and file.resolve() == path.resolve():
        sys.modules[name] = by_name  # another plugin file imported it by its name first: the same module
        return
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    aliases = [name] + ([path.stem] if _location(path.stem) == path.resolve() else [])
    for alias in aliases:
        sys.modules[alias] = module  # before it runs: dataclasses and pickle look their module up there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for alias in aliases:
            sys.modules.pop(alias, None)
        raise


def _file_of(module: object) -> Path | None:
    """A module's file as it says it (absolute for an import from sys.path), None for one without."""
    try:
        file = getattr(module, "__file__", None)
    except Exception:  # a lazy module's attribute lookup may itself import and fail
        return None
    return Path(file) if isinstance(file, str) else None


def load() -> list[PluginFailure]:
    """Import every plugin of this process not imported yet (entry points, then the folders' files, each
    in name order); a failure is one warning line (once per process) and the others still load. Returns
    every failure so far."""
    global _loading, _done_for
    dirs = active_dirs()
    if _loading or dirs == _done_for:
        return list(_failures.values())
    _loading = True
    try:
        todo: list[tuple[str, str, object]] = []
        for ep in _entry_points():
            path = _module_path(ep.module)
            todo.append((f"entry-point:{ep.value}", str(path) if path else f"entry point {ep.name} = {ep.value}",
                         ep.module))
        for folder in dirs:
            for path in sorted(folder.glob("*.py")):
                if is_plugin_file(path):
                    todo.append((str(path), str(path), path))
        todo = [item for item in todo if item[0] not in _loaded]
        if todo:  # bench's own entries first: a plugin taking one of their names fails, never bench
            for own_entries in _first:
                own_entries()  # the registries' call back into `load` returns at once (`_loading`)
        for key, source, what in todo:
            _loaded.add(key)
            try:
                if isinstance(what, Path):
                    _import_file(what)
                else:
                    importlib.import_module(str(what))
            except (Exception, SystemExit) as err:  # a plugin's own bug, a missing dependency, or a plugin that
                # exits at import (sys.exit in a script turned plugin): one warning, and the rest still works
                _record(PluginFailure(source, first_line(err)))
        _done_for = dirs
    finally:
        _loading = False
    return list(_failures.values())


def _record(failure: PluginFailure) -> None:
    if failure.source in _failures:
        return
    _failures[failure.source] = failure
    if _warn:
        print(f"bench: warning: {failure.line()}", file=sys.stderr)


def failures() -> list[PluginFailure]:
    """The plugins that did not import in this process."""
    return list(_failures.values())


def failure_note() -> str:
    """What an `unknown NAME` error appends while a plugin is broken: it may have been that name."""
    broken = failures()
    return "".join(f"; {f.line()}" for f in broken)


add_unknown_note(failure_note)


def preset_dir(defining_file: str | Path | None, preset_file: str) -> str | None:
    """The `presets/` folder beside the file that defines a method, when it holds the method's preset
    file; None: bench's own presets."""
    if defining_file is None:
        return None
    folder = Path(defining_file).resolve().parent / "presets"
    return str(folder) if (folder / f"{preset_file}.py").is_file() else None


def generation() -> int:
    """Which set of plugin folders this process has (`use` counts them): a cache of what is registered keys on it."""
    return _generation


def import_first(own_entries: Callable[[], None]) -> None:
    """Have `load` call `own_entries` (the registries' import of bench's own entries) before it imports a plugin."""
    if own_entries not in _first:
        _first.append(own_entries)


def reset() -> None:
    """Forget this process's plugin state (tests): the folders (off sys.path) and the failures; the
    modules imported under bench names stay imported."""
    global _dirs, _warn, _done_for
    _dirs, _warn, _done_for = None, True, None
    _put_on_path(())
    _entry_points.cache_clear()
    _loaded.clear()
    _failures.clear()


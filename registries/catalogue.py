"""What the commands that run nothing (`list`, `--dry-run`, `status`, the "nothing to run" check)
need to know about the registered methods and backbones, without importing them: the methods import
torch and the backbones timm, 2 to 5 s on a 2-core machine, for a command that answers in a moment.

The catalogue is read off the classes themselves (their `runs_on`, `preset_file`, `hparam_choices`;
the paper backbones' block counts) the first time it is needed, and kept in a JSON file named by a hash
of the files that define them (`methods/*.py` (bench.methods), `bench/core/runs_on.py`,
`bench/features/backbones.py`, `bench/features/weights.py`, and the plugins' files and entry points,
`bench.registries.plugins.sources`) and of the environment that read them (the interpreter, torch's and timm's
versions): a changed or added source file, or another venv, makes the next command import them once and write
a new catalogue. Nothing is written twice by hand, and nothing can go stale. While a plugin fails to import, or
one of bench's own backbones cannot be built, no catalogue is written: the fix (a file, a dependency installed)
must be seen by the next command, and a broken environment must not leave its reading to every later one.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Mapping

from bench.errors import BenchError, unknown
from bench.core.runs_on import RunsOn
from bench.core.storage import write_atomic

from bench.core.resources import HERE, resource_dir


@dataclass(frozen=True)
class MethodInfo:
    runs_on: RunsOn
    preset_file: str
    hparam_choices: Mapping[str, tuple[Any, ...]]
    preset_dir: str | None = None  # the `presets/` beside a plugin method's file; None: bench's own
    source_files: tuple[str, ...] = ()  # the files of its class and bases (`bench.core.provenance.method_sha256`)

    def preset_path(self) -> Path:
        """The method's preset file: beside the file that defines it, else among bench's own presets."""
        from bench.registries import PRESETS_DIR

        return Path(self.preset_dir or PRESETS_DIR) / f"{self.preset_file}.py"

    @property
    def inputs(self) -> str:
        return self.runs_on.inputs

    @property
    def sees_past_steps(self) -> bool:
        return self.runs_on.sees_past_steps


SCHEMA = b"catalogue 2: source_files\0"  # what an entry holds: a catalogue written with fewer keys is not read


def _sources() -> list[Path]:
    return sorted(resource_dir("methods").glob("*.py")) + [HERE / name for name in ("core/runs_on.py",
                                                                                    "features/backbones.py",
                                                                                    "features/weights.py")]


def _environment() -> str:
    """What the catalogue depends on beyond the sources: the environment (its prefix: a venv's folder), the
    interpreter and the torch and timm it imports, so that two environments sharing a home directory (a login and
    a compute node, a CPU and a GPU venv) keep a catalogue each. The interpreter by what it is, not by the name it
    was started as: the `bench` script runs the venv's `python3`, a notebook or a shell its `python`, one
    environment whose second name made the first `bench.results` after `bench run` import torch, timm and every
    method again, and build every backbone on the meta device (23-30 s on 2 cores, against 3 s:
    docs/performance.md)."""
    versions = []
    for dist in ("torch", "timm"):
        try:
            versions.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            versions.append(f"{dist} none")
    return "\0".join([sys.prefix, os.path.realpath(sys.executable), sys.version, *versions])


def _fingerprint() -> str:
    from bench.registries import plugins

    digest = hashlib.sha1(SCHEMA)
    digest.update(_environment().encode() + b"\0")
    for path in _sources():  # by full path: an entry names its method's files (two copies of bench, two catalogues)
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    # plugins by their full paths: a plugin method's preset folder is kept as an absolute path
    digest.update(plugins.fingerprint_text().encode() + b"\0")
    for path in plugins.sources():
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _entry(cls: Any) -> dict[str, Any]:
    import inspect

    from bench.registries.plugins import preset_dir
    from bench.core.provenance import method_source_files

    try:
        defined_in: str | None = inspect.getfile(cls)
    except (TypeError, OSError):  # a class made at run time has no file
        defined_in = None
    return {"runs_on": cls.runs_on.to_dict(), "preset_file": cls.preset_file,
            "hparam_choices": {k: list(v) for k, v in cls.hparam_choices.items()},
            "preset_dir": preset_dir(defined_in, cls.preset_file), "source_files": method_source_files(cls)}


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench"


def read_classes() -> dict[str, Any]:
    """The catalogue, from the registered classes (imports the methods and the backbones)."""
    from bench.registries import BACKBONES, METHODS, load_all

    load_all()
    methods = {name: _entry(cls) for name, cls in METHODS.module_dict.items()}
    depths, unread = {}, []
    for name, cls in BACKBONES.module_dict.items():
        if name == "timm":
            continue
        try:
            depths[name] = block_count(name, {})
        except BenchError:  # a plugin's backbone that needs options: asked again (and said) where it is used
            if cls.__module__.startswith("bench."):  # one of bench's own: this environment cannot build it
                unread.append(name)
    return {"methods": methods, "backbones": sorted(BACKBONES.module_dict), "depths": depths, "unread": unread,
            "backbone_docs": {name: ((cls.__doc__ or "").strip().splitlines() or [cls.__name__])[0]
                              for name, cls in BACKBONES.module_dict.items()}}


def catalogue() -> dict[str, Any]:
    """The catalogue of this process's methods and backbones (read once per set of plugin folders)."""
    from bench.registries import plugins

    return _catalogue(plugins.generation())


@functools.lru_cache(maxsize=1)
def _catalogue(generation: int) -> dict[str, Any]:
    path = _cache_dir() / f"catalogue-{_fingerprint()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    from bench.registries.plugins import failures

    data = read_classes()
    # not kept while a plugin is broken (the next command imports again, and sees it fixed or warns again), nor
    # while one of bench's own backbones cannot be built here (a broken or patched timm): never a catalogue that
    # every later process of these sources and this environment would read
    if failures() or data.get("unread"):
        return data
    try:  # a read-only home only costs the next command the imports again
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True))
    except OSError:
        pass
    return data


catalogue.cache_clear = _catalogue.cache_clear  # type: ignore[attr-defined]  # read again: the tests


def method_info(name: str) -> MethodInfo | None:
    """A registered method's catalogue entry; None for an unknown name. A class registered at run time
    (not in `methods/`) is read from the registry itself."""
    entry = catalogue()["methods"].get(name)
    if entry is None:
        from bench.registries import METHODS

        cls = METHODS.get(name)
        if cls is None:
            return None
        entry = _entry(cls)
    return MethodInfo(RunsOn.from_dict(entry["runs_on"]), entry["preset_file"],
                      {k: tuple(v) for k, v in entry["hparam_choices"].items()}, entry.get("preset_dir"),
                      tuple(entry.get("source_files", ())))


def known_method(name: str) -> MethodInfo:
    """A registered method's catalogue entry, for a name already checked (or that must be one): an unknown name
    is the one-line error that lists the registered methods."""
    info = method_info(name)
    if info is None:
        raise unknown("method", name, method_names())
    return info


def method_names() -> list[str]:
    return sorted(catalogue()["methods"])


def backbone_names() -> list[str]:
    return list(catalogue()["backbones"])


def backbone_depth(name: str, options: Mapping[str, Any]) -> int:
    """How many transformer blocks backbone `name` has with these options: from the catalogue for a
    paper backbone at its own size, else by building it on the meta device (imports timm)."""
    depths = catalogue()["depths"]
    if name in depths and "depth" not in options.get("kwargs", {}):
        return int(depths[name])
    return block_count(name, options)


def block_count(name: str, options: Mapping[str, Any]) -> int:
    """How many transformer blocks backbone `name` has (what tail methods train; 0 for a backbone
    without), found by building it on the meta device: no weights are read and no memory is filled."""
    import torch

    from bench.registries import BACKBONES

    family, _, model_name = name.partition(":")
    cls = BACKBONES.get(family)
    kwargs = options.get("kwargs", {})
    try:
        with torch.device("meta"):
            model = cls(model_name=model_name, image_shape=(224, 224, 3), pretrained=False, kwargs=kwargs)
    except BenchError:
        raise
    except Exception as err:  # the model factory's own complaint about its arguments
        raise BenchError(f"backbone {name!r} cannot be built with backbone.kwargs {kwargs}: "
                         f"{type(err).__name__}: {err}") from None
    return len(getattr(getattr(model, "model", model), "blocks", ()))

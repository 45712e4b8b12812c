"""`bench new method|dataset NAME --dir DIR [--setting incd|mixed]`: a working starting point outside bench.

It writes files only: the templates in `bench/kit/templates/` filled by `string.Template` with the name
and what follows from it (module and class names), so nothing a user types is ever executed or
pasted into code unchecked: the name must match `NAME_PATTERN` first. An existing file is never
overwritten: a new method must not silently replace someone's work. Everything is checked before the first file
is written (the name, its slug and preset file free, every file writable), so a refusal leaves nothing behind.
A method's template is the setting's it runs (`METHOD_TEMPLATES`): class-iNCD's by default, or the mixed setting's
(continual category discovery: a labelled first step, `step.labels`), each with its preset file; the test is the same.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from bench.errors import BenchError

# A name a shell takes unquoted and a Python module can be made of: letters, digits, '-' and '_'.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")
NAME_RULE = "1 to 40 letters, digits, '-' or '_', starting with a letter (e.g. proto-head)"


@dataclass(frozen=True)
class Kind:
    """What `bench new KIND` writes: (template, path relative to DIR with `$module` in it) pairs."""

    files: tuple[tuple[str, str], ...]
    registry: str  # the registry whose names NAME must not take


KINDS: dict[str, Kind] = {
    "method": Kind((("method.py.tmpl", "$module.py"), ("method_preset.py.tmpl", "presets/$module.py"),
                    ("method_test.py.tmpl", "test_$module.py")), "METHODS"),
    "dataset": Kind((("dataset.py.tmpl", "$module.py"), ("dataset_test.py.tmpl", "test_$module.py")), "DATASETS"),
}
# the method file and preset file of each setting (`bench new method --setting`), in place of KINDS' (class-iNCD's)
METHOD_TEMPLATES: dict[str, tuple[str, str]] = {"incd": ("method.py.tmpl", "method_preset.py.tmpl"),
                                                "mixed": ("method_mixed.py.tmpl", "method_mixed_preset.py.tmpl")}
DEFAULT_SETTING = "incd"


def names_for(name: str) -> dict[str, str]:
    """The template's substitutions: `proto-head` → module `proto_head`, class `ProtoHead`."""
    if not NAME_PATTERN.fullmatch(name):
        raise BenchError(f"bad name {name!r}: use {NAME_RULE}")
    module = name.replace("-", "_").lower()
    if keyword.iskeyword(module):
        raise BenchError(f"bad name {name!r}: {module!r} is a Python keyword; use {NAME_RULE}")
    class_name = "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]", name) if part)
    return {"name": name, "module": module, "class_name": class_name, "test_file": f"test_{module}.py"}


def _taken(kind: Kind, name: str) -> list[str]:
    """Registered names that `name` would collide with: the name itself (case-insensitive: `baseline` is
    Baseline) or, for a method, its slug (`baseline-pp` is Baseline++'s)."""
    from bench import registries
    from bench.config.spec import method_slug

    registries.load_all()
    registry = getattr(registries, kind.registry)
    same = [known for known in registry.module_dict if known.lower() == name.lower()]
    if kind.registry == "METHODS":
        same += [known for known in registry.module_dict if method_slug(known) == method_slug(name) and known not in same]
    return same


def _preset_taken(module: str) -> str | None:
    """The preset file bench (or a loaded plugin) already has under `module`'s name: a new method's
    `presets/<module>.py` beside it would be refused for taking that name."""
    from bench.registries.plugins import config_files

    path = config_files("presets").get(module)
    return str(path) if path is not None else None


def _unwritable_reason(path: Path) -> str | None:
    """Why `path` cannot be created (a file where one of its folders would be, a folder that does not take new
    files), or None; creates nothing."""
    import tempfile

    if path.exists():
        return None  # reported as an existing file
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, where {path} needs a folder"
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as err:
        return f"{ancestor} does not take new files ({err.strerror or err})"
    return None


def new(kind_name: str, name: str, directory: Path, setting: str | None = None) -> list[Path]:
    """Write the files of a new `kind_name` called `name` under `directory`; the paths written. A method runs
    `setting` (`METHOD_TEMPLATES`; default class-iNCD); a dataset takes none (it serves every setting)."""
    if kind_name not in KINDS:
        raise BenchError(f"unknown kind {kind_name!r}; bench new makes: {', '.join(KINDS)}")
    kind = KINDS[kind_name]
    if kind_name != "method" and setting is not None:
        raise BenchError(f"--setting is for a method: a {kind_name} serves every setting; leave it out")
    if kind_name == "method":
        setting = DEFAULT_SETTING if setting is None else setting
        if setting not in METHOD_TEMPLATES:
            raise BenchError(f"unknown setting {setting!r}; bench new method writes: {', '.join(METHOD_TEMPLATES)}")
        method, preset = METHOD_TEMPLATES[setting]
        kind = Kind(((method, kind.files[0][1]), (preset, kind.files[1][1]), *kind.files[2:]), kind.registry)
    values = names_for(name)
    taken = _taken(kind, name)
    if taken:
        raise BenchError(f"a {kind_name} named {taken[0]!r} is already registered (or has the slug "
                         f"{name.lower()!r}); choose another name")
    if kind_name == "method" and (clash := _preset_taken(values["module"])) is not None:
        raise BenchError(f"bench has a preset file named {values['module']!r} ({clash}); a new method's "
                         f"presets/{values['module']}.py could not take that name: choose another name")
    targets = [(template, Path(directory) / Template(path).substitute(values)) for template, path in kind.files]
    existing = [str(path) for _, path in targets if path.exists()]
    if existing:
        raise BenchError(f"{existing[0]} exists; bench new never overwrites a file (remove it or choose another "
                         f"name or --dir)")
    for _, path in targets:  # every file can be written before the first is
        reason = _unwritable_reason(path)
        if reason is not None:
            raise BenchError(f"cannot write {path}: {reason}; choose another --dir")
    texts = [(path, Template(_template(template)).substitute(values)) for template, path in targets]
    for path, text in texts:  # every template filled before the first file is written
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x") as fh:  # "x": a file that appeared meanwhile is not overwritten either
            fh.write(text)
    return [path for path, _ in texts]


def _template(filename: str) -> str:
    return resources.files("bench.kit.templates").joinpath(filename).read_text()

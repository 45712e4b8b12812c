"""How often one run's path enters each of bench's files: the back and forth that a reader following the
run through the code follows too.

A file is entered when one of its functions is called (or one of its generators resumed) from another
file. Two counts per file:

- places: the functions of other files whose calls enter it (a function's nested functions, lambdas and
  comprehensions are read with it, so they are part of it). A loop's calls, or a hook the step loop calls
  once per step, are one place: this is what a reader goes back and forth for;
- calls: every entry, loops included (a method's batches, the step loop's steps).

A call made through a library (torch's `no_grad` wrapper, an `nn.Module`'s `__call__`) comes from the bench
function that made it; imports are not the run's path, so what an import runs is left out.

    python tests/run_path.py demo      # the demo grid's first run: class-iNCD on digits, pixels
    python tests/run_path.py views     # CaSSLe on the smoke grid's tiny ViT and a tiny CIFAR-10: two views
    python tests/run_path.py views --detail bench/features/views.py   # where it is entered from
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: `tests` importable
    sys.path.insert(0, str(ROOT))
# bench's sources as the checkout holds them (methods/ and registries/ install as bench.methods, bench.registries)
FOLDERS = tuple(str(ROOT / folder) + os.sep for folder in ("bench", "methods", "registries"))


@dataclass
class Entries:
    """Per bench file (relative to the checkout): every call into it from another file, and per place that
    enters it (`file:function` of the caller), the functions it enters."""

    calls: Counter[str] = field(default_factory=Counter)
    places: dict[str, dict[str, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))

    def visits(self) -> dict[str, int]:
        """Per file, the places that enter it."""
        return {file: len(places) for file, places in self.places.items()}

    def table(self) -> list[tuple[str, int, int]]:
        """(file, places, calls), the most entered first."""
        visits = self.visits()
        return sorted(((f, visits[f], self.calls[f]) for f in visits), key=lambda r: (-r[1], -r[2], r[0]))


def _ours(filename: str) -> bool:
    return filename.startswith(FOLDERS)


def _name(code: CodeType) -> str:
    return str(Path(code.co_filename).relative_to(ROOT))


def _qualname(code: CodeType) -> str:
    """`Class.method`; Python 3.10, which has no qualified names of code, gives the bare name."""
    return getattr(code, "co_qualname", code.co_name)


def _place(code: CodeType) -> str:
    """`file:function`, a nested function's or a comprehension's being its enclosing function's."""
    return f"{_name(code)}:{_qualname(code).split('.<locals>')[0]}"


def _caller(frame: FrameType) -> FrameType | None:
    """The nearest of bench's frames that called `frame`, through libraries; None for the import machinery's
    calls (a meta path finder's `find_spec`) and for a call from outside bench."""
    caller = frame.f_back
    while caller is not None and not _ours(caller.f_code.co_filename):
        if caller.f_code.co_filename.startswith("<frozen importlib"):
            return None
        caller = caller.f_back
    return caller


def measure(run: Callable[[], Any]) -> Entries:
    """The entries into bench's files while `run()` runs (in this thread), imports left out."""
    entries = Entries()
    importing = 0  # module bodies being run: what they call is the import's, not the run's

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal importing
        code = frame.f_code
        if code.co_name == "<module>":
            importing += 1 if event == "call" else -1 if event == "return" else 0
            return
        if event != "call" or importing or not _ours(code.co_filename):
            return
        caller = _caller(frame)
        if caller is None or caller.f_code.co_filename == code.co_filename:
            return
        entries.calls[_name(code)] += 1
        entries.places[_name(code)][_place(caller.f_code)].add(_qualname(code))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entries


def demo_run(results: Path) -> Callable[[], Any]:
    """The demo grid's first run (class-iNCD on digits with the pixel backbone, frozen features)."""
    from bench.config.grids import expand, load_grid
    from bench.protocol.runner import execute

    spec = sorted(expand(load_grid("demo")), key=lambda s: s.run_id)[0]
    return lambda: execute(spec, results)


def views_run(results: Path) -> Callable[[], Any]:
    """CaSSLe's 2-step run on the smoke grid's tiny ViT and a tiny CIFAR-10 written in its own format: two
    differently augmented views per image (the real datasets' policy), the prefix's tokens computed live."""
    from bench.config.grids import expand, load_grid
    from bench.config.presets import load_preset
    from bench.protocol.runner import execute
    from tests.fixtures_datasets import write_cifar10
    from tests.test_incremental import TINY_VIT

    known = load_preset("CaSSLe", "equations")[0]
    short = {k: v for k, v in TINY_VIT.items() if not k.startswith("method.") or k[7:] in known}
    root = write_cifar10(results / "data")
    (spec,) = expand(load_grid("smoke"), methods=["CaSSLe:equations"], datasets=["cifar10"], splits=["2-step"],
                     seeds=[0], options={**short, "dataset.root": str(root)})
    return lambda: execute(spec, results)


RUNS = {"demo": demo_run, "views": views_run}


def run_path(name: str) -> Entries:
    """The path of the run `name` (`RUNS`), run from scratch in a temporary results folder (its feature
    bank too: `BENCH_CACHE_DIR` is not read)."""
    os.environ.pop("BENCH_CACHE_DIR", None)
    with tempfile.TemporaryDirectory() as tmp:
        return measure(RUNS[name](Path(tmp)))


def main(argv: list[str]) -> int:
    detail = argv[argv.index("--detail") + 1:][:1] if "--detail" in argv else []
    names = [a for a in argv if a in RUNS] or list(RUNS)
    for name in names:
        entries = run_path(name)
        print(f"{name}: the files its path enters, most first\n  places   calls  file")
        for file, places, calls in entries.table():
            print(f"  {places:6d}  {calls:6d}  {file}")
        for file in detail:
            print(f"{file} is entered from:")
            for place, callees in sorted(entries.places.get(file, {}).items()):
                print(f"  {place} -> {', '.join(sorted(callees))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

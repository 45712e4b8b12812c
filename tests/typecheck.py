"""Type-check bench as it installs: `python tests/typecheck.py` runs mypy over the one package `bench`, with
`methods/` and `registries/` in it as `bench.methods` and `bench.registries` (pyproject's package-dir), so that
every import between them is checked as the package imports it (mypy reads a checkout's folders as they lie,
where `methods/` would be a package of its own and every `bench.methods` import unresolved).

It lays the package out in `.typecheck/` (git-ignored, made anew each time; mypy's cache beside it keeps a second
run fast) as symbolic links to the checkout's files and runs mypy there with pyproject's `[tool.mypy]`; the lines it prints name the checkout's files (`methods/base.py`, not
`bench/methods/base.py`). Extra arguments go to mypy. Exit status: mypy's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"methods": "methods", "registries": "registries"}  # below bench/ in an install -> the checkout's folder


def lay_out(into: Path) -> Path:
    """bench/ as it installs, in `into`: a link per entry of the checkout's bench/, and the mapped folders."""
    package = into / "bench"
    package.mkdir()
    for entry in (ROOT / "bench").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (package / name).symlink_to(ROOT / folder)
    return package


def checkout_path(line: str) -> str:
    """A line of mypy's naming a file of the laid-out package, with the checkout's path of that file."""
    for name, folder in MAPPED.items():
        if line.startswith(f"bench/{name}/"):
            return folder + line[len(f"bench/{name}"):]
    return line


def main(argv: list[str]) -> int:
    tree = ROOT / ".typecheck"
    shutil.rmtree(tree / "bench", ignore_errors=True)
    tree.mkdir(exist_ok=True)
    lay_out(tree)
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tree / "cache"), "-p", "bench", *argv],
                         cwd=tree, capture_output=True, text=True, env={**os.environ, "MYPYPATH": ""})
    for line in out.stdout.splitlines():
        print(checkout_path(line))
    sys.stderr.write(out.stderr)
    return out.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

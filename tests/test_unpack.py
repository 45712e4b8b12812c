"""`bench.core.unpack` against hostile archives (tests/archive_attacks.py's cases): in this process, and as the
script on every Python found here (Debian 12's /usr/bin/python3.11, the oldest `requires-python` admits, and
python3.10 to python3.14 on PATH, pyenv's shims included), each on a bare interpreter: no pytest, no numpy."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import archive_attacks as attacks

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ["/usr/bin/python3.11", *(f"python3.{minor}" for minor in range(10, 15))]


@pytest.mark.parametrize("case", attacks.CASES, ids=[case.name for case in attacks.CASES])
def test_each_hostile_archive_is_refused_and_writes_nothing_outside(case, tmp_path):
    said = attacks.check(case, tmp_path)
    assert said.startswith("refused: refused to unpack" if case.refuses else "unpacked")


def _pyenv_versions(minor: str) -> list[str]:
    """The versions pyenv holds of `python3.<minor>` (its shim runs none unless told which)."""
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return []
    out = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, timeout=30)
    return [v for v in out.stdout.split() if v.startswith(f"3.{minor}.")]


def _runnable(python: str) -> dict[str, dict[str, str]]:
    """Each interpreter `python` runs ({its sys.executable: the environment that runs it}; one per pyenv version
    behind a shim), none where it is missing."""
    exe = python if os.path.isabs(python) else shutil.which(python)
    if exe is None or not os.access(exe, os.X_OK):
        return {}
    found: dict[str, dict[str, str]] = {}
    for env in [{}] + [{"PYENV_VERSION": v} for v in _pyenv_versions(python.rsplit(".", 1)[1])]:
        probe = subprocess.run([exe, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                               timeout=30, env={**os.environ, **env})
        if probe.returncode == 0:
            found.setdefault(probe.stdout.strip(), env)
    return found


@pytest.mark.parametrize("python", PYTHONS)
def test_the_attacks_script_passes_on_each_python_found(python):
    found = _runnable(python)
    if not found:
        pytest.skip(f"no {python} here")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}  # nothing of this process leaks in
    for exe, env in found.items():
        run = subprocess.run([exe, "-W", "error", str(ROOT / "tests" / "archive_attacks.py")], capture_output=True,
                             text=True, timeout=120, cwd="/", env={**clean, **env, "PYTHONPATH": str(ROOT)})
        lines = run.stdout.splitlines()
        assert run.returncode == 0, f"{exe}:\n{run.stdout}\n{run.stderr}"
        assert lines[0].startswith("archive attacks on Python") and lines[-1] == f"all {len(attacks.CASES)} cases passed"
        assert len(lines) == len(attacks.CASES) + 2
        print(lines[0], "->", lines[-1], file=sys.stderr)

"""The suite runs with its own cache, config and working directories (tests/conftest.py): what a user's cache
holds does not change its outcome. The method catalogue is never kept from an environment that could not read
every one of bench's own entries, and is kept per interpreter and torch/timm versions (registries/catalogue.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


import pytest
import bench.registries.catalogue as catalogue

ROOT = Path(__file__).resolve().parents[1]
# what a process whose timm could not build the models once left: every backbone but `pixels` missing
POISON = ("import json; from bench.registries import catalogue as c; path = c._cache_dir() / "
          "f'catalogue-{c._fingerprint()}.json'; data = c.read_classes(); data['depths'] = {'pixels': 0}; "
          "path.parent.mkdir(parents=True, exist_ok=True); path.write_text(json.dumps(data)); "
          "c.catalogue.cache_clear(); print(json.dumps(c.catalogue()['depths']))")


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_a_poisoned_catalogue_in_the_users_cache_does_not_change_the_suites_outcome(tmp_path):
    user = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "user-cache")}
    poisoned = subprocess.run([sys.executable, "-c", POISON], capture_output=True, text=True, cwd=ROOT, env=user)
    assert json.loads(poisoned.stdout.splitlines()[-1]) == {"pixels": 0}, poisoned.stderr  # read by a bare process
    # the catalogue against the classes, and the two light commands that read the backbones' depths from it
    light = "tests/test_light_commands.py::test_commands_that_run_nothing_import_no_torch"
    tests = ["tests/test_light_commands.py::test_the_catalogue_is_what_the_classes_say",
             f"{light}[list-backbones]", f"{light}[dry-run-smoke]"]
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                           capture_output=True, text=True, cwd=ROOT, env=user)
    assert suite.returncode == 0, suite.stdout[-3000:]
    assert suite.stdout.splitlines()[-1].startswith("3 passed")  # none skipped, none deselected
    # the control: the same tests without the suite's own directories (no conftest) read the poisoned catalogue
    bare = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", tests[0]],
                          capture_output=True, text=True, cwd=ROOT, env=user)
    assert bare.returncode == 1 and "'pixels': 0" in bare.stdout, bare.stdout[-3000:]


def test_a_catalogue_read_where_bench_cannot_build_its_own_backbones_is_not_kept(monkeypatch):
    from bench.errors import BenchError

    def broken(name, options):
        raise BenchError(f"backbone {name!r} cannot be built: timm is broken here")

    monkeypatch.setattr(catalogue, "block_count", broken)
    catalogue.catalogue.cache_clear()
    path = catalogue._cache_dir() / f"catalogue-{catalogue._fingerprint()}.json"
    path.unlink(missing_ok=True)
    try:
        data = catalogue.catalogue()
        assert data["depths"] == {} and "dino-vitb16" in data["unread"]  # this process goes on with what it read
        assert not path.exists()  # and leaves nothing for the next one
    finally:
        catalogue.catalogue.cache_clear()


def test_two_environments_keep_a_catalogue_each(monkeypatch):
    here = catalogue._fingerprint()
    monkeypatch.setattr(sys, "executable", "/another/venv/bin/python")
    assert catalogue._fingerprint() != here
    monkeypatch.undo()
    monkeypatch.setattr(sys, "prefix", "/another/venv")  # a venv of the same interpreter: its python links to it
    assert catalogue._fingerprint() != here
    monkeypatch.undo()
    monkeypatch.setattr(catalogue, "version", lambda dist: "0.0-other" if dist == "timm" else "2.15.0")
    assert catalogue._fingerprint() != here


def test_one_environment_keeps_one_catalogue_whatever_its_interpreter_is_called(monkeypatch, tmp_path):
    """The `bench` script runs a venv's `python3` (its first line), a notebook or a shell its `python`: one
    environment, one catalogue, so that the first `bench.results` after `bench run` does not import every method
    and backbone again (docs/performance.md)."""
    here = catalogue._fingerprint()
    (tmp_path / "python3").symlink_to(os.path.realpath(sys.executable))
    (tmp_path / "python").symlink_to("python3")
    for name in ("python", "python3"):
        monkeypatch.setattr(sys, "executable", str(tmp_path / name))
        assert catalogue._fingerprint() == here

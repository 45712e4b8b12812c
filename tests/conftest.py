"""What every test runs with, whoever ran what before on this machine: no download, and the suite's own cache,
config and working directories, never the user's. A catalogue another environment left in `~/.cache/bench`, the
`./results` of the README's quick start or a `BENCH_*` setting of the shell must not change the suite's outcome
(`tests/test_isolation.py` proves it). Set at import, so that the subprocesses tests start inherit it too."""
import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Tests never download: a pretrained-weights request must fail fast instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

OWN = Path(tempfile.mkdtemp(prefix="bench-suite-"))
atexit.register(shutil.rmtree, OWN, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = str(OWN / "cache")  # the method catalogue (registries/catalogue.py) and any other cache
os.environ["XDG_CONFIG_HOME"] = str(OWN / "config")
for setting in ("BENCH_INCLUDE", "BENCH_CACHE_DIR", "BENCH_DATA_ROOT", "BENCH_WEIGHTS_DIR", "BENCH_MIRROR"):
    os.environ.pop(setting, None)  # the user's plugins, banks, datasets and weights: the tests name their own


@pytest.fixture(autouse=True)
def own_working_directory(tmp_path_factory, monkeypatch):
    """Each test starts in an empty directory of its own: a command's default `./results` is the test's."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))

"""Plugins (bench.registries.plugins): methods, presets and grids from a folder (`--include DIR`, BENCH_INCLUDE) or an
installed package's `bench.plugins` entry points reach every place a run happens, the catalogue follows
their files, and a broken one is one warning line while everything else works."""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from bench.registries import plugins
from bench.cli import main

ROOT = Path(__file__).resolve().parents[1]
PIP = Path(sys.executable).with_name("pip")

# a features-based method with its own preset file, as a user writes one outside bench
METHOD = '''
from typing import Any

import torch

from bench.methods.base import Method, Step
from bench.registries import METHODS


@METHODS.register_module(name={name!r})
class ToyMeans(Method):
    """Per step, k-means centroids of the step's plain features; logits are negative distances."""

    preset_file = {preset!r}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.centroids: list[torch.Tensor] = []

    def learn(self, step: Step) -> None:
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=step.n_classes, n_init=1, max_iter=self.hparams["max_iter"],
                    random_state=self.seed * 1000 + step.index)
        km.fit(step.train.plain.float().cpu().numpy())
        self.centroids.append(torch.as_tensor(km.cluster_centers_, dtype=torch.float32))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(x.float(), torch.cat(self.centroids))

    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        return -torch.cdist(x.float(), self.centroids[task])

    def state_dict(self) -> dict[str, Any]:
        return {{"centroids": self.centroids}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.centroids = list(state["centroids"])
'''
PRESET = "equations = dict(max_iter=100)\ncode = dict(max_iter={max_iter})\n"
GRID = '''methods = [{name!r}]
datasets = ["synthetic"]
splits = ["2-step"]
seeds = [0]
backbone = "pixels"
dataset_options = dict(synthetic=dict(num_classes=4, image_size=4, train_per_class=10, test_per_class=5))
'''

DATASET = '''
from bench.data.toy import Synthetic
from bench.registries import DATASETS


@DATASETS.register_module(name="planted")
class Planted(Synthetic):
    """bench's synthetic images under a plugin's name."""
'''


def write_plugin(folder: Path, name: str = "Toy means", preset: str = "toy_means", grid: str = "toy_grid",
                 file: str = "toy_method.py", max_iter: int = 20) -> Path:
    """A plugin folder: a method file, its preset file in presets/, a grid in grids/."""
    (folder / "presets").mkdir(parents=True, exist_ok=True)
    (folder / "grids").mkdir(exist_ok=True)
    (folder / file).write_text(METHOD.format(name=name, preset=preset))
    (folder / "presets" / f"{preset}.py").write_text(PRESET.format(max_iter=max_iter))
    (folder / "grids" / f"{grid}.py").write_text(GRID.format(name=name))
    return folder


@pytest.fixture(autouse=True)
def fresh_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test as a fresh process would see it: no plugin registered, its own catalogue cache."""
    from bench.registries import BACKBONES, DATASETS, METHODS
    from bench.registries import catalogue

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(plugins.ENV, raising=False)
    before = {registry: set(registry.module_dict) for registry in (METHODS, DATASETS, BACKBONES)}
    yield
    for registry, names in before.items():  # what the test's plugins registered, whatever their module's name
        for name in set(registry.module_dict) - names:
            if not registry.module_dict[name].__module__.startswith("bench."):  # bench's own, loaded lazily, stay
                del registry._module_dict[name]
    for module in [m for m, module in sys.modules.items() if m.startswith("bench_plugin_") or _made_here(module, tmp_path)]:
        del sys.modules[module]
    plugins.reset()
    catalogue.catalogue.cache_clear()


def _made_here(module: Any, tmp_path: Path) -> bool:
    """A module imported from a file of this test's folders (a plugin file or helper, by any name)."""
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and Path(file).is_relative_to(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_config(results: Path, method: str) -> dict[str, Any]:
    """The resolved config of the one finished run of `method` under `results`."""
    specs = [json.loads(p.read_text()) for p in (results / "runs").glob("*/spec.json")]
    (spec,) = [s for s in specs if s["method"] == method]
    return spec["config"]


def test_a_plugin_folder_is_listed_and_runs_in_process(capsys, tmp_path):
    folder = write_plugin(tmp_path / "plugin")
    code, out, err = run(capsys, "list", "methods", "--include", str(folder))
    assert code == 0 and not err
    assert any(line.startswith("Toy means") and "presets: code, equations" in line for line in out.splitlines())
    code, out, _ = run(capsys, "list", "grids", "--include", str(folder))
    assert code == 0 and "toy_grid" in out and "smoke" in out

    results = tmp_path / "results"
    code, out, err = run(capsys, "run", "--include", str(folder), "--grid", "toy_grid", "--cluster", "debug",
                         "--results", str(results))
    assert code == 0, err
    assert "1 done, 0 failed" in out and "Toy means" in out
    assert run_config(results, "Toy means")["method"]["max_iter"] == 20  # its own preset file's `code`

    # a dataset reader from a plugin, on bench's own K-means
    (folder / "toy_data.py").write_text(DATASET)
    code, out, _ = run(capsys, "list", "datasets", "--include", str(folder))
    assert code == 0 and any(line.split()[:1] == ["planted"] for line in out.splitlines()), out
    code, out, err = run(capsys, "run", "--include", str(folder), "--grid", "toy_grid", "--methods", "K-means",
                         "--datasets", "planted", "--cfg-options", "dataset.num_classes=4", "dataset.image_size=4",
                         "--cluster", "debug", "--results", str(results))
    assert code == 0, err
    assert "1 done, 0 failed" in out and "K-means · planted · 2-step" in out

    # without the folder, neither its method nor its grid exists
    code, _, err = run(capsys, "run", "--grid", "toy_grid", "--dry-run", "--results", str(results))
    assert code == 2 and "unknown grid 'toy_grid'" in err


def test_a_plugin_methods_run_is_published_with_its_source_and_verifies(capsys, tmp_path):
    """A store entry of a method from outside bench carries the method's files (to be read by the store's maintainers;
    `bench store verify` runs none of it) and recomputes like any other."""
    from bench.store.layout import ENTRY, read_json

    folder = write_plugin(tmp_path / "plugin")
    results, store = tmp_path / "results", tmp_path / "store"
    assert run(capsys, "run", "--include", str(folder), "--grid", "toy_grid", "--cluster", "debug",
               "--results", str(results))[0] == 0
    assert run(capsys, "store", "init", str(store))[0] == 0
    code, out, err = run(capsys, "publish", "--include", str(folder), "--grid", "toy_grid", "--results", str(results),
                         "--store", str(store))
    assert code == 0, err
    (entry,) = [p.parent for p in store.glob(f"submissions/*/*/{ENTRY}")]
    assert (entry / "source" / "toy_method.py").read_text() == (folder / "toy_method.py").read_text()
    assert read_json(entry / ENTRY, ENTRY)["plugin"] is True
    plugins.reset()  # verify needs no plugin: it reads the entry, never the method
    code, out, _ = run(capsys, "store", "verify", str(store))
    assert code == 0 and ": recomputed (Toy means · synthetic · 2-step · seed 0)" in out


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_a_plugin_runs_on_the_local_workers(capsys, tmp_path):
    folder = write_plugin(tmp_path / "plugin")
    results = tmp_path / "results"
    code, out, err = run(capsys, "run", "--include", str(folder), "--grid", "toy_grid", "--cluster", "local",
                         "--workers", "1", "--results", str(results))
    assert code == 0, err
    assert "1 done, 0 failed" in out
    assert list((results / "submitit").iterdir())  # through the worker pool, not in this process

    # the same process, another plugin set: a pool of its own, whose workers import that set
    other = write_plugin(tmp_path / "other", name="Toy other", preset="toy_other", grid="grid_other")
    code, out, err = run(capsys, "run", "--include", str(other), "--grid", "grid_other", "--cluster", "local",
                         "--workers", "1", "--results", str(results))
    assert code == 0, err
    assert "1 done, 0 failed" in out


def test_a_plugin_never_takes_a_name_of_benchs(capsys, tmp_path):
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "taker.py").write_text(METHOD.format(name="K-means", preset="kmeans_mine"))
    # whatever asks first (a dataset lookup imports the plugins), bench's K-means stays and the plugin fails
    code, _, err = run(capsys, "run", "--include", str(folder), "--methods", "K-means", "--datasets", "nowhere",
                       "--dry-run", "--results", str(tmp_path / "results"))
    assert code == 2 and "unknown dataset 'nowhere'" in err
    assert f"plugin {folder / 'taker.py'} not loaded: KeyError" in err
    # in a fresh interpreter, where a dataset lookup is the first to import the plugins, and a plugin
    # that imports no part of bench's backbones takes the name of one
    (folder / "pixels.py").write_text("from bench.registries import BACKBONES\n\n"
                                      "BACKBONES.register_module(name='pixels', module=type('Mine', (), {}))\n")
    code = (f"from bench.registries import plugins; plugins.use([{str(folder)!r}]); from bench.data import reader_class; "
            "reader_class('nowhere'); from bench.registries import BACKBONES; print(BACKBONES.get('pixels').__module__)")
    out = bench_in_subprocess(code, {"PYTHONPATH": str(ROOT)}, tmp_path)
    assert out.splitlines()[-1] == "bench.features.backbones"


def test_bench_include_is_include_and_adds_to_it(capsys, tmp_path, monkeypatch):
    # two folders whose files have the same name: each its own module
    first = write_plugin(tmp_path / "one", name="Toy one", preset="toy_one", grid="grid_one")
    second = write_plugin(tmp_path / "two", name="Toy two", preset="toy_two", grid="grid_two", max_iter=7)
    monkeypatch.setenv(plugins.ENV, str(first))
    code, out, err = run(capsys, "list", "methods", "--include", str(second))
    assert code == 0 and not err and "Toy one" in out and "Toy two" in out
    results = tmp_path / "results"
    code, out, err = run(capsys, "run", "--grid", "grid_two", "--cluster", "debug", "--results", str(results),
                         "--include", str(second))
    assert code == 0, err
    assert run_config(results, "Toy two")["method"]["max_iter"] == 7
    monkeypatch.setenv(plugins.ENV, os.pathsep.join([str(first), str(second)]))
    code, out, err = run(capsys, "run", "--grid", "grid_one", "--methods", "Toy one", "Toy two", "--dry-run",
                         "--results", str(results))
    assert code == 0, err
    assert "1 done, 1 would run" in out

    code, _, err = run(capsys, "list", "grids", "--include", str(tmp_path / "nowhere"))
    assert code == 2 and len(err.splitlines()) == 1 and "nowhere: not a directory" in err


def test_a_broken_plugin_is_one_warning_and_its_name_one_error(capsys, tmp_path):
    folder = write_plugin(tmp_path / "plugin")
    (folder / "broken.py").write_text("from bench.registries import METHODS\n\nfoo\n")
    (folder / "needs.py").write_text("import a_module_nobody_installed\n")
    (folder / "_helper.py").write_text("this is not python\n")  # `_` files are the plugin's own, never imported
    (folder / "test_toy.py").write_text("import pytest_only_module\n")  # tests are pytest's (`bench new` writes one)
    code, out, err = run(capsys, "list", "methods", "--include", str(folder))
    assert code == 0 and "Toy means" in out
    assert err.splitlines() == [
        f"bench: warning: plugin {folder / 'broken.py'} not loaded: NameError: name 'foo' is not defined",
        f"bench: warning: plugin {folder / 'needs.py'} not loaded: "
        "ModuleNotFoundError: No module named 'a_module_nobody_installed'"]

    results = tmp_path / "results"
    code, out, err = run(capsys, "run", "--include", str(folder), "--grid", "toy_grid", "--cluster", "debug",
                         "--results", str(results))
    assert code == 0 and "1 done, 0 failed" in out  # everything else works

    code, _, err = run(capsys, "run", "--include", str(folder), "--methods", "Broken", "--dry-run",
                       "--results", str(results))
    assert code == 2 and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("bench: error: unknown method 'Broken'; known: ")
    assert f"plugin {folder / 'broken.py'} not loaded: NameError: name 'foo' is not defined" in line


def test_a_plugin_that_exits_at_import_is_one_warning_and_the_command_goes_on(capsys, tmp_path):
    folder = write_plugin(tmp_path / "plugin")
    (folder / "script.py").write_text("import sys\n\nsys.exit(0)\n")  # a script dropped into the folder
    code, out, err = run(capsys, "list", "methods", "--include", str(folder))
    assert code == 0 and "Toy means" in out and "Baseline" in out  # before: exit 0, nothing listed
    assert err.splitlines() == [f"bench: warning: plugin {folder / 'script.py'} not loaded: SystemExit: 0"]


def test_a_plugin_grid_or_preset_never_shadows_benchs(capsys, tmp_path):
    from bench.registries import GRIDS_DIR, PRESETS_DIR

    folder = write_plugin(tmp_path / "plugin")
    (folder / "grids" / "smoke.py").write_text(GRID.format(name="Toy means"))
    code, _, err = run(capsys, "list", "grids", "--include", str(folder))
    (line,) = err.splitlines()
    assert code == 2 and str(folder / "grids" / "smoke.py") in line and str(GRIDS_DIR / "smoke.py") in line

    (folder / "grids" / "smoke.py").unlink()
    (folder / "presets" / "kmeans.py").write_text(PRESET.format(max_iter=1))
    code, _, err = run(capsys, "list", "methods", "--include", str(folder))
    (line,) = err.splitlines()
    assert code == 2 and str(folder / "presets" / "kmeans.py") in line and str(PRESETS_DIR / "kmeans.py") in line


# a plugin folder that grows past one file: a private helper, a package, and a second method file that
# builds on the first by importing it by its name (before bench imports it: "b" sorts before "toy")
HELPER = "ITERATIONS = 7\n"
PACKAGE = "def shift(x):\n    return x + 0.0\n"
SECOND = '''
from _settings import ITERATIONS
from toy_method import ToyMeans
from bench.registries import METHODS
import tools


@METHODS.register_module(name="Toy means shifted")
class Shifted(ToyMeans):
    preset_file = "toy_means"

    def logits(self, x):
        assert ITERATIONS == 7
        return super().logits(tools.shift(x))
'''


def write_grown_plugin(folder: Path) -> Path:
    write_plugin(folder)
    (folder / "_settings.py").write_text(HELPER)
    (folder / "tools").mkdir()
    (folder / "tools" / "__init__.py").write_text(PACKAGE)
    (folder / "b_shifted.py").write_text(SECOND)
    return folder


@pytest.mark.parametrize("cluster", ["debug", "local"])
def test_a_plugin_folders_files_import_each_other_by_name(capsys, tmp_path, cluster):
    folder = write_grown_plugin(tmp_path / "plugin")
    results = tmp_path / "results"
    code, out, err = run(capsys, "run", "--include", str(folder), "--grid", "toy_grid", "--methods", "Toy means",
                         "Toy means shifted", "--cluster", cluster, "--workers", "1", "--results", str(results))
    assert code == 0, err
    assert "2 done, 0 failed" in out and "warning" not in err  # toy_method.py imported once: no double registration
    assert sys.path.count(str(folder.resolve())) == 1 and sys.path.index(str(folder.resolve())) == len(sys.path) - 1
    plugins.reset()
    assert str(folder.resolve()) not in sys.path and "_settings" not in sys.modules


def test_a_run_records_its_methods_code_and_bench_run_says_when_it_was_edited_since(capsys, tmp_path):
    import hashlib

    import pandas as pd

    import bench.methods.base

    folder = write_plugin(tmp_path / "plugin")
    source = folder / "toy_method.py"
    results = tmp_path / "results"
    argv = ("run", "--include", str(folder), "--grid", "toy_grid", "--cluster", "debug", "--results", str(results))
    code, _, err = run(capsys, *argv)
    assert code == 0 and "warning" not in err, err
    (metrics,) = (results / "runs").glob("*/metrics.parquet")
    # the class's file, then its base's (ToyMeans → Method → object, which has none)
    expected = hashlib.sha256(source.read_bytes() + Path(bench.methods.base.__file__).read_bytes()).hexdigest()
    assert set(pd.read_parquet(metrics)["method_sha256"]) == {expected}

    source.write_text(source.read_text() + "\n# tuned since\n")
    code, out, err = run(capsys, *argv)
    assert code == 0 and "already done" in out
    (line,) = [line for line in err.splitlines() if "ran other code" in line]
    assert line.startswith("bench: warning: 1 of Toy means's 1 finished run(s)") and expected[:12] in line
    code, out, err = run(capsys, *argv, "--force")
    assert code == 0 and "1 done" in out and "ran other code" not in err
    assert set(pd.read_parquet(metrics)["method_sha256"]) == {hashlib.sha256(
        source.read_bytes() + Path(bench.methods.base.__file__).read_bytes()).hexdigest()}


def test_a_plugin_module_named_like_an_installed_one_is_refused(capsys, tmp_path):
    folder = write_grown_plugin(tmp_path / "plugin")
    (folder / "_pytest.py").write_text(HELPER)  # pytest's own package is `_pytest`
    code, _, err = run(capsys, "list", "methods", "--include", str(folder))
    (line,) = err.splitlines()
    assert code == 2 and str(folder / "_pytest.py") in line and "_pytest" in line and "rename _pytest.py" in line

    (folder / "_pytest.py").unlink()
    other = tmp_path / "other"
    other.mkdir()
    (other / "_settings.py").write_text(HELPER)
    code, _, err = run(capsys, "list", "methods", "--include", str(folder), "--include", str(other))
    (line,) = err.splitlines()
    assert code == 2 and str(folder) in line and str(other) in line and "'_settings'" in line


def bench_in_subprocess(code: str, env: dict[str, str], cwd: Path, stderr: list[str] | None = None) -> str:
    """Python `code` in a fresh interpreter (a command as a user runs it); its stdout (its stderr's
    lines appended to `stderr`)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **env}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    if stderr is not None:
        stderr += done.stderr.splitlines()
    return done.stdout


LIST_METHODS = ("import sys; from bench.cli import main; code = main(['list', 'methods', '--include', %r]); "
                "print('torch imported' if 'torch' in sys.modules else 'torch not imported')")


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_the_catalogue_follows_a_plugins_files(tmp_path):
    folder = write_plugin(tmp_path / "plugin")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg-cache"), "PYTHONPATH": str(ROOT)}
    first = bench_in_subprocess(LIST_METHODS % str(folder), env, tmp_path)
    assert "Toy means " in first and "torch imported" in first  # built: the classes imported once
    again = bench_in_subprocess(LIST_METHODS % str(folder), env, tmp_path)
    assert "Toy means " in again and "torch not imported" in again  # the plugin's method, from the catalogue

    source = folder / "toy_method.py"
    source.write_text(source.read_text().replace("name='Toy means'", "name='Toy means v2'"))
    (folder / "presets" / "toy_means.py").write_text(PRESET.format(max_iter=3) + "fast = dict(max_iter=1)\n")
    edited = bench_in_subprocess(LIST_METHODS % str(folder), env, tmp_path)
    assert "Toy means v2" in edited and "Toy means " not in edited.replace("Toy means v2", "")
    assert "presets: code, equations, fast" in edited
    assert len(list((tmp_path / "xdg-cache" / "bench").glob("catalogue-*.json"))) == 2


def test_a_slurm_job_carries_and_imports_the_plugins(tmp_path, monkeypatch):
    from bench.execution import slurm
    from bench.registries import METHODS
    from bench.config.grids import expand, load_grid

    folder = write_plugin(tmp_path / "plugin")
    plugins.activate([folder])
    (spec,) = expand(load_grid("toy_grid"))
    profile = slurm.load_profile("local")

    class Executor:  # what submit hands each job array: the job callable and its arguments
        submitted: list[tuple[Any, ...]] = []

        def batch(self) -> Any:
            return contextlib.nullcontext()

        def submit(self, fn: Any, *args: Any) -> Any:
            self.submitted.append((pickle.loads(pickle.dumps(fn)), *args))  # as submitit pickles it
            return type("Job", (), {"job_id": "1_0"})()

    slurm._submit_array(Executor(), [[spec]], tmp_path / "results", profile, {}, packed=False)
    ((job, spec_json, results),) = Executor.submitted
    assert isinstance(job, slurm.SlurmRun) and job.include == (str(folder),)

    # the job's process: a fresh interpreter has neither the plugin nor BENCH_INCLUDE
    del METHODS._module_dict["Toy means"]
    for module in [m for m in sys.modules if m.startswith("bench_plugin_")]:
        del sys.modules[module]
    plugins.reset()
    assert job(spec_json, results) == "done"
    assert "Toy means" in METHODS.module_dict
    assert (Path(results) / "runs" / spec.run_id / "metrics.parquet").is_file()


PYPROJECT = '''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "toyplug"
version = "0.1"

[project.entry-points."bench.plugins"]
toyplug = "toyplug.bench_plugin"
broken = "toyplug.broken"

[tool.setuptools]
packages = ["toyplug"]

[tool.setuptools.package-data]
toyplug = ["presets/*.py", "grids/*.py"]
'''


def install_plugin_package(tmp_path: Path) -> Path:
    """The package `toyplug` (method "Toy entry" with its preset and grid `toy_entry_grid`, and a broken
    entry point) installed for real by pip into a folder of its own; that folder, for PYTHONPATH."""
    package = tmp_path / "toyplug"
    (package / "toyplug").mkdir(parents=True)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "toyplug" / "__init__.py").write_text("")
    (package / "toyplug" / "broken.py").write_text("raise RuntimeError('this plugin is broken')\n")
    write_plugin(package / "toyplug", name="Toy entry", preset="toy_entry", grid="toy_entry_grid",
                 file="bench_plugin.py", max_iter=5)
    site = tmp_path / "site"
    pip = subprocess.run([str(PIP), "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
                          "--target", str(site), str(package)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (site / "toyplug" / "presets" / "toy_entry.py").is_file()  # installed, not read from the source
    return site


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_an_installed_entry_point_package_runs_on_the_local_workers(tmp_path):
    site = install_plugin_package(tmp_path)

    results = tmp_path / "results"
    code = textwrap.dedent(f"""
        from bench.cli import main
        assert main(['list', 'methods']) == 0
        assert main(['run', '--grid', 'toy_entry_grid', '--cluster', 'local', '--workers', '1',
                     '--results', {str(results)!r}]) == 0
    """)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg-cache"), "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    err: list[str] = []
    out = bench_in_subprocess(code, env, tmp_path, err)
    assert any(line.startswith("Toy entry") for line in out.splitlines())
    assert "1 done, 0 failed" in out
    # the broken entry point: one line, once (the workers load quietly), naming its installed file
    assert [line for line in err if "plugin" in line] == [
        f"bench: warning: plugin {site / 'toyplug' / 'broken.py'} not loaded: RuntimeError: this plugin is broken"]
    assert run_config(results, "Toy entry")["method"]["max_iter"] == 5  # the package's own preset

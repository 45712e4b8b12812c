"""Commands that train nothing import neither torch nor timm, and the method catalogue they read
instead (registries/catalogue.py) is the classes' own word, rebuilt whenever their sources change."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bench.registries.catalogue as catalogue

ROOT = Path(__file__).resolve().parents[1]


def imported_after(argv: list[str], tmp_path: Path) -> dict[str, bool]:
    """Run `bench <argv>` in a fresh interpreter; which heavy packages it imported."""
    catalogue.catalogue()  # as after any earlier command: the catalogue file exists (a fresh machine builds it once)
    code = ("import sys; from bench.cli import main; code = main(%r); "
            "print({'code': code, **{m: m in sys.modules for m in ('torch', 'timm', 'sklearn', 'matplotlib')}})" % argv)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    return eval(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [
    ["list", "methods"], ["list", "backbones"], ["list", "grids"],
    ["run", "--dry-run", "--grid", "full"],
    ["run", "--dry-run", "--grid", "smoke"],  # tail methods on a timm ViT: its depth checked on the meta device
    ["status", "--grid", "demo", "--results", "{results}"],
    ["cache", "list", "--results", "{results}"],
], ids=["list-methods", "list-backbones", "list-grids", "dry-run-full", "dry-run-smoke", "status", "cache-list"])
def test_commands_that_run_nothing_import_no_torch(argv, tmp_path):
    argv = [a.replace("{results}", str(tmp_path)) for a in argv]
    seen = imported_after(argv, tmp_path)
    assert seen["code"] == 0
    if "smoke" in argv:  # a timm model's depth needs timm (built on the meta device, no weights)
        assert seen["timm"]
        return
    assert not seen["torch"] and not seen["timm"] and not seen["sklearn"] and not seen["matplotlib"], seen


def test_nothing_to_run_imports_no_torch(tmp_path):
    from bench.cli import main

    argv = ["run", "--methods", "K-means", "--splits", "2-step", "--seeds", "0", "--cluster", "debug",
            "--results", str(tmp_path)]
    assert main(argv) == 0
    seen = imported_after(argv, tmp_path)
    assert seen["code"] == 0 and not seen["torch"] and not seen["timm"], seen


def test_a_first_bench_results_after_bench_run_imports_neither_torch_nor_scipy_stats(tmp_path):
    """`bench.results` in a notebook after `bench run`: its first call reads the catalogue that `bench run` left,
    though its interpreter goes by another of the environment's names (`python` beside the `bench` script's
    `python3`), and imports none of torch, timm, sklearn, matplotlib and scipy.stats (docs/performance.md)."""
    from bench.cli import main

    me = Path(sys.executable)
    others = [p for p in sorted(me.parent.glob("python*")) if p.name != me.name and p.is_file()
              and os.path.realpath(p) == os.path.realpath(me)]
    if not others:
        pytest.skip(f"no other name of {me} in its folder")
    argv = ["--methods", "K-means", "--splits", "2-step", "--seeds", "0", "1", "--results", str(tmp_path)]
    assert main(["run", *argv, "--cluster", "debug"]) == 0  # writes the catalogue, as the `bench` command would
    heavy = ("torch", "timm", "sklearn", "matplotlib", "scipy.stats")
    code = ("import sys, bench; r = bench.results('demo', methods=['K-means'], splits=['2-step'], seeds=[0, 1], "
            f"results={str(tmp_path)!r}); print({{'runs': int(r.runs['run_id'].nunique()), "
            f"**{{m: m in sys.modules for m in {heavy!r}}}}})")
    out = subprocess.run([str(others[0]), "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout.strip().splitlines()[-1]) == {"runs": 2, **dict.fromkeys(heavy, False)}


def test_the_catalogue_is_what_the_classes_say():
    import inspect

    from bench.core.provenance import method_source_files
    from bench.registries import METHODS, load_all

    load_all()
    data = catalogue.catalogue()
    assert set(data["methods"]) == set(METHODS.module_dict)
    for name, cls in METHODS.module_dict.items():
        info = catalogue.method_info(name)
        assert (info.runs_on, info.preset_file) == (cls.runs_on, cls.preset_file)
        assert (info.inputs, info.sees_past_steps) == (cls.runs_on.inputs, cls.runs_on.sees_past_steps)
        assert info.hparam_choices == {k: tuple(v) for k, v in cls.hparam_choices.items()}
        assert info.source_files == tuple(method_source_files(cls)) and info.source_files[0] == inspect.getfile(cls)
    assert data["depths"] == {"clip-vitb16": 12, "dino-resnet50": 0, "dino-vitb16": 12, "pixels": 0,
                              "dinov2-vits14": 12, "dinov2-vitb14": 12, "dinov2-vitl14": 24, "dinov2-vits14-reg4": 12,
                              "dinov2-vitb14-reg4": 12, "dinov2-vitl14-reg4": 24, "dinov3-vitb16": 12,
                              "clip-vitl14": 24, "sup21k-vitb16": 12}


def test_the_catalogue_follows_its_sources(tmp_path, monkeypatch):
    source = tmp_path / "method.py"
    source.write_text("A = 1\n")
    monkeypatch.setattr(catalogue, "_sources", lambda: [source])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    builds = []
    monkeypatch.setattr(catalogue, "read_classes", lambda: builds.append(1) or {"methods": {}, "n": len(builds)})
    catalogue.catalogue.cache_clear()
    try:
        assert catalogue.catalogue()["n"] == 1
        catalogue.catalogue.cache_clear()
        assert catalogue.catalogue()["n"] == 1 and len(builds) == 1  # read from the file, classes not imported
        source.write_text("A = 2\n")  # a method file changed: the next command reads the classes again
        catalogue.catalogue.cache_clear()
        assert catalogue.catalogue()["n"] == 2
        files = sorted((tmp_path / "cache" / "bench").glob("catalogue-*.json"))
        assert len(files) == 2 and json.loads(files[0].read_text())["methods"] == {}
        # the same file in another copy of bench: a catalogue of its own, since an entry names its files
        copy = tmp_path / "copy" / "method.py"
        copy.parent.mkdir()
        copy.write_bytes(source.read_bytes())
        monkeypatch.setattr(catalogue, "_sources", lambda: [copy])
        catalogue.catalogue.cache_clear()
        assert catalogue.catalogue()["n"] == 3
    finally:
        catalogue.catalogue.cache_clear()

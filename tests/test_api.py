"""The Python API (`bench.run`, `bench.report`, the base classes and registries on `bench`) does what the
commands do, refuses what they refuse with the same line before anything is written, and `import bench`
stays light. Method slugs name the same runs as the methods' names."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import bench
from bench.cli import main
from bench.errors import BenchError
from bench.config.spec import method_slug, resolve_method
from bench.config.grids import expand, load_grid
from tests.helpers import TINY

ROOT = Path(__file__).resolve().parents[1]
TINY_RUN = dict(grid="smoke", methods=["k-means"], datasets=["synthetic"], splits=["2-step"], seeds=[0],
                backbones=["pixels"], cfg_options=TINY, cluster="debug")


def test_import_bench_imports_nothing_heavy():
    code = ("import sys, bench; bench.BenchError; bench.RunSpec; bench.METHODS; bench.run; "
            "print(sorted(m for m in ('torch', 'timm', 'pandas', 'sklearn', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_public_names_are_the_plugin_base_classes_and_registries():
    from bench.features.backbones import Backbone
    from bench.data.base import DatasetReader
    from bench.methods.base import Method, Step
    from bench.registries import BACKBONES, DATASETS, METHODS, load_all

    assert (bench.Method, bench.Step, bench.Backbone, bench.DatasetReader) == (Method, Step, Backbone, DatasetReader)
    assert (bench.METHODS, bench.DATASETS, bench.BACKBONES) == (METHODS, DATASETS, BACKBONES)
    assert set(bench.__all__) <= set(dir(bench))
    for name in bench.__all__:
        assert getattr(bench, name) is not None
    load_all()
    assert all(isinstance(cls.__new__(cls), DatasetReader) for cls in DATASETS.module_dict.values())
    with pytest.raises(AttributeError):
        _ = bench.no_such_name


def test_run_then_report_on_the_tiny_grid(tmp_path, capsys):
    results = tmp_path / "results"
    outcome = bench.run(**TINY_RUN, results=results)
    assert outcome.ok and outcome.grid == "smoke" and len(outcome.specs) == 1
    assert [s.run_id for s in outcome.done] == [s.run_id for s in outcome.specs]
    assert (results / "runs" / outcome.specs[0].run_id / "DONE").exists()
    again = bench.run(**TINY_RUN, results=results)  # as the command: nothing left to run
    assert again.ok and again.pending == () and len(again.already_done) == 1
    assert again.done == () and [s.run_id for s in again.finished] == [s.run_id for s in outcome.specs]
    assert [s.run_id for s in outcome.finished] == [s.run_id for s in outcome.done]
    assert "nothing to run" in capsys.readouterr().out

    written = bench.report(grid="smoke", methods=["K-means"], datasets=["synthetic"], splits=["2-step"], seeds=[0],
                           backbones=["pixels"], cfg_options=TINY, results=results, format="markdown")
    assert written.out == results / "reports" / "smoke"
    assert written.paths and all(p.exists() for p in written.paths)
    assert set(written.frame["method"]) == {"K-means"}
    # every finished run, selected by a slug
    assert bench.report(results=results, methods=["k-means"], format="csv", out=tmp_path / "all").paths
    # the same as pandas objects, for a notebook: the report's cells, and every run's rows; nothing written
    before = sorted(p for p in results.rglob("*"))
    got = bench.results("smoke", methods="k-means", datasets="synthetic", splits="2-step", seeds=0, backbones="pixels",
                        cfg_options=TINY, results=results)
    assert before == sorted(p for p in results.rglob("*"))
    table = pd.read_csv(tmp_path / "all" / "table.csv")
    cells = got.leaderboard.set_index(["split", "dataset", "metric"])["mean"]
    for row in table.itertuples():
        assert cells[(row.split, row.dataset, row.metric)] == pytest.approx(row.mean, abs=1e-4)
    assert set(got.leaderboard["label"].astype(str)) == {"K-means"} and set(got.leaderboard["metric"]) == {"A", "F"}
    keys = ["run_id", "step", "group", "flavour", "metric"]
    pd.testing.assert_series_equal(got.runs.sort_values(keys)["value"].reset_index(drop=True),
                                   written.frame.sort_values(keys)["value"].reset_index(drop=True))
    assert set(got.runs["run_id"]) == {outcome.specs[0].run_id}
    with pytest.raises(bench.BenchError, match="no finished runs of grid 'smoke'"):
        bench.results("smoke", seeds=[5], results=results)


def test_the_runs_frame_names_each_mixed_runs_k_mode_selection_and_evaluation(tmp_path):
    """`bench.results(...).runs` has the mixed setting's K mode (and estimator), selection and evaluation as columns
    of their own (not only inside the split's label); a class-iNCD run has None in each."""
    from bench.protocol.runner import execute
    from tests.helpers import tiny_specs

    mixed = {"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4}
    specs = [*expand(load_grid("cgcd-demo"), methods=["K-means"], seeds=[0], splits=["promptccd-3-stage"],
                     datasets=["synthetic"], options=mixed),  # its two blocks: K known, K estimated
             *tiny_specs(methods=["K-means"], splits=["promptccd-3-stage"], **mixed,
                         **{"setting.evaluation": "transductive"}),
             *tiny_specs(methods=["K-means"])]  # class-iNCD
    for spec in specs:
        execute(spec, tmp_path)
    runs = bench.results(results=tmp_path).runs
    columns = ["split", "k_mode", "k_estimator", "selection", "evaluation"]
    got = {tuple(None if pd.isna(v) else v for v in row) for row in runs[columns].itertuples(index=False)}
    assert got == {("promptccd-3-stage · draw 0", "known", None, "last", "inductive"),
                   ("promptccd-3-stage · draw 0 · K silhouette", "estimated", "silhouette", "last", "inductive"),
                   ("promptccd-3-stage · draw 0 · transductive", "known", None, "last", "transductive"),
                   ("2-step", None, None, None, None)}


@pytest.mark.parametrize("change, argv, message", [
    (dict(splits=["3-step"]), ["--splits", "3-step"], "unknown split '3-step'; known: 10-step, 2-step, 5-step"),
    (dict(device="tpu"), ["--device", "tpu"], "--device 'tpu'"),
    (dict(device="cuda:7"), ["--device", "cuda:7"], "--device cuda:7: "),
    (dict(methods=["k-meanz"]), ["--methods", "k-meanz"], "unknown method 'k-meanz'; known: Baseline, "),
    (dict(cluster="nope"), ["--cluster", "nope"], "unknown cluster 'nope'; choose from local, debug, slurm"),
    (dict(workers=0), ["--workers", "0"], "--workers 0: must be an integer >= 1"),
    (dict(cfg_options={**TINY, "method.epochz": 3}), ["--cfg-options", "method.epochz=3"], "no selected method has it"),
])
def test_the_api_refuses_what_the_command_refuses_before_writing_anything(tmp_path, capsys, change, argv, message):
    results = tmp_path / "results"
    with pytest.raises(BenchError) as raised:
        bench.run(**{**TINY_RUN, **change}, results=results)
    assert message in str(raised.value)
    assert not results.exists()
    base = ["run", "--grid", "smoke", "--methods", "k-means", "--datasets", "synthetic", "--splits", "2-step",
            "--seeds", "0", "--backbone", "pixels", "--cluster", "debug", "--results", str(results),
            "--cfg-options", *(f"{k}={v}" for k, v in TINY.items())]
    capsys.readouterr()
    assert main(base + argv) == 2
    assert capsys.readouterr().err.strip() == f"bench: error: {raised.value}"
    assert not results.exists()


def test_report_refuses_an_unknown_format_or_version_column(tmp_path):
    with pytest.raises(BenchError, match="unknown report format 'pdf'; known: csv, html, latex, markdown"):
        bench.report(results=tmp_path, format="pdf")
    with pytest.raises(BenchError, match="unknown report format 'pdf'; known: csv, html, latex, markdown"):
        bench.report(results=tmp_path, format=["html", "pdf"])
    with pytest.raises(BenchError, match="unknown version column 'colour'; known: "):
        bench.report(results=tmp_path, by="colour")


SLUGS = {"Joint (frozen)": "joint-frozen", "Joint (unfrozen)": "joint-unfrozen", "Baseline++": "baseline-pp",
         "K-means": "k-means", "EwC": "ewc", "LwF": "lwf", "DER": "der", "ResTune": "restune", "FRoST": "frost",
         "CaSSLe": "cassle", "Baseline": "baseline", "NCM + k-means": "ncm-k-means",
         "Gaussian per class": "gaussian-per-class", "SimGCD (continual)": "simgcd-continual", "Happy": "happy",
         "Happy++": "happy-pp", "MetaGCD": "metagcd", "PromptCCD": "promptccd", "VB-CGCD": "vb-cgcd"}


def test_every_method_has_its_slug():
    from bench.registries.catalogue import method_names

    assert {name: method_slug(name) for name in method_names()} == SLUGS
    assert all(resolve_method(slug) == name for name, slug in SLUGS.items())
    assert all(resolve_method(name) == name for name in SLUGS)
    assert method_slug("  My Method++ v2 !") == "my-method-pp-v2"


def test_a_slug_names_the_same_runs_as_the_name(capsys):
    for name, slug in (("Joint (frozen)", "joint-frozen"), ("Baseline++:equations", "baseline-pp:equations")):
        by_name = [s.run_id for s in expand(load_grid("smoke"), methods=[name])]
        by_slug = [s.run_id for s in expand(load_grid("smoke"), methods=[slug])]
        assert by_name == by_slug and by_name
    capsys.readouterr()
    assert main(["run", "--dry-run", "--grid", "demo", "--methods", "joint-frozen"]) == 0
    via_slug = capsys.readouterr().out
    assert main(["run", "--dry-run", "--grid", "demo", "--methods", "Joint (frozen)"]) == 0
    assert capsys.readouterr().out == via_slug and "Joint (frozen) · digits" in via_slug  # labels unchanged


def test_two_methods_with_one_slug_are_an_error_naming_both():
    from bench.methods.base import Method
    from bench.registries import METHODS

    class Clash(Method):
        pass

    METHODS.register_module(name="Joint-Frozen", module=Clash, force=True)
    try:
        with pytest.raises(BenchError, match=r"methods 'Joint \(frozen\)' and 'Joint-Frozen' have the same slug "
                                             r"'joint-frozen'"):
            resolve_method("joint-frozen")
    finally:
        METHODS._module_dict.pop("Joint-Frozen")
    assert resolve_method("joint-frozen") == "Joint (frozen)"


@pytest.mark.parametrize("kwargs, said", [
    (dict(methods="Baseline"), None),  # one name, not its characters (was: unknown method 'B')
    (dict(seeds=1.5), "bad seeds=1.5: an integer or a list of integers"),
    (dict(seeds=[True]), "bad seeds=[True]: an integer or a list of integers"),  # was: the run of seed 1
    (dict(seeds="0"), "bad seeds='0': an integer or a list of integers"),
    (dict(methods=[None]), "bad methods=[None]: a name or a list of names"),
    (dict(results=123), "bad results=123: a path"),
    # an empty list selected every run (seeds=[] none); both are refused
    *[(dict({axis: []}), f"{axis}=[] selects nothing") for axis in ("methods", "datasets", "splits", "backbones",
                                                                     "seeds")],
    (dict(seeds=2**63), "--seeds 9223372036854775808: a seed must be an integer from 0 to 4294967295"),
    (dict(seeds=[0, 2**32]), "--seeds 4294967296: a seed must be an integer from 0 to 4294967295"),
    (dict(threads=1.5), "bad threads=1.5: an integer"),  # was recorded as 1.5 and run with 1 thread
    (dict(workers="2"), "bad workers='2': an integer"),
    (dict(runs_per_gpu=True), "bad runs_per_gpu=True: an integer"),
    (dict(pack_hours="4"), "bad pack_hours='4': a number"),
    (dict(cluster="slurm", pack=2, pack_hours=float("inf")), "--pack-hours inf: must be a number > 0"),
    (dict(force="no"), "bad force='no': True or False"),
])
def test_the_api_refuses_what_it_would_coerce_in_one_bench_error(kwargs, said, tmp_path):
    kwargs = {"results": tmp_path, **kwargs}
    if said is None:
        outcome = bench.run("demo", splits="2-step", seeds=0, dry_run=True, **kwargs)
        assert {spec.method for spec in outcome.pending} == {"Baseline"} and len(outcome.pending) == 1
        return
    with pytest.raises(BenchError, match=re.escape(said)):
        bench.run("demo", dry_run=True, **kwargs)


def test_cfg_options_read_python_literals_and_json_booleans():
    from bench.config.selection import parse_options

    assert parse_options(["a=3", "b=1e-4", "c=True", "d=false", "e=true", "f=[1,2]", "g=k-means++"]) ==\
        {"a": 3, "b": 1e-4, "c": True, "d": False, "e": True, "f": [1, 2], "g": "k-means++"}


def test_the_command_and_the_api_hand_on_the_same_selection_and_options(tmp_path, monkeypatch):
    """One request, on the command line and through the API, reaches the run's and the report's one entry point
    as equal objects: the same `Selection` and `RunOptions` (each option not at its default, so that one dropped on
    either path fails here), the same `ReportOptions`; a `Selection` given whole to the API is the same again."""
    from dataclasses import fields

    from bench.config.selection import Selection
    from bench.execution import launch as launching, selection as selecting
    from bench.execution.launch import RunOptions, RunOutcome
    from bench.reporting import pipeline

    seen: list[tuple[str, object, object]] = []
    monkeypatch.setattr(launching, "launch", lambda selection, options: seen.append(("run", selection, options))
                        or RunOutcome("smoke", selection.results, (), (), ()))
    monkeypatch.setattr(selecting, "runs_to_report", lambda selection: selection)
    monkeypatch.setattr(pipeline, "write_reports", lambda selection, options: seen.append(("report", selection, options)))
    results = tmp_path / "results"
    chosen = ["--grid", "smoke", "--methods", "k-means", "Baseline:equations", "--datasets", "synthetic",
              "--splits", "2-step", "--seeds", "0", "1", "--backbone", "pixels", "--results", str(results),
              "--data-root", "data", "--cache-dir", "cache", "--cfg-options", "method.epochs=2", "features.mode=exact"]
    selection = dict(methods=["k-means", "Baseline:equations"], datasets="synthetic", splits=["2-step"], seeds=[0, 1],
                     backbones="pixels", results=str(results), data_root="data", cache_dir=Path("cache"),
                     cfg_options={"method.epochs": 2, "features.mode": "exact"})
    assert main(["run", *chosen, "--cluster", "slurm", "--workers", "2", "--gpus", "0,1", "--runs-per-gpu", "2",
                 "--device", "cpu", "--threads", "2", "--read-ahead", "off", "--weights-dir", "w", "--force",
                 "--retry-failed", "--dry-run", "--profile", "big", "--slurm-options", "mem_gb=16", "--wait",
                 "--pack", "auto", "--pack-hours", "2", "--tracker", "tensorboard"]) == 0
    run = dict(cluster="slurm", workers=2, gpus="0,1", runs_per_gpu=2, device="cpu", threads=2, read_ahead=False,
               weights_dir="w", force=True, retry_failed=True, dry_run=True, profile="big", slurm_options=["mem_gb=16"],
               wait=True, pack="auto", pack_hours=2.0, trackers=["tensorboard"])
    bench.run("smoke", **selection, **run)
    bench.run(Selection("smoke", **selection), **run)
    (_, by_command, options), (_, by_api, api_options), (_, whole, _) = seen
    assert by_command == by_api == whole == Selection(
        "smoke", methods=("k-means", "Baseline:equations"), datasets=("synthetic",), splits=("2-step",), seeds=(0, 1),
        backbones=("pixels",), results=results, data_root="data", cache_dir="cache",
        cfg_options={"method.epochs": 2, "features.mode": "exact"})
    assert options == api_options
    assert [f.name for f in fields(RunOptions) if getattr(options, f.name) == f.default] == []
    with pytest.raises(BenchError, match="methods given beside a Selection: give them in the Selection instead"):
        bench.run(Selection("smoke"), methods=["k-means"])

    seen.clear()
    assert main(["report", *chosen, "--format", "markdown", "csv", "--out", str(tmp_path / "out"), "--pool-orders",
                 "--by", "device", "--compare", "paper", "--posthoc", "wilcoxon-holm", "--correction", "bh",
                 "--bootstrap", "50"]) == 0
    bench.report("smoke", **selection, format=["markdown", "csv"], out=tmp_path / "out", pool_orders=True,
                 by="device", compare="paper", statistics={"posthoc": "wilcoxon-holm", "correction": "bh",
                                                           "resamples": 50})
    assert main(["report", "--results", str(results)]) == 0
    bench.report(results=results)
    (_, by_command, options), (_, by_api, api_options), (_, every, default), (_, every_api, api_default) = seen
    assert by_command == by_api and options == api_options and options.formats == ("markdown", "csv")
    assert (options.compare, options.statistics.correction, options.statistics.resamples) == (("paper",), "bh", 50)
    assert every == every_api == Selection(results=results) and default == api_default


@pytest.mark.parametrize("kwargs, said", [
    (dict(format=["latex", 3]), "bad format=['latex', 3]: a format or a list of them, from latex"),
    (dict(out=123), "bad out=123: a path"),
    (dict(pool_orders="yes"), "bad pool_orders='yes': True or False"),
    (dict(by=1), "bad by=1: a version column"),
    (dict(statistics=5), "bad statistics=5: a bench.reporting.statistics.Options"),
    (dict(methods=[]), "methods=[] selects nothing"),
])
def test_report_refuses_bad_options_in_one_bench_error(kwargs, said, tmp_path):
    with pytest.raises(BenchError, match=re.escape(said)):
        bench.report("demo", results=tmp_path, **kwargs)


def test_report_format_none_means_the_default_formats():
    from bench.reporting.pipeline import DEFAULT_REPORT_FORMATS, ReportOptions

    assert ReportOptions(formats=None).formats == tuple(DEFAULT_REPORT_FORMATS)


def test_include_given_as_one_folder_is_that_folder(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr("bench.registries.plugins.activate", lambda dirs: seen.append(list(dirs)))
    bench.run("demo", results=tmp_path, methods="Baseline", splits="2-step", seeds=0, dry_run=True,
              include=str(tmp_path))
    bench.run("demo", results=tmp_path, methods="Baseline", splits="2-step", seeds=0, dry_run=True,
              include=tmp_path)
    assert seen == [[str(tmp_path)], [tmp_path]]  # was: one folder per character of the name


def test_the_largest_seed_runs(tmp_path):
    # a step's seed is `seed * 1000 + t`: scikit-learn's k-means refused it above 2**32 once the run had started
    from bench.core.numerics import MAX_SEED

    outcome = bench.run("demo", methods="K-means", splits="2-step", seeds=MAX_SEED, cluster="debug", results=tmp_path)
    assert outcome.ok and len(outcome.done) == 1, outcome.failed


def test_bench_tune_stays_the_function_once_the_tuning_package_is_imported():
    import bench
    import bench.tuning.study  # noqa: F401  (was `bench.tune`: importing it replaced the function)

    assert callable(bench.tune) and bench.tune.__module__ == "bench.api"

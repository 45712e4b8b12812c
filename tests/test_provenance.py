"""Provenance: every run records the versions that decide its numbers, reports never average runs of
different versions silently, and a `bench` command ends without nanobind's leak report."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pandas as pd
import pytest
import timm
import torch
import torchvision

from bench.core import provenance
from bench.core.provenance import VERSION_COLUMNS, weights_sha256
from bench.reporting.aggregate import final_scores, mixed_versions, split_by
from tests.test_cli import fake_run, run

ROOT = Path(__file__).resolve().parent.parent


def test_a_run_records_the_versions_it_ran_with(tmp_path):
    from bench.protocol.runner import execute
    from tests.helpers import tiny_specs

    (spec,) = tiny_specs(methods=["K-means"])
    frame = pd.read_parquet(execute(spec, tmp_path) / "metrics.parquet")
    assert set(VERSION_COLUMNS) <= set(frame.columns)
    row = frame.iloc[0]
    assert (row["torch_version"], row["torchvision_version"], row["timm_version"], row["numpy_version"]) == (
        torch.__version__, torchvision.__version__, timm.__version__, numpy.__version__)
    # on the CPU: no CUDA stack used, whatever torch build it is; the pixel backbone reads no file
    assert (row["device"], row["cuda_version"], row["cudnn_version"], row["weights_sha256"]) == ("cpu", "", "", "")
    assert frame[list(VERSION_COLUMNS)].nunique().max() == 1  # one value per run, on every row


def test_versions_of_libraries_a_run_never_imported_are_read_without_importing_them():
    """A run on raw pixels imports neither timm nor torchvision; their columns still read exactly what
    the imported modules say (torchvision's local build tag included), and importing is left undone."""
    code = ("import sys, json; from bench.core.provenance import library_versions; v = library_versions(); "
            "print(json.dumps([v, 'timm' in sys.modules, 'torchvision' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    versions, timm_imported, torchvision_imported = json.loads(out.stdout)
    assert not timm_imported and not torchvision_imported
    assert versions == dict(torch_version=torch.__version__, torchvision_version=torchvision.__version__,
                            timm_version=timm.__version__, numpy_version=numpy.__version__)


def test_cuda_versions_are_recorded_only_for_a_cuda_device():
    assert provenance.cuda_versions(torch.device("cpu")) == {"cuda_version": "", "cudnn_version": ""}
    if torch.cuda.is_available():
        got = provenance.cuda_versions(torch.device("cuda"))
        assert got["cuda_version"] == torch.version.cuda and got["cudnn_version"] == str(torch.backends.cudnn.version())


def test_the_weights_hash_is_sha256_of_the_file_computed_once_per_file(tmp_path, monkeypatch):
    path = tmp_path / "tiny.pth"
    torch.save({"w": torch.randn(64, 32, generator=torch.Generator().manual_seed(0))}, path)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert weights_sha256(str(path)) == expected
    assert provenance.provenance(torch.device("cpu"), str(path))["weights_sha256"] == expected
    monkeypatch.setattr(hashlib, "sha256", lambda: pytest.fail("hashed the same file twice"))
    assert weights_sha256(path) == expected  # cached by path, size and mtime
    monkeypatch.undo()
    torch.save({"w": torch.zeros(3)}, path)  # replaced under the same name: hashed again
    assert weights_sha256(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest() != expected
    assert weights_sha256(True) == weights_sha256(False) == weights_sha256(str(tmp_path / "absent.pth")) == ""


def frame_of(versions: list[str | None], labels=("Baseline",)) -> pd.DataFrame:
    """Summary rows of one cell per label, one run per version (None: a run without the column)."""
    rows = []
    for label in labels:
        for seed, version in enumerate(versions):
            rows += [dict(run_id=f"{label}{seed}", split="2-step", dataset="synthetic", label=label, seed=seed,
                          group="summary", flavour="wo", metric=m, value=10.0 * (seed + 1), reported_A="wo/A",
                          reported_F="wo/F", torch_version=version) for m in ("A", "F")]
    return pd.DataFrame(rows)


def test_mixed_versions_names_the_cell_and_the_versions():
    assert mixed_versions(frame_of(["2.15.0", "2.15.0"]), VERSION_COLUMNS) == []
    assert mixed_versions(frame_of(["2.15.0"]).drop(columns="torch_version"), VERSION_COLUMNS) == []  # old runs
    (line,) = mixed_versions(frame_of(["2.14.1", "2.15.0"]), VERSION_COLUMNS)
    assert line.startswith("2-step / synthetic / Baseline: its 2 runs differ in torch_version 2.14.1 | 2.15.0")
    (line,) = mixed_versions(frame_of(["2.15.0", None]), VERSION_COLUMNS)  # an old run beside a new one
    assert "torch_version 2.15.0 | not recorded" in line


def test_split_by_gives_each_version_its_own_row():
    scores = final_scores(split_by(frame_of(["2.14.1", "2.15.0", "2.15.0"]), "torch_version", VERSION_COLUMNS))
    a = scores[scores["metric"] == "A"].set_index("label")
    assert a["n"].to_dict() == {"Baseline · torch_version=2.14.1": 1, "Baseline · torch_version=2.15.0": 2}
    assert a["mean"].to_dict() == {"Baseline · torch_version=2.14.1": 10.0, "Baseline · torch_version=2.15.0": 25.0}
    with pytest.raises(ValueError, match="cannot split by 'host'; choose from torch_version, torchvision_version"):
        split_by(frame_of(["2.15.0"]), "host", VERSION_COLUMNS)


def test_report_warns_about_mixed_versions_and_splits_by_them(capsys, tmp_path):
    from bench.config.grids import expand, load_grid

    specs = expand(load_grid("smoke"), methods=["Baseline"], seeds=[0, 1])
    for spec, version in zip(specs, ("2.14.1", "2.15.0")):
        fake_run(tmp_path, spec, 50.0 + spec.seed)
        path = tmp_path / "runs" / spec.run_id / "metrics.parquet"
        pd.read_parquet(path).assign(torch_version=version).to_parquet(path)
    args = ["report", "--grid", "smoke", "--methods", "Baseline", "--seeds", "0", "1", "--results", str(tmp_path),
            "--format", "csv"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "bench: warning: 2-step / synthetic / Baseline: its 2 runs differ in torch_version 2.14.1 | 2.15.0" in err
    code, out, err = run(capsys, *args, "--by", "torch_version")
    assert code == 0 and "warning" not in err, err
    table = pd.read_csv(tmp_path / "reports" / "smoke" / "table.csv")
    assert sorted(set(table["method"])) == ["Baseline · torch_version=2.14.1", "Baseline · torch_version=2.15.0"]


@pytest.mark.slow
def test_a_bench_command_that_imports_triton_ends_without_nanobind_leak_reports(tmp_path):
    """timm imports torchvision.ops, which imports torch._dynamo and with it triton; a command must
    end without triton's nanobind bindings reporting objects leaked at the interpreter's exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "bench.cli", "run", "--grid", "smoke", "--methods", "K-means", "--cluster",
                           "debug", "--results", str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "K-means" in done.stdout  # the leaderboard was printed before the process ended
    assert "nanobind" not in done.stdout + done.stderr, done.stderr


def test_tail_precision_says_what_the_trained_blocks_computed_in():
    """Tail runs finished on CUDA before `precision.tails` existed ran in bf16 and keep their ids: the
    column tells them apart from today's fp32 ones (a GPU is not needed to check what it would say)."""
    import torch

    from bench.runs.metrics_file import tail_precision
    from bench.core.runs_on import RunsOn
    from tests.helpers import tiny_specs

    (spec,) = tiny_specs(methods=["EwC"], backbone="timm:vit_tiny_patch16_224")
    (bf16,) = tiny_specs(methods=["EwC"], backbone="timm:vit_tiny_patch16_224", **{"precision.tails": "bf16"})
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    tokens, features = RunsOn(inputs="tokens"), RunsOn(inputs="features")
    assert (tail_precision(spec, tokens, cuda), tail_precision(bf16, tokens, cuda)) == ("fp32", "bf16")
    assert tail_precision(bf16, tokens, cpu) == "fp32" and tail_precision(spec, features, cuda) == ""

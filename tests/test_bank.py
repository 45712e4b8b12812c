"""The feature bank: shared across runs, built once under concurrency, never half-built."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
import torch

from bench.bank import bank_key, list_banks, load_or_build, remove_banks
from bench.cli import main
from bench.errors import BenchError
from bench.runner import execute, run_dir
from tests.helpers import tiny_specs


def slow_build(marker: Path):
    def build():
        with marker.open("a") as fh:
            fh.write("built\n")
        time.sleep(1.0)
        return {"x": torch.arange(6, dtype=torch.float32).view(2, 3)}
    return build


def build_in_process(cache: str, marker: str, out: str) -> None:
    tensors = load_or_build(Path(cache), {"k": 1}, slow_build(Path(marker)))
    torch.save(tensors, out)


def test_concurrent_requests_build_the_bank_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=build_in_process, args=(str(tmp_path / "cache"), str(tmp_path / "marker"),
                                                         str(tmp_path / f"out{i}.pt"))) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert (tmp_path / "marker").read_text() == "built\n"
    for i in range(3):
        loaded = torch.load(tmp_path / f"out{i}.pt")
        assert loaded["x"].dtype == torch.float16 and loaded["x"].float().tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_crash_mid_build_leaves_no_bank_that_looks_complete(tmp_path):
    def crash():
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError):
        load_or_build(tmp_path, {"k": 2}, crash)
    assert list_banks(tmp_path) == []
    assert not (tmp_path / "banks" / bank_key({"k": 2})).exists()
    marker = tmp_path / "marker"
    load_or_build(tmp_path, {"k": 2}, slow_build(marker))
    assert [b.key for b in list_banks(tmp_path)] == [bank_key({"k": 2})]
    assert not any(p.name.endswith(".building") for p in (tmp_path / "banks").iterdir())


def test_runs_share_a_bank_across_seeds_and_methods(tmp_path):
    specs = tiny_specs(methods=["Baseline", "K-means"], seeds=[0, 1])
    for spec in specs:
        execute(spec, tmp_path)
    logs = [(run_dir(tmp_path, s) / "log.txt").read_text() for s in specs]
    assert sum("built" in log for log in logs) == 1 and sum("loaded" in log for log in logs) == 4
    assert len(list_banks(tmp_path / "cache")) == 1
    (other,) = tiny_specs(methods=["Baseline"], **{"features.views": 3})
    execute(other, tmp_path)
    assert len(list_banks(tmp_path / "cache")) == 2  # V is part of the key


def test_exact_mode_draws_fresh_views_and_stores_none(tmp_path):
    (bank,) = tiny_specs(methods=["Baseline"])
    (exact,) = tiny_specs(methods=["Baseline"], **{"features.mode": "exact"})
    execute(bank, tmp_path)
    execute(exact, tmp_path)
    views = {b.fields["views"] for b in list_banks(tmp_path / "cache")}
    assert views == {0, 2}
    assert (run_dir(tmp_path, exact) / "DONE").exists()


def test_cache_cli_lists_and_removes(tmp_path, capsys):
    for spec in tiny_specs(methods=["K-means"]):
        execute(spec, tmp_path)
    assert main(["cache", "list", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (bank,) = list_banks(tmp_path / "cache")
    assert "1 bank(s)" in out and "feature bank" in out and bank.key in out and "synthetic" in out
    assert main(["cache", "remove", "nope", "--results", str(tmp_path)]) == 2
    assert "no feature bank 'nope'" in capsys.readouterr().err
    assert main(["cache", "remove", bank.key, "--results", str(tmp_path)]) == 0
    assert list_banks(tmp_path / "cache") == []
    with pytest.raises(BenchError):
        remove_banks(tmp_path / "cache", ["gone"])

"""The feature bank: shared across runs, built once under concurrency, never half-built."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
import torch

from bench.features.bank import bank_key, list_banks, load_or_build, remove_banks
from bench.cli import main
from bench.errors import BenchError
from bench.protocol.runner import execute
from bench.runs.rundir import run_dir
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
    assert "no bank 'nope'" in capsys.readouterr().err
    assert main(["cache", "remove", bank.key, "--results", str(tmp_path)]) == 0
    assert list_banks(tmp_path / "cache") == []
    with pytest.raises(BenchError):
        remove_banks(tmp_path / "cache", ["gone"])


def damage(path: Path, how: str) -> None:
    """Damage a file as disks and copies do: `truncate` it to half, or `overwrite` 1 KiB in its middle
    with random bytes (the size stays the same)."""
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        middle = len(data) // 2
        noise = bytes(torch.randint(0, 256, (1024,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1)).tolist())
        path.write_bytes(data[:middle] + noise + data[middle + 1024:])


def counting_build(calls: list[int]):
    def build():
        calls.append(1)
        return {"x": torch.arange(64 * 256, dtype=torch.float32).view(64, 256) / 100}
    return build


@pytest.mark.parametrize("how", ["truncate", "overwrite", "garbage meta", "no meta"])
def test_a_damaged_bank_is_named_set_aside_and_rebuilt(tmp_path, how):
    calls, lines = [], []
    first = load_or_build(tmp_path, {"k": 3}, counting_build(calls))
    path = tmp_path / "banks" / bank_key({"k": 3})
    if how == "garbage meta":
        (path / "meta.json").write_text("{not json")
    elif how == "no meta":
        (path / "meta.json").unlink()
    else:
        damage(path / "bank.pt", how)
    again = load_or_build(tmp_path, {"k": 3}, counting_build(calls), log=lines.append)
    assert torch.equal(again["x"], first["x"]) and len(calls) == 2  # rebuilt, never the damaged values
    named = [line for line in lines if path.name in line and ("damaged" in line or "incomplete" in line)]
    assert len(named) == 1, lines
    (aside,) = (tmp_path / "banks").glob(f"{path.name}.damaged-*")  # kept, not deleted
    assert aside.is_dir() and str(aside) in named[0]
    assert [b.key for b in list_banks(tmp_path)] == [path.name]
    assert load_or_build(tmp_path, {"k": 3}, counting_build(calls))["x"].equal(first["x"]) and len(calls) == 2


def test_banks_built_before_checksums_still_load_and_are_checked_by_shape(tmp_path):
    import json

    calls = []
    first = load_or_build(tmp_path, {"k": 4}, counting_build(calls))
    path = tmp_path / "banks" / bank_key({"k": 4})
    meta = json.loads((path / "meta.json").read_text())
    assert set(meta["files"]) == {"bank.pt"} and meta["files"]["bank.pt"]["size"] == (path / "bank.pt").stat().st_size
    del meta["files"]  # what a bank built before this change records
    (path / "meta.json").write_text(json.dumps(meta))
    assert load_or_build(tmp_path, {"k": 4}, counting_build(calls))["x"].equal(first["x"]) and len(calls) == 1
    meta["shapes"] = {"x": [64, 255]}
    (path / "meta.json").write_text(json.dumps(meta))
    assert load_or_build(tmp_path, {"k": 4}, counting_build(calls))["x"].equal(first["x"]) and len(calls) == 2


def test_a_run_on_a_damaged_bank_rebuilds_it_and_ends_as_on_a_sound_one(tmp_path):
    import pandas as pd

    (spec,) = tiny_specs(methods=["Baseline"])
    sound = pd.read_parquet(execute(spec, tmp_path) / "metrics.parquet")["value"]
    (bank,) = list_banks(tmp_path / "cache")
    damage(bank.path / "bank.pt", "overwrite")
    (run_dir(tmp_path, spec) / "DONE").unlink()
    again = pd.read_parquet(execute(spec, tmp_path) / "metrics.parquet")["value"]
    assert again.equals(sound)
    log = (run_dir(tmp_path, spec) / "log.txt").read_text()
    assert log.count(f"feature bank {bank.key} is damaged (bank.pt bytes") == 1


def test_cache_list_shows_damaged_and_incomplete_folders_and_remove_frees_them(tmp_path, capsys):
    calls = []
    for k in (5, 6, 7):
        load_or_build(tmp_path, {"k": k}, counting_build(calls))
    banks = tmp_path / "banks"
    garbage, no_meta = banks / bank_key({"k": 6}), banks / bank_key({"k": 7})
    (garbage / "meta.json").write_text("\x00\x17garbage")
    (no_meta / "meta.json").unlink()
    assert main(["cache", "list", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 bank(s)" in out and "2 damaged or incomplete" in out
    assert "damaged: meta.json unreadable (JSONDecodeError" in out and "damaged: no meta.json" in out
    assert garbage.name in out and no_meta.name in out
    assert main(["cache", "remove", garbage.name, no_meta.name, "--cache-dir", str(tmp_path)]) == 0
    assert not garbage.exists() and not no_meta.exists() and len(list_banks(tmp_path)) == 1


def test_a_bank_in_a_read_only_cache_still_serves(tmp_path, monkeypatch):
    """Loading a bank records its last use; where the cache cannot be written (a shared read-only cache: every
    write and every removal fails with EROFS) the bank is read all the same."""
    import errno

    fields = {"dataset": "x", "views": 0}
    calls: list[int] = []
    built = load_or_build(tmp_path, fields, counting_build(calls), print)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "write_text", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    again = load_or_build(tmp_path, fields, counting_build(calls), print)
    assert calls == [1] and all(torch.equal(built[k], again[k]) for k in built)


def test_a_run_reads_its_banks_from_a_read_only_mount(tmp_path):
    """The same on a real read-only filesystem (a read-only bind mount, where this machine lets the suite make one)."""
    import dataclasses
    import subprocess

    cache, mount = tmp_path / "cache", tmp_path / "ro"
    (spec,) = tiny_specs()
    execute(dataclasses.replace(spec, location={"cache_dir": str(cache)}), tmp_path / "first")  # builds the bank
    mount.mkdir()
    made = subprocess.run(f"mount --bind {cache} {mount} && mount -o remount,bind,ro {mount}", shell=True,
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip("this machine does not let the suite make a read-only bind mount")
    try:
        out = execute(dataclasses.replace(spec, location={"cache_dir": str(mount)}), tmp_path / "second")
        assert (out / "DONE").exists() and "features (bank)" in (out / "log.txt").read_text()
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)

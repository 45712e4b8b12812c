"""A full disk (ENOSPC, simulated by monkeypatching the writes) under the results root or the cache ends
`bench run` and `bench report` in one line naming the path, with a non-zero exit status; nothing
finished is damaged and no temporary file is left behind."""
from __future__ import annotations

import builtins
import errno
import io
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench.cli import main
from tests.helpers import TINY

RUN = ["run", "--grid", "smoke", "--cluster", "debug", "--methods", "Baseline", "--datasets", "synthetic",
       "--splits", "2-step", "--backbone", "pixels", "--cfg-options", *(f"{k}={v}" for k, v in TINY.items())]


class Disk:
    """Once `fill()` is called, every file opened for writing under `root` is created and then fails
    with ENOSPC, as a write on a full disk does."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.full, real = str(root), False, builtins.open

        def guarded(file, mode="r", *args, **kwargs):
            if self.full and any(c in mode for c in "wax+") and str(file).startswith(self.root):
                real(file, mode, *args, **kwargs).close()
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(file, mode, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", guarded)
        monkeypatch.setattr(io, "open", guarded)

    def fill(self) -> None:
        self.full = True


def temporary_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.endswith(".building")]


def finished(results: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (results / "runs").rglob("*") if p.is_file() and p.name != "log.txt"}


def test_run_on_a_full_disk_when_writing_metrics_ends_in_one_line(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    assert main([*RUN, "--seeds", "0", "--results", str(results)]) == 0
    before = finished(results)
    disk = Disk(tmp_path, monkeypatch)
    real = pd.DataFrame.to_parquet

    def fills_the_disk(self, path, *args, **kwargs):
        Path(path).write_bytes(b"PAR1 half")  # part of the file, then the disk is full
        disk.fill()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fills_the_disk)
    capsys.readouterr()
    code = main([*RUN, "--seeds", "1", "--results", str(results)])
    monkeypatch.setattr(pd.DataFrame, "to_parquet", real)
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("bench: error:")]
    assert "no space left on device writing" in line and "metrics.parquet" in line and str(results) in line
    assert temporary_files(tmp_path) == []
    assert {p: p.read_bytes() for p in before} == before  # the finished run is untouched


def test_run_on_a_full_disk_when_building_a_bank_ends_in_one_line(tmp_path, monkeypatch, capsys):
    results, cache = tmp_path / "results", tmp_path / "cache"
    disk = Disk(cache, monkeypatch)
    real = torch.save

    def fills_the_disk(obj, f, *args, **kwargs):
        if str(f).startswith(str(cache)):
            disk.fill()
        return real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", fills_the_disk)
    code = main([*RUN, "--seeds", "0", "--results", str(results), "--cache-dir", str(cache)])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("bench: error:")]
    assert "no space left on device writing" in line and str(cache) in line and "--cache-dir" in line
    assert temporary_files(tmp_path) == [] and not list((cache / "banks").glob("*/"))


def test_report_on_a_full_disk_ends_in_one_line_and_keeps_the_previous_report(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    assert main([*RUN, "--seeds", "0", "--results", str(results)]) == 0
    assert main(["report", "--results", str(results), "--format", "markdown"]) == 0
    reports = results / "reports"
    before = {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()}
    Disk(reports, monkeypatch).fill()
    capsys.readouterr()
    code = main(["report", "--results", str(results), "--format", "markdown"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("bench: error:")]
    assert "no space left on device writing" in line and str(reports) in line
    assert {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()} == before


def test_a_cache_that_cannot_hold_the_grids_banks_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    import shutil

    results = tmp_path / "results"
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a cache under a file: not writable, whoever runs the test (root included)
    assert main([*RUN, "--seeds", "0", "--results", str(results), "--cache-dir", str(blocked / "cache")]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"bench: error: bank cache {blocked / 'cache'} is not writable") and "--cache-dir" in line
    assert "\n" not in line and (not (results / "runs").exists() or not any((results / "runs").iterdir()))

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1000))
    assert main([*RUN, "--seeds", "0", "--results", str(results)]) == 2
    line = capsys.readouterr().err.strip()
    assert "bank cache" in line and "synthetic/pixels V=2" in line and "BENCH_CACHE_DIR" in line
    # both sizes in a unit that shows them (was "0.00 GiB free ... about 0.00 GiB")
    assert "has 1000 B free" in line and re.search(r"about \d+\.\d [KM]iB at most", line), line
    assert not (results / "runs").exists() or not any((results / "runs").iterdir())
    monkeypatch.undo()
    assert main([*RUN, "--seeds", "0", "--results", str(results)]) == 0  # room enough: it runs
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1000))
    assert main([*RUN, "--seeds", "1", "--results", str(results)]) == 0  # its bank exists: nothing to build


@pytest.mark.parametrize("grid, argv", [
    ("demo", ["--methods", "Baseline", "--splits", "2-step"]),  # the quick start's: digits on pixels, a feature bank
    ("smoke", ["--methods", "EwC", "--datasets", "synthetic", "--cfg-options", "features.tokens=bank"]),  # tokens
])
def test_a_cache_that_holds_the_real_banks_is_not_refused(tmp_path, monkeypatch, capsys, grid, argv):
    """The nominal bounds (60,000 images, 224 px, 197 tokens × 2048) would refuse these; bounded from the images
    the reader finds and the backbone's shapes, a cache with room for about twice the banks runs them, and the
    bound holds what was built."""
    import shutil

    from bench.execution.preflight import real_bank_bytes
    from bench.config.selection import Selection
    from bench.execution.selection import expand_selection

    results = tmp_path / "results"
    command = ["run", "--grid", grid, "--cluster", "debug", "--seeds", "0", "--results", str(results), *argv]
    assert main(command) == 0, capsys.readouterr().err
    banks = results / "cache" / "banks"
    built = sum(p.stat().st_size for p in banks.rglob("*") if p.is_file())
    _, specs = expand_selection(Selection(grid, methods=argv[1:2], seeds=[0],
                                          datasets=["synthetic"] if grid == "smoke" else None,
                                          splits=["2-step"] if grid == "demo" else None,
                                          cfg_options=argv[argv.index("--cfg-options") + 1:] if "--cfg-options" in argv else {}))
    tokens = grid == "smoke"
    bound = real_bank_bytes(specs[0], specs[0].config["features"]["views"], tokens)
    assert built <= bound <= 4 * built + 2 ** 20  # a bound, and a tight one (headers and metadata aside)
    shutil.rmtree(banks)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2 * bound))
    assert main([*command, "--force"]) == 0, capsys.readouterr().err
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=bound // 2))
    shutil.rmtree(banks)
    assert main([*command, "--force"]) == 2
    assert " free and the runs must build 1 bank(s)" in capsys.readouterr().err

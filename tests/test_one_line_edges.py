"""Edges that ended in a traceback: `bench report --out` where no report can be written, an over-long
`--data-root`. One line on stderr each, a non-zero exit status."""
from __future__ import annotations

import builtins
import errno
import io
import os

import pytest

from bench.cli import main
from bench.protocol.runner import execute
from tests.helpers import TINY, tiny_specs


@pytest.fixture
def results(tmp_path):
    execute(tiny_specs()[0], tmp_path / "results")
    return tmp_path / "results"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("bench: error:")]
    return line


@pytest.mark.parametrize("where", ["an existing file", "under a file"])
def test_report_out_onto_a_file_is_one_line(results, tmp_path, capsys, where):
    (tmp_path / "file").write_text("not a directory")
    out = tmp_path / "file" if where == "an existing file" else tmp_path / "file" / "report"
    assert main(["report", "--results", str(results), "--out", str(out)]) == 2
    line = one_error_line(capsys)
    why = "a file of that name exists" if where == "an existing file" else "a part of the path is a file"
    assert line == f"bench: error: cannot write the report to {out} ({why}); choose another directory with --out DIR"
    assert (tmp_path / "file").read_text() == "not a directory"


def test_report_out_onto_a_read_only_mount_is_one_line(results, tmp_path, monkeypatch, capsys):
    # the tests run as root, which chmod does not stop: the mount's answer (EROFS) is simulated instead
    mount = tmp_path / "mount"
    mount.mkdir()
    real_open, real_mkdir = builtins.open, os.mkdir

    def read_only(error):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), error)

    def guarded_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and str(file).startswith(str(mount)):
            read_only(str(file))
        return real_open(file, mode, *args, **kwargs)

    def guarded_mkdir(path, *args, **kwargs):
        if str(path).startswith(str(mount)):
            read_only(str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)
    monkeypatch.setattr(os, "mkdir", guarded_mkdir)
    for out in (mount, mount / "reports"):
        assert main(["report", "--results", str(results), "--out", str(out)]) == 2
        assert one_error_line(capsys) == (f"bench: error: cannot write the report to {out} (Read-only file system); "
                                          f"choose another directory with --out DIR")


LONG = "/tmp/" + "a" * 5000


@pytest.mark.parametrize("argv", [
    ["data", "summary", "cifar10", "--data-root", LONG],
    ["run", "--grid", "smoke", "--cluster", "debug", "--methods", "Baseline", "--datasets", "cifar10",
     "--splits", "2-step", "--backbone", "pixels", "--data-root", LONG],
], ids=["data summary", "run"])
def test_an_over_long_data_root_is_one_line(argv, tmp_path, capsys):
    assert main([*argv, "--results", str(tmp_path)]) == 2
    line = one_error_line(capsys)
    assert line.startswith("bench: error: --data-root (or $BENCH_DATA_ROOT) /tmp/aaa") and "5005 characters" in line
    assert len(line) < 300 and "give a shorter path" in line


def test_an_over_long_report_dir_is_one_line(results, capsys):
    assert main(["report", "--results", str(results), "--out", LONG]) == 2
    line = one_error_line(capsys)
    assert line.startswith("bench: error: --out /tmp/aaa") and len(line) < 300


def test_a_token_bank_reserves_its_files_before_writing_through_their_maps(tmp_path, monkeypatch):
    """A disk that fills under a write through a memory map kills the worker with SIGBUS; reserved
    blocks turn a full disk into an OSError at allocation instead."""
    from bench.features.token_bank import build_token_bank
    from tests.test_token_bank import FIELDS, bound, sources_of

    calls = []
    real = os.posix_fallocate
    monkeypatch.setattr(os, "posix_fallocate", lambda fd, offset, size: calls.append((os.readlink(
        f"/proc/self/fd/{fd}"), offset, size)) or real(fd, offset, size))
    method, _, spec = bound("EwC")
    build_token_bank(tmp_path, FIELDS, sources_of(method, spec), views=2, seed=0, batch_size=16, dtype="float16",
                     log=lambda line: None)
    (bank,) = [p for p in (tmp_path / "banks").iterdir() if p.is_dir()]
    files = {f.name: f.stat().st_size for f in bank.glob("*.npy")}
    assert sorted((path.rsplit("/", 1)[1], offset, size) for path, offset, size in calls) ==\
        sorted((name, 0, size) for name, size in files.items())


def test_a_disk_that_fills_while_a_token_bank_is_built_is_one_line(tmp_path, monkeypatch, capsys):
    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    cache = tmp_path / "cache"
    code = main(["run", "--grid", "smoke", "--cluster", "debug", "--methods", "EwC:equations", "--datasets", "synthetic",
                 "--splits", "2-step", "--backbone", "timm:vit_tiny_patch16_224", "--results", str(tmp_path / "results"),
                 "--cache-dir", str(cache), "--cfg-options", "features.tokens=bank", "backbone.kwargs.depth=2",
                 "method.epochs=1", *(f"{k}={v}" for k, v in TINY.items())])
    assert code != 0
    line = one_error_line(capsys)
    assert "no space left on device writing" in line and str(cache / "banks") in line
    assert not list((cache / "banks").glob(".*.building"))  # the half-built bank's space is freed


def test_a_cache_that_cannot_be_written_when_a_run_builds_its_bank_names_the_option_bench_takes(tmp_path):
    """The message once suggested `--cfg-options features.cache_dir=DIR`, which bench refuses."""
    from bench.features.bank import build_once
    from bench.errors import BenchError

    (tmp_path / "file").write_text("")
    with pytest.raises(BenchError) as err:  # under a file: not writable, whoever runs the test (root included)
        build_once(tmp_path / "file" / "cache", {"format": 1}, lambda tmp: {}, lambda line: None, "feature bank")
    assert "--cache-dir DIR" in str(err.value) and "cfg-options" not in str(err.value)

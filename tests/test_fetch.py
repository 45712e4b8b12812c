"""`bench data fetch` and `bench weights fetch` against a local HTTP server (a thread of this test, on 127.0.0.1,
with HTTP Range) serving archives generated in each publisher's format: a fetch gives a dataset `bench data
summary` reads; a wrong checksum is refused and leaves nothing; a download cut mid-way resumes; a killed fetch
leaves no dataset folder; `--mirror` (and $BENCH_MIRROR) is where the files come from. Nothing leaves the machine:
every source is the local server, given as the mirror, with the test archives' checksums given by `--checksums`."""
from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.download import WORK_DIR, Progress, RemoteFile, download
from bench.core.sizes import size_text
from tests import fixtures_datasets as fx

CHUNK = 16 * 1024


class Handler(BaseHTTPRequestHandler):
    """GET with `Range: bytes=N-`; the server's state says what it serves, where it cuts, how slowly it sends."""

    timeout = 10  # a client gone silent cannot hold the server's thread for longer

    def log_message(self, *_: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        state = self.server.state  # type: ignore[attr-defined]
        name = urllib.parse.unquote(self.path.lstrip("/"))
        asked = self.headers.get("Range")
        state.requests.append((name, asked))
        body = state.files.get(name)
        if body is None:
            self.send_error(404)
            return
        start = int(re.fullmatch(r"bytes=(\d+)-", asked)[1]) if asked else 0
        if start >= len(body) and asked:
            self.send_error(416)
            return
        self.send_response(206 if asked else 200)
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        payload = body[start:]
        cut = state.cut_after.pop(name, None)  # the first request only: the connection drops after that many bytes
        if cut is not None:
            payload, self.close_connection = payload[:cut], True
        for i in range(0, len(payload), CHUNK):
            self.wfile.write(payload[i:i + CHUNK])
            self.wfile.flush()
            state.sent[name] = state.sent.get(name, 0) + len(payload[i:i + CHUNK])
            time.sleep(state.delay)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client killed mid-download (the killed-fetch test) breaks the pipe: expected


class State:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files, self.cut_after, self.delay = dict(files), {}, 0.0
        self.requests: list[tuple[str, str | None]] = []
        self.sent: dict[str, int] = {}


def _tar(path: Path, root: Path, members: list[str]) -> bytes:
    with tarfile.open(path, "w:gz") as tar:
        for member in members:
            tar.add(root / member, arcname=member)
    return path.read_bytes()


def _zip(path: Path, root: Path, member: str) -> bytes:
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted((root / member).rglob("*")):
            zf.write(file, file.relative_to(root).as_posix())
    return path.read_bytes()


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> dict[str, bytes]:
    """Every file bench fetches for its on-disk datasets, in its publisher's format, from tiny generated data."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("archives")
    fx.write_cifar10(src)
    fx.write_cifar100(src, per_class_train=1)
    fx.write_tinyimagenet(src, per_class_train=1)
    fx.write_cub(src, per_class_train=2)
    (src / "attributes.txt").write_text("1 has_bill_shape::curved\n")  # beside CUB_200_2011/ in the real archive
    fx.write_aircraft(src)
    fx.write_herbarium(src, [str(i) for i in range(683)], per_class_train=2, per_class_test=1)
    fx.write_cars(src)
    (src / "stanford_cars" / "devkit" / "cars_test_annos_withlabels.mat").rename(src / "cars_test_annos_withlabels.mat")
    return {
        "cifar-10-python.tar.gz": _tar(out / "c10.tgz", src, ["cifar-10-batches-py"]),
        "cifar-100-python.tar.gz": _tar(out / "c100.tgz", src, ["cifar-100-python"]),
        "tiny-imagenet-200.zip": _zip(out / "tin.zip", src, "tiny-imagenet-200"),
        "CUB_200_2011.tgz": _tar(out / "cub.tgz", src, ["attributes.txt", "CUB_200_2011"]),
        "fgvc-aircraft-2013b.tar.gz": _tar(out / "air.tgz", src, ["fgvc-aircraft-2013b"]),
        "small-train.tar.gz": _tar(out / "st.tgz", src / "herbarium_19", ["small-train"]),
        "small-validation.tar.gz": _tar(out / "sv.tgz", src / "herbarium_19", ["small-validation"]),
        "cars_train.tgz": _tar(out / "ctr.tgz", src / "stanford_cars", ["cars_train"]),
        "cars_test.tgz": _tar(out / "cte.tgz", src / "stanford_cars", ["cars_test"]),
        "car_devkit.tgz": _tar(out / "dev.tgz", src / "stanford_cars", ["devkit"]),
        "cars_test_annos_withlabels.mat": (src / "cars_test_annos_withlabels.mat").read_bytes(),
    }


@pytest.fixture
def checksums(archives, tmp_path) -> Path:
    """The test archives' sha256 in sha256sum's format: what `--checksums` takes in place of the publishers'."""
    path = tmp_path / "SHA256SUMS"
    path.write_text("".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in archives.items()))
    return path


@pytest.fixture
def server(archives):
    """A local HTTP server in a thread, on 127.0.0.1 only; shut down (bounded) when the test ends."""
    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.state = State(archives)  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.state, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


DATASETS = ["cifar10", "cifar100", "tinyimagenet", "cub200", "aircraft", "herbarium19", "cars"]


def test_a_fetch_gives_each_dataset_bench_data_summary_reads(server, checksums, tmp_path, capsys):
    state, url = server
    root = tmp_path / "data"
    assert main(["data", "fetch", *DATASETS, "--data-root", str(root), "--mirror", url,
                 "--checksums", str(checksums)]) == 0
    said = capsys.readouterr().out
    assert "cifar10: ready at" in said and "herbarium19: ready at" in said and "cars: ready at" in said
    # the dataset folders and nothing else: no part file, archive, staging folder or lock left behind
    assert sorted(p.name for p in root.iterdir()) == sorted(
        ["cifar-10-batches-py", "cifar-100-python", "tiny-imagenet-200", "CUB_200_2011", "fgvc-aircraft-2013b",
         "herbarium_19", "stanford_cars"])
    assert {name for name, _ in state.requests} == set(state.files)  # every file from the mirror, once each
    for name in DATASETS:
        assert main(["data", "summary", name, "--data-root", str(root)]) == 0, name
    assert "683 classes" in capsys.readouterr().out
    # a second fetch finds them in place: it reads them again and downloads nothing
    state.requests.clear()
    assert main(["data", "fetch", "cifar10", "--data-root", str(root), "--mirror", url]) == 0
    assert state.requests == [] and "cifar10: already at" in capsys.readouterr().out


def test_a_wrong_checksum_is_refused_in_one_line_and_leaves_nothing(server, tmp_path, capsys):
    _, url = server
    root = tmp_path / "data"
    # the test archive is not the publisher's file: the recorded sha256 refuses it
    assert main(["data", "fetch", "cifar10", "--data-root", str(root), "--mirror", url]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cifar-10-python.tar.gz from http://127.0.0.1" in err and "sha256 is" in err
    assert "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce was expected" in err
    # whose copy went, and the way out (was "deleted it", read as the mirror's file, and no word of --checksums)
    assert "the copy downloaded here was removed (the file at the source is untouched)" in err
    assert "--checksums FILE (lines `<sha256>  cifar-10-python.tar.gz`" in err and "deleted it" not in err
    assert list(root.iterdir()) == []  # no part file, no archive, no folder


def test_a_download_cut_mid_way_resumes_where_it_stopped(server, checksums, tmp_path, capsys):
    state, url = server
    name = "tiny-imagenet-200.zip"
    state.cut_after[name] = 50_000
    root = tmp_path / "data"
    assert main(["data", "fetch", "tinyimagenet", "--data-root", str(root), "--mirror", url,
                 "--checksums", str(checksums)]) == 0
    assert [r for n, r in state.requests if n == name] == [None, "bytes=50000-"]
    assert main(["data", "summary", "tinyimagenet", "--data-root", str(root)]) == 0


def test_a_killed_fetch_leaves_no_dataset_folder_and_the_same_command_resumes(server, checksums, tmp_path, capsys):
    state, url = server
    name = "cifar-10-python.tar.gz"
    state.delay = 0.1  # slow enough to be killed mid-way (the archive is a dozen chunks)
    root = tmp_path / "data"
    command = ["data", "fetch", "cifar10", "--data-root", str(root), "--mirror", url, "--checksums", str(checksums)]
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", *command], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    part = root / WORK_DIR / f"{name}.part"
    try:
        deadline = time.monotonic() + 30
        while (not part.exists() or part.stat().st_size < 2 * CHUNK) and time.monotonic() < deadline\
                and proc.poll() is None:
            time.sleep(0.02)
        assert part.exists() and part.stat().st_size >= 2 * CHUNK, "the fetch never got far into its download"
    finally:
        proc.kill()
        proc.wait(10)
    assert not (root / "cifar-10-batches-py").exists()
    assert main(["data", "summary", "cifar10", "--data-root", str(root)]) == 2
    assert "not found or incomplete" in capsys.readouterr().err
    kept = part.stat().st_size
    assert 0 < kept < len(state.files[name])
    state.delay, state.requests = 0.0, []
    assert main(command) == 0
    assert state.requests == [(name, f"bytes={kept}-")]
    assert "resuming after" in capsys.readouterr().out
    assert main(["data", "summary", "cifar10", "--data-root", str(root)]) == 0


def test_a_half_unpacked_dataset_is_never_taken_for_one(server, checksums, tmp_path, capsys):
    """What a fetch killed while unpacking leaves is in the work folder, which no reader looks in."""
    _, url = server
    root = tmp_path / "data"
    half = root / WORK_DIR / "cifar100.staging" / "cifar-100-python"
    half.mkdir(parents=True)
    (half / "train").write_bytes(b"half")
    assert main(["data", "summary", "cifar100", "--data-root", str(root)]) == 2
    assert main(["data", "fetch", "cifar100", "--data-root", str(root), "--mirror", url,
                 "--checksums", str(checksums)]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["cifar-100-python"]


def test_the_mirror_may_come_from_the_environment_or_be_a_folder(server, archives, checksums, tmp_path, monkeypatch,
                                                                  capsys):
    state, url = server
    monkeypatch.setenv("BENCH_MIRROR", url)
    assert main(["data", "fetch", "cifar10", "--data-root", str(tmp_path / "a"), "--checksums", str(checksums)]) == 0
    assert state.requests == [("cifar-10-python.tar.gz", None)]
    monkeypatch.delenv("BENCH_MIRROR")
    folder = tmp_path / "downloads"  # files downloaded by hand (herbarium19's, cars'), given as the mirror
    folder.mkdir()
    (folder / "cifar-100-python.tar.gz").write_bytes(archives["cifar-100-python.tar.gz"])
    assert main(["data", "fetch", "cifar100", "--data-root", str(tmp_path / "b"), "--mirror", str(folder),
                 "--checksums", str(checksums)]) == 0
    assert (tmp_path / "b" / "cifar-100-python" / "meta").is_file()
    assert list(folder.iterdir()) == [folder / "cifar-100-python.tar.gz"]  # the mirror is only read


def test_datasets_behind_a_licence_or_login_get_one_line_each(tmp_path, capsys):
    root = tmp_path / "data"
    assert main(["data", "fetch", "herbarium19", "imagenet100", "digits", "--data-root", str(root)]) == 1
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("herbarium19: to be fetched by hand: accept the challenge's terms of use")
    assert f"bench reads it from {root.resolve()}/herbarium_19/" in lines[0]
    assert "bench data summary herbarium19 --data-root" in lines[0]
    assert lines[1].startswith("imagenet100: to be fetched by hand: ImageNet needs a login")
    assert lines[2].startswith("digits: nothing to fetch")
    assert "2 dataset(s) to fetch by hand first: herbarium19, imagenet100" in out.err


def test_an_unknown_dataset_lists_the_valid_names(tmp_path, capsys):
    assert main(["data", "fetch", "cifar1O", "--data-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset 'cifar1O'" in err and "cifar10" in err and "paper" in err
    assert main(["data", "fetch", "cifar10"]) == 2
    assert "needs --data-root DIR" in capsys.readouterr().err


DINO, SUP21K = "dino_vitbase16_pretrain.pth", "timm/vit_base_patch16_224.augreg_in21k/model.safetensors"


@pytest.fixture
def tiny_weights(monkeypatch) -> dict[str, bytes]:
    """dino-vitb16 and sup21k-vitb16 registered as timm's ViT-Ti (5.7 M parameters: the load check that a file no
    checksum vouches for passes builds its backbone in well under a second), with a file of each in its publisher's
    format: DINO's state dict, timm's safetensors."""
    import timm
    import torch
    from safetensors.torch import save

    from bench.features.weights import REGISTERED_BACKBONES

    for name in ("dino-vitb16", "sup21k-vitb16"):
        monkeypatch.setitem(REGISTERED_BACKBONES, name, ("vit_tiny_patch16_224", {}))
    state = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0).state_dict()
    saved = io.BytesIO()
    torch.save(state, saved)
    return {DINO: saved.getvalue(), SUP21K: save({k: v.contiguous() for k, v in state.items()})}


def test_weights_fetch_puts_each_file_under_the_name_bench_reads(server, tiny_weights, tmp_path, capsys):
    state, url = server
    files = {"ViT-B-16.pt": b"clip" * 1000, **tiny_weights, "dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth": b"not dinov3"}
    state.files.update(files)
    sums = tmp_path / "sums"
    sums.write_text(f"{hashlib.sha256(files['ViT-B-16.pt']).hexdigest()}  ViT-B-16.pt\n")
    weights = tmp_path / "weights"
    assert main(["weights", "fetch", "clip-vitb16", "dino-vitb16", "sup21k-vitb16", "--weights-dir", str(weights),
                 "--mirror", url, "--checksums", str(sums)]) == 0
    out = capsys.readouterr().out
    assert "clip-vitb16: ready at" in out and "sha256 verified" in out
    dino = hashlib.sha256(files["dino_vitbase16_pretrain.pth"]).hexdigest()
    assert f"no checksum is published for it: its sha256 is {dino}" in out
    for name, body in files.items():
        if "dinov3" not in name:
            assert (weights / name).read_bytes() == body
    assert not (weights / WORK_DIR).exists()
    # DINOv3's file is behind a licence: instructions; from a mirror, its name's sha256 prefix refuses another file
    assert main(["weights", "fetch", "dinov3-vitb16", "--weights-dir", str(weights)]) == 1
    assert "dinov3-vitb16: to be fetched by hand" in capsys.readouterr().out
    assert main(["weights", "fetch", "dinov3-vitb16", "--weights-dir", str(weights), "--mirror", url]) == 2
    assert "where 73cec8be was expected" in capsys.readouterr().err
    assert not (weights / "dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth").exists()
    assert main(["weights", "fetch", "dino-vitb17", "--weights-dir", str(weights)]) == 2
    assert "unknown backbone 'dino-vitb17'" in capsys.readouterr().err
    assert main(["weights", "fetch", "dino-vitb16", "--weights-dir", str(weights)]) == 0  # in place, and it loads
    assert "dino-vitb16: already at" in capsys.readouterr().out


PAGE = b"<!DOCTYPE html>\n<html><body>Sign in to download</body></html>\n"


def test_weights_fetch_deletes_what_does_not_load_and_says_what_it_was(server, tiny_weights, tmp_path, capsys):
    """A file no checksum vouches for is loaded into its backbone (as `bench run` loads it) before it is called
    ready: a page served in its place, or a file of another architecture, is deleted with one line saying what it
    was (exit 2, nothing kept); found in place, it is named and kept; a folder in its place is one line."""
    import timm
    import torch

    state, url = server
    weights = tmp_path / "weights"
    argv = ["weights", "fetch", "dino-vitb16", "--weights-dir", str(weights), "--mirror", url]
    state.files[DINO] = PAGE
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"bench: error: {DINO} from {url}/{DINO} is not dino-vitb16's weights file: it is an HTML page "
                   f"(it starts with '<!DOCTYPE html>'); deleted it (nothing kept)")
    assert [p for p in weights.rglob("*")] == []  # nothing kept, not even in the working folder
    other = io.BytesIO()  # ViT-S: another width, every tensor of another shape
    torch.save(timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=0).state_dict(), other)
    state.files[DINO] = other.getvalue()
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"bench: error: {DINO} from {url}/{DINO} is not dino-vitb16's weights file: it does not "
                           f"load into its backbone (backbone weights ") and "have another shape" in line
    assert line.endswith("; deleted it (nothing kept)") and [p for p in weights.rglob("*")] == []
    (weights / DINO).write_bytes(PAGE)  # put there by hand: kept, the user may not get it again
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (f"bench: error: {weights / DINO} is not dino-vitb16's published file: "
                                               f"it is an HTML page (it starts with '<!DOCTYPE html>'); move it away "
                                               f"and fetch again")
    assert (weights / DINO).read_bytes() == PAGE
    (weights / DINO).unlink()
    (weights / DINO).mkdir()
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (f"bench: error: {weights / DINO} is a folder, where dino-vitb16's "
                                               f"weights file should be; move it away and fetch again")


@pytest.mark.parametrize("where", ["a file", "under a file", "read-only"])
def test_a_weights_folder_that_cannot_take_the_file_is_one_line(server, where, tmp_path, monkeypatch, capsys):
    import builtins
    import errno

    state, url = server
    clip = b"clip" * 1000
    state.files["ViT-B-16.pt"] = clip
    sums = tmp_path / "sums"
    sums.write_text(f"{hashlib.sha256(clip).hexdigest()}  ViT-B-16.pt\n")
    weights = tmp_path / "weights"
    argv = ["weights", "fetch", "clip-vitb16", "--weights-dir", str(weights), "--mirror", url, "--checksums", str(sums)]
    if where == "a file":
        weights.write_text("not a folder")
        said = f"the weights folder {weights} is a file; give a folder as --weights-dir (or $BENCH_WEIGHTS_DIR), made " \
               f"where missing"
    elif where == "under a file":
        (tmp_path / "file").write_text("not a folder")
        weights = tmp_path / "file" / "weights"
        argv[4] = str(weights)
        said = f"cannot write clip-vitb16's file into the weights folder {weights} (a part of its path is a file); " \
               f"give a folder this user can write as --weights-dir (or $BENCH_WEIGHTS_DIR)"
    else:  # the tests run as root, which chmod does not stop: the mount's answer (EROFS) is simulated
        weights.mkdir()
        real_open, real_mkdir = builtins.open, os.mkdir

        def read_only(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

        def guarded_open(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+") and str(file).startswith(str(weights)):
                read_only(file)
            return real_open(file, mode, *args, **kwargs)

        def guarded_mkdir(path, *args, **kwargs):
            if str(path).startswith(str(weights)):
                read_only(path)
            return real_mkdir(path, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", guarded_open)
        monkeypatch.setattr(io, "open", guarded_open)
        monkeypatch.setattr(os, "mkdir", guarded_mkdir)
        said = f"cannot write clip-vitb16's file into the weights folder {weights} (Read-only file system); give a " \
               f"folder this user can write as --weights-dir (or $BENCH_WEIGHTS_DIR)"
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"bench: error: {said}"
    if where == "read-only":  # a read-only folder that holds the file is a weights folder all the same
        monkeypatch.undo()
        (weights / "ViT-B-16.pt").write_bytes(clip)
        monkeypatch.setattr(builtins, "open", guarded_open)
        monkeypatch.setattr(os, "mkdir", guarded_mkdir)
        assert main(argv) == 0 and "clip-vitb16: already at" in capsys.readouterr().out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_bytes_rate_and_time_left_on_a_terminal_only(server, tmp_path):
    state, url = server
    state.delay = 0.05
    body = os.urandom(12 * CHUNK)
    state.files["x.bin"] = body
    terminal, log = _Terminal(), io.StringIO()
    file = RemoteFile("x.bin", None, sha256=hashlib.sha256(body).hexdigest())
    download(file, tmp_path / "a", url, out=io.StringIO(), stream=terminal)
    drawn = terminal.getvalue()
    assert re.search(r"x\.bin  [\d.]+ KiB of 192\.0 KiB \(\d+%\)  [\d.]+ [KM]iB/s  0:00:\d\d left", drawn), drawn
    state.delay = 0.0
    download(file, tmp_path / "b", url, out=io.StringIO(), stream=log)
    assert log.getvalue() == ""
    assert Progress("x", 100, log).on is False


def _fetch(url: str, root: Path, sums: Path, name: str = "cifar10") -> list[str]:
    return ["data", "fetch", name, "--data-root", str(root), "--mirror", url, "--checksums", str(sums)]


def _pin(tmp_path: Path, files: dict[str, bytes]) -> Path:
    sums = tmp_path / "pinned"
    sums.write_text("".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in files.items()))
    return sums


@pytest.fixture
def cifar_sums(archives, tmp_path) -> Path:
    """The checksum of the test's cifar-10-python.tar.gz alone: no line for a file a cifar10 fetch does not use."""
    return _pin(tmp_path, {"cifar-10-python.tar.gz": archives["cifar-10-python.tar.gz"]})


def _everything(folder: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(folder)): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
            for p in folder.rglob("*")}


HOSTILE = {  # cifar-10-python.tar.gz's members, as a mirror could serve them with a checksum pinned to match
    "link-then-file": ([("cifar-10-batches-py", "dir", None), ("escape", "sym", "../../../outside"),
                        ("escape/pwned", "file", b"x"), ("hl", "hard", "../../../outside/flag"),
                        ("hl", "file", b"overwrite")], "its member 'escape' is a symbolic link"),
    "dotdot": ([("../../../outside/flag", "file", b"overwrite")], "its member '../../../outside/flag' has a `..` part"),
    "clash": ([("cifar-10-batches-py/x", "file", b"1"), ("cifar-10-batches-py/x/y", "file", b"2")],
              "its member 'cifar-10-batches-py/x/y' needs a folder 'cifar-10-batches-py/x' where there is a file"),
}


@pytest.mark.parametrize("attack", [*HOSTILE, "cve-2025-4517"])
def test_a_hostile_archive_is_refused_even_with_its_checksum_pinned(attack, server, tmp_path, capsys):
    """The archive matches the checksum given, as one served with a mirror's checksums file would: it is refused
    all the same, naming the member; nothing is written outside the data root, no dataset folder is left, and the
    archive is deleted (the same command would unpack it again)."""
    from tests import archive_attacks

    state, url = server
    root, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()
    (outside / "flag").write_bytes(b"original")
    work = tmp_path / "build"
    work.mkdir()
    if attack == "cve-2025-4517":  # sized for the folder bench unpacks in, as an attacker who knows it would
        archive = archive_attacks.path_max_chain(work, root.resolve() / WORK_DIR / "cifar10.staging")
        says = "its member 'a' is a symbolic link"
    else:
        members, says = HOSTILE[attack]
        archive = archive_attacks.tar(work / "hostile.tgz", members)
    state.files["cifar-10-python.tar.gz"] = archive.read_bytes()
    sums = _pin(tmp_path, {"cifar-10-python.tar.gz": archive.read_bytes()})
    assert main(_fetch(url, root, sums)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert says in err and "refused to unpack cifar-10-python.tar.gz" in err and "--checksums" in err
    assert _everything(outside) == {"flag": b"original"}
    assert list(root.iterdir()) == []  # no dataset folder, no staging folder, no archive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "data", "outside", "pinned"]


def test_a_data_root_that_is_a_file_or_cannot_be_written_is_one_line(server, cifar_sums, tmp_path, monkeypatch,
                                                                     capsys):
    _, url = server
    file = tmp_path / "a-file"
    file.write_text("")
    assert main(_fetch(url, file, cifar_sums)) == 2
    assert capsys.readouterr().err.strip() == (f"bench: error: the data root {file} is a file, not a folder: give "
                                               f"--data-root (or $BENCH_DATA_ROOT) a folder")
    assert main(_fetch(url, file / "data", cifar_sums)) == 2  # under a file: cannot be made
    assert "cannot make the data root" in capsys.readouterr().err
    root = tmp_path / "read-only"
    root.mkdir()
    if os.geteuid() == 0:  # root writes through any mode: a read-only file system's answer, simulated
        real = Path.mkdir

        def refused(self, *args, **kwargs):
            if self == root / WORK_DIR:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", refused)
    else:
        root.chmod(0o555)
    try:
        assert main(_fetch(url, root, cifar_sums)) == 2
    finally:
        root.chmod(0o755)
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"bench: error: cannot write in {root} (Permission denied)") and "\n" not in err


def test_a_file_where_the_fetch_keeps_its_work_is_one_line(server, cifar_sums, tmp_path, capsys):
    _, url = server
    root = tmp_path / "data"
    root.mkdir()
    (root / WORK_DIR).write_text("mine")
    assert main(_fetch(url, root, cifar_sums)) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"bench: error: {root / WORK_DIR} is a file where bench keeps what it fetches in flight (a "
                   f"folder): move it away and fetch again")
    assert (root / WORK_DIR).read_text() == "mine"


class _FullDisk:
    """Files opened for writing whose path passes `hits` get a few bytes, then ENOSPC, as on a full disk."""

    def __init__(self, hits, monkeypatch: pytest.MonkeyPatch) -> None:
        import builtins
        import errno

        real = builtins.open

        def guarded(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+") and hits(str(file)):
                with real(file, mode, *args, **kwargs) as fh:
                    fh.write(b"\0" * 1000)
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(file, mode, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", guarded)
        monkeypatch.setattr(io, "open", guarded)


def test_a_disk_that_fills_while_downloading_removes_the_part_file_and_says_what_the_dataset_needs(
        server, archives, cifar_sums, tmp_path, monkeypatch, capsys):
    state, url = server
    root = tmp_path / "data"
    _FullDisk(lambda path: path.endswith(".part"), monkeypatch)
    assert main(_fetch(url, root, cifar_sums)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--results" not in err and "--cache-dir" not in err  # not bench run's advice
    size = size_text(len(archives["cifar-10-python.tar.gz"]))
    assert err.startswith(f"bench: error: no space left on device downloading cifar-10-python.tar.gz ({size}) "
                          f"into {root.resolve() / WORK_DIR}: removed the partial download; cifar10's archives take "
                          f"{size} and unpack to about as much again: free ")
    assert f"under {root.resolve()} and run the same command again" in err
    assert list(root.iterdir()) == []  # no part file kept to fill the disk again


def test_a_disk_that_fills_while_unpacking_keeps_the_verified_download_and_the_same_command_resumes(
        server, archives, cifar_sums, tmp_path, monkeypatch, capsys):
    state, url = server
    root = tmp_path / "data"
    _FullDisk(lambda path: ".staging" in path, monkeypatch)
    assert main(_fetch(url, root, cifar_sums)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--results" not in err
    assert err.startswith(f"bench: error: no space left on device unpacking cifar-10-python.tar.gz into "
                          f"{root.resolve() / WORK_DIR}: removed what it had unpacked and kept the verified download")
    assert sorted(p.name for p in (root / WORK_DIR).iterdir()) == ["cifar-10-python.tar.gz"]
    assert list(root.iterdir()) == [root / WORK_DIR]
    monkeypatch.undo()
    state.requests.clear()
    assert main(_fetch(url, root, cifar_sums)) == 0
    assert state.requests == []  # the verified download was used again
    assert sorted(p.name for p in root.iterdir()) == ["cifar-10-batches-py"]


def test_checksums_lines_that_name_no_file_fetched_are_said(server, archives, checksums, tmp_path, capsys):
    state, url = server
    typo = tmp_path / "typo"
    typo.write_text(f"{hashlib.sha256(archives['cifar-10-python.tar.gz']).hexdigest()}  cifar-10-python.tgz\n")
    assert main(_fetch(url, tmp_path / "a", typo)) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("bench: error: no line of --checksums names a file of the datasets fetched (cifar-10-python.tgz); "
                   "they are cifar-10-python.tar.gz")
    assert state.requests == []  # refused before anything was downloaded
    assert main(_fetch(url, tmp_path / "b", checksums)) == 0  # the test archives' checksums: one matches, ten do not
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: warning: 10 line(s) of --checksums name no file of the datasets fetched, unused: ")
    assert "CUB_200_2011.tgz" in err and "and 5 more" in err and "cifar-10-python.tar.gz" not in err


def test_weights_checksums_lines_that_name_no_file_fetched_are_refused(server, tmp_path, capsys):
    state, url = server
    typo = tmp_path / "typo"
    typo.write_text(f"{'0' * 64}  dino_vitbase16_pretrain.pt\n")  # the file is dino_vitbase16_pretrain.pth
    assert main(["weights", "fetch", "dino-vitb16", "--weights-dir", str(tmp_path / "w"), "--mirror", url,
                 "--checksums", str(typo)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: error: no line of --checksums names a file of the weights fetched "
                          "(dino_vitbase16_pretrain.pt); they are dino_vitbase16_pretrain.pth"), err
    assert state.requests == []  # was: the line ignored without a word, the file fetched unpinned


@pytest.mark.parametrize("headers, total", [
    ({"Content-Range": "bytes 0-9/100"}, 100), ({"Content-Length": "40"}, 50),
    ({"Content-Range": "bytes 0-9/²"}, None), ({"Content-Length": "²"}, None),  # was: int('²'), a traceback
])
def test_a_servers_size_headers_are_read_as_ascii_digits_only(headers, total):
    from types import SimpleNamespace

    from bench.core.download import _total

    assert _total(SimpleNamespace(headers=headers), 10) == total

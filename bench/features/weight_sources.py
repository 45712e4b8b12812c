"""`bench weights fetch`: each registered backbone's published file, downloaded from its publisher (or a mirror),
verified where a checksum is published, and put in the weights directory under the name bench reads
(`weights.PUBLISHED_FILES`), in one rename once verified.

Checksums (docs/reproducing-the-paper.md#fetching-the-datasets-and-weights says where each was found): OpenAI
publishes each CLIP file's sha256 in its URL (openai/CLIP clip/clip.py); DINOv3's file name carries the first 8
hex digits of its sha256 (torch hub's `check_hash`, facebookresearch/dinov3 dinov3/hub/backbones.py); DINO's
and DINOv2's files and timm's safetensors come with none, so their sha256 is printed for the user to pin
(`--checksums`).

A file no checksum vouches for is loaded into its backbone before it is called ready, by the loader `bench run`
uses (`bench.features.backbones.build_backbone`, as its preflight does): what fetch accepts, a run accepts. A mirror
or a login wall may serve an HTML page under the file's name; downloaded, such a file is deleted and said in one
line; found already in place, it is named and kept (the user may not be able to download it again).
"""
from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import IO, Mapping, Sequence

from bench.core.download import (WORK_DIR, RemoteFile, check_pins, download, held, mirror_from, mismatch, source_url,
                                 with_checksum)
from bench.core.sizes import size_text
from bench.core.storage import shortened, unwritable, usable_path
from bench.errors import BenchError, unknown
from bench.features.weights import PAPER_BACKBONES, PUBLISHED_FILES, RELEASES, resolve_pretrained

FAIR = "https://dl.fbaipublicfiles.com"
OPENAI = "https://openaipublic.azureedge.net/clip/models"


def _dinov2(name: str) -> RemoteFile:
    file = PUBLISHED_FILES[name]  # dinov2_vits14_reg4_pretrain.pth lives in dinov2_vits14/
    return RemoteFile(file, f"{FAIR}/dinov2/{file.split('_reg')[0].removesuffix('_pretrain.pth')}/{file}")


def _openai(name: str, sha256: str) -> RemoteFile:
    file = PUBLISHED_FILES[name]  # OpenAI's URLs name the file's sha256 (clip.py checks it)
    return RemoteFile(file, f"{OPENAI}/{sha256}/{file}", sha256=sha256)


WEIGHT_SOURCES: dict[str, RemoteFile] = {
    "dino-vitb16": RemoteFile(PUBLISHED_FILES["dino-vitb16"],
                              f"{FAIR}/dino/dino_vitbase16_pretrain/dino_vitbase16_pretrain.pth"),
    "dino-resnet50": RemoteFile(PUBLISHED_FILES["dino-resnet50"],
                                f"{FAIR}/dino/dino_resnet50_pretrain/dino_resnet50_pretrain.pth"),
    "clip-vitb16": _openai("clip-vitb16", "5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f"),
    **{name: _dinov2(name) for name in PUBLISHED_FILES if name.startswith("dinov2-")},
    # behind a licence: the download links come by e-mail once it is accepted
    "dinov3-vitb16": RemoteFile(PUBLISHED_FILES["dinov3-vitb16"], None, sha256="73cec8be"),
    "clip-vitl14": _openai("clip-vitl14", "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836"),
    "sup21k-vitb16": RemoteFile(PUBLISHED_FILES["sup21k-vitb16"],
                                "https://huggingface.co/timm/vit_base_patch16_224.augreg_in21k/resolve/main/"
                                "model.safetensors"),
}
GROUPS = {"paper": tuple(PAPER_BACKBONES), "all": tuple(WEIGHT_SOURCES)}


def fetch_weight(name: str, weights_dir: Path, mirror: str | None = None,
                 checksums: Mapping[str, str] | None = None, out: IO[str] | None = None,
                 stream: IO[str] | None = None) -> bool:
    """Put backbone `name`'s file in `weights_dir`; True once it is there (and matches its checksum where one
    is recorded), False where it must be downloaded by hand first (what to do is printed, in one line)."""
    out = sys.stdout if out is None else out
    file = with_checksum(WEIGHT_SOURCES[name], checksums or {})
    target = weights_dir / file.name
    mirror = mirror_from(mirror)
    if target.is_dir():
        raise BenchError(f"{target} is a folder, where {name}'s weights file should be; move it away and fetch again")
    if target.exists():
        wrong = mismatch(file, target, stream)
        if wrong is None and not file.checked_by:
            wrong = does_not_load(name, target)
        if wrong is not None:
            raise BenchError(f"{target} is not {name}'s published file: {wrong}; move it away and fetch again")
        how = f"{file.checked_by} verified" if file.checked_by else "no checksum recorded; it loads into its backbone"
        print(f"{name}: already at {target} ({how})", file=out)
        return True
    if file.url is None and mirror is None:
        print(f"{name}: to be fetched by hand: {file.name} is published at {RELEASES[name]}; download it into a "
              f"folder and give that as --mirror DIR (or put it at {target}); its sha256 begins with {file.sha256}",
              file=out)
        return False
    writable_folder(target.parent, f"{name}'s file")
    print(f"{name}: fetching {file.name} into {weights_dir}", file=out, flush=True)
    work = weights_dir / WORK_DIR
    key = file.name.replace("/", "__")
    try:
        with held(work, key):
            path = download(file, work, mirror, out, stream)
            wrong = None if file.checked_by else does_not_load(name, path)
            if wrong is not None:  # what was served is no weights file: nothing of it is kept
                path.unlink()
                raise BenchError(f"{file.name} from {source_url(file, mirror)} is not {name}'s weights file: {wrong}; "
                                 f"deleted it (nothing kept)")
            os.replace(path, target)  # the file appears under the name bench reads only whole and verified
    finally:
        try:
            work.rmdir()
        except OSError:
            pass  # a part file or another fetch is still there
    resolve_pretrained(name, True, str(weights_dir))  # what `bench run --weights-dir` checks
    if file.checked_by:
        print(f"{name}: ready at {target} ({size_text(target.stat().st_size)}, {file.checked_by} verified)", file=out)
    else:
        from bench.core.download import digests

        sha256, _ = digests(target, file.name, stream)
        print(f"{name}: ready at {target} ({size_text(target.stat().st_size)}); no checksum is published for it: "
              f"its sha256 is {sha256} (pin it with --checksums)", file=out)
    return True


def fetch_weights(names: Sequence[str], weights_dir: str | Path, mirror: str | None = None,
                  checksums: Mapping[str, str] | None = None, out: IO[str] | None = None,
                  stream: IO[str] | None = None) -> list[str]:
    """Fetch the files of the named backbones (or groups: `paper`, `all`) into `weights_dir`, in order; the
    names still to be fetched by hand. Unknown names are refused before anything is fetched."""
    wanted: list[str] = []
    for name in names:
        for one in GROUPS.get(name, (name,)):
            if one not in WEIGHT_SOURCES:
                raise unknown("backbone", one, [*WEIGHT_SOURCES, *GROUPS])
            if one not in wanted:
                wanted.append(one)
    check_pins(checksums or {}, {WEIGHT_SOURCES[name].name for name in wanted}, "weights")
    folder = usable_path(Path(weights_dir).expanduser(), "--weights-dir").resolve()
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"the weights folder {shortened(folder)} is a file; give a folder as --weights-dir (or "
                         f"$BENCH_WEIGHTS_DIR), made where missing")
    return [name for name in wanted if not fetch_weight(name, folder, mirror, checksums, out, stream)]


def writable_folder(folder: Path, what: str) -> None:
    """`folder` made where missing, or one line saying why `what` cannot be written there (a file where a folder
    is, a read-only mount, no permission). Asked only where a file is to be fetched: a read-only folder that
    holds every file asked for is a weights folder all the same."""
    err = unwritable(folder)
    if err is None:
        return
    why = {errno.EEXIST: "a file is where a folder of it should be", errno.ENOTDIR: "a part of its path is a file"}.get(
        err.errno or 0, err.strerror or str(err))
    raise BenchError(f"cannot write {what} into the weights folder {shortened(folder)} ({why}); give a folder this "
                     f"user can write as --weights-dir (or $BENCH_WEIGHTS_DIR)")


def does_not_load(name: str, path: Path) -> str | None:
    """Why the file at `path` does not load into backbone `name` as `bench run` would load it, or None when it
    does. A web page served in its place is named as one, without building the backbone."""
    with path.open("rb") as fh:
        head = fh.read(512)
    if not head:
        return "it is empty"
    start = head.lstrip()[:64].lower()
    if start.startswith((b"<!doctype", b"<html", b"<head", b"<body", b"<?xml")):  # a web page, a storage's error
        first = head.lstrip().split(b"\n", 1)[0][:40].decode("utf-8", "replace")
        kind = "an XML document" if start.startswith(b"<?xml") else "an HTML page"
        return f"it is {kind} (it starts with {first!r})"
    from bench.features.backbones import build_backbone

    try:  # what `bench run`'s preflight does (`_check_weights_load`) with the file in --weights-dir
        build_backbone(name, {"pretrained": str(path)}, (224, 224, 3))
    except BenchError as err:
        return f"it does not load into its backbone ({err})"
    return None

"""`bench weights fetch`: each registered backbone's published file, downloaded from its publisher (or a mirror),
verified where a checksum is published, and put in the weights directory under the name bench reads
(`weights.PUBLISHED_FILES`), in one rename once verified.

Checksums (docs/reproducing-the-paper.md#fetching-the-datasets-and-weights says where each was found): OpenAI
publishes each CLIP file's sha256 in its URL (openai/CLIP clip/clip.py); DINOv3's file name carries the first 8
hex digits of its sha256 (torch hub's `check_hash`, facebookresearch/dinov3 dinov3/hub/backbones.py); DINO's
and DINOv2's files and timm's safetensors come with none, so their sha256 is printed for the user to pin
(`--checksums`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Mapping, Sequence

from bench.core.download import WORK_DIR, RemoteFile, download, held, mirror_from, mismatch, with_checksum
from bench.core.sizes import size_text
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
    if target.exists():
        wrong = mismatch(file, target, stream)
        if wrong is not None:
            raise BenchError(f"{target} is not {name}'s published file: {wrong}; move it away and fetch again")
        how = f"{file.checked_by} verified" if file.checked_by else "no checksum recorded"
        print(f"{name}: already at {target} ({how})", file=out)
        return True
    if file.url is None and mirror is None:
        print(f"{name}: to be fetched by hand: {file.name} is published at {RELEASES[name]}; download it into a "
              f"folder and give that as --mirror DIR (or put it at {target}); its sha256 begins with {file.sha256}",
              file=out)
        return False
    print(f"{name}: fetching {file.name} into {weights_dir}", file=out, flush=True)
    work = weights_dir / WORK_DIR
    key = file.name.replace("/", "__")
    try:
        with held(work, key):
            path = download(file, work, mirror, out, stream)
            target.parent.mkdir(parents=True, exist_ok=True)
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
    folder = Path(weights_dir).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return [name for name in wanted if not fetch_weight(name, folder, mirror, checksums, out, stream)]

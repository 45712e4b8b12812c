"""Whether the banks a grid's pending runs would build fit their cache, checked before anything runs: first rough
upper bounds of a bank's size from what the spec names (no dataset or backbone is loaded for them); where those do
not fit, bounds from the images the reader finds and the backbone's real shapes (`bench.execution.preflight`), so
that only what cannot fit is refused."""
from __future__ import annotations

import shutil
from pathlib import Path

from bench.core.sizes import size_text
from bench.core.storage import unwritable
from bench.errors import BenchError

# Rough upper bounds for the space check before a grid runs (no dataset or backbone is loaded for it):
# images per dataset (train + val + test) and values per image of a backbone's features and tokens.
DATASET_IMAGES = {"cifar10": 60_000, "cifar100": 60_000, "tinyimagenet": 120_000, "cub200": 11_788,
                  "herbarium19": 37_000, "digits": 1_797}
# per value a ViT's width (what its tokens hold; at least its feature: CLIP's projection is narrower)
FEATURE_DIMS = {"dino-resnet50": 2048, "dino-vitb16": 768, "clip-vitb16": 768, "dinov2-vits14": 384,
                "dinov2-vitb14": 768, "dinov2-vitl14": 1024, "dinov2-vits14-reg4": 384, "dinov2-vitb14-reg4": 768,
                "dinov2-vitl14-reg4": 1024, "dinov3-vitb16": 768, "clip-vitl14": 1024, "sup21k-vitb16": 768}
TOKENS = 197  # a ViT-B/16 at 224 px: 14 x 14 patches and the class token
# tokens per image of the backbones that have other counts at 224 px: 16 x 16 patches of 14 px, registers
# (DINOv2's 4) and DINOv3's 4 storage tokens besides the class token
TOKEN_COUNTS = {"dinov2-vits14": 257, "dinov2-vitb14": 257, "dinov2-vitl14": 257, "dinov2-vits14-reg4": 261,
                "dinov2-vitb14-reg4": 261, "dinov2-vitl14-reg4": 261, "dinov3-vitb16": 201, "clip-vitl14": 257}


def bank_bytes_bound(images: int, views: int, dim: int, tokens: int = 1, bytes_per_value: int = 2) -> int:
    """At most what a bank of `images` images with `views` stored views each (plus the plain view) holds."""
    return images * (views + 1) * tokens * dim * bytes_per_value


def cache_fits(cache: Path, needed: int) -> bool:
    """Whether `cache` (or, not made yet, the directory it will be made in) has `needed` bytes free."""
    where = Path(cache)
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free >= needed


def check_cache(cache: Path, needed: int, what: str) -> None:
    """Refuse in one line, before anything runs, a cache that cannot be written or has less free space
    than the `needed` bytes of the banks (`what`) the pending runs would build."""
    err = unwritable(Path(cache) / "banks")
    if err is not None:
        raise BenchError(f"bank cache {cache} is not writable ({err.strerror}) and the runs must build {what}; "
                         f"choose another with --cache-dir DIR or BENCH_CACHE_DIR")
    free = shutil.disk_usage(cache).free
    if needed > free:
        # sizes in the unit that shows them (a nearly full disk in GiB read "0.00 GiB free ... about 0.00 GiB")
        raise BenchError(f"bank cache {cache} has {size_text(free)} free and the runs must build {what} "
                         f"(about {size_text(needed)} at most); free space or choose another with --cache-dir DIR "
                         f"or BENCH_CACHE_DIR")

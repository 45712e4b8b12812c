"""What the on-disk readers share: locating a dataset, clear errors, decoding, persisted partitions."""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from bench.data.base import DatasetError

DECODE_SIZE = 256  # file-backed images are decoded to Resize(256) + CenterCrop(256), the authors' 256 stage


def locate(name: str, root: str | None, dirname: str, required: Sequence[str], layout: str) -> Path:
    """`root/dirname` if it exists, else `root` itself; every `required` entry must be there."""
    if not root:
        raise DatasetError(f"dataset {name!r}: no data root given; use --data-root DIR, BENCH_DATA_ROOT or "
                           f"--cfg-options dataset.root=DIR. Expected layout: {layout}")
    base = Path(root).expanduser()
    path = base / dirname if (base / dirname).is_dir() else base
    missing = [r for r in required if not (path / r).exists()]
    if missing:
        raise DatasetError(f"dataset {name!r} not found or incomplete at {path}: missing {', '.join(missing)}. "
                           f"Expected layout: {layout}")
    return path


def read_lines(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetError(f"cannot read {path}: {err}") from None


def _decode_one(path: Path, size: int) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            w, h = img.size
            scale = size / min(w, h)
            img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BICUBIC)
            left, top = (img.width - size) // 2, (img.height - size) // 2
            return np.asarray(img.crop((left, top, left + size, top + size)), dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError) as err:
        raise DatasetError(f"unreadable image {path}: {err}") from None


def decode(paths: Sequence[Path], size: int = DECODE_SIZE, workers: int | None = None) -> np.ndarray:
    """Decode image files in parallel threads (PIL releases the GIL while decoding) to N×size×size×3."""
    workers = workers or min(16, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        return np.stack(list(pool.map(lambda p: _decode_one(Path(p), size), paths))) if len(paths) else \
            np.empty((0, size, size, 3), np.uint8)


def decode_native(paths: Sequence[Path], workers: int | None = None) -> np.ndarray:
    """Decode same-size images (TinyImageNet's 64×64) without resizing."""
    from PIL import Image

    def one(p: Path) -> np.ndarray:
        try:
            with Image.open(p) as img:
                return np.asarray(img.convert("RGB"), dtype=np.uint8)
        except OSError as err:
            raise DatasetError(f"unreadable image {p}: {err}") from None

    with ThreadPoolExecutor(workers or min(16, os.cpu_count() or 1)) as pool:
        arrays = list(pool.map(one, paths))
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise DatasetError(f"images of different sizes {sorted(shapes)[:3]} where one size was expected")
    return np.stack(arrays)


def persisted_partition(name: str, labels: np.ndarray, files: Iterable[str], val_per_class: float | int,
                        seed: int, directory: str | Path | None) -> np.ndarray:
    """Boolean val mask over a train split, drawn once per class with a fixed seed and stored as JSON.

    `val_per_class` < 1 is a fraction of each class (CUB's 20%), >= 1 a count (Herbarium's 5). The file
    name carries a hash of the file list, so a changed dataset gets a new partition, never a stale one.
    """
    files = list(files)
    digest = hashlib.sha256(("\n".join(files) + f"|{val_per_class}|{seed}").encode()).hexdigest()[:12]
    path = Path(directory) / f"{name}-{digest}.json" if directory else None
    if path is not None and path.exists():
        val = set(json.loads(path.read_text())["val"])
        return np.array([f in val for f in files])
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        # int(), not round(): the authors' `int(val_split * len(idxs))`
        n = int(len(idx) * val_per_class) if val_per_class < 1 else min(int(val_per_class), len(idx) - 1)
        mask[rng.choice(idx, size=max(n, 0), replace=False)] = True
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"dataset": name, "seed": seed, "val_per_class": val_per_class,
                                   "val": [f for f, m in zip(files, mask) if m]}, indent=1))
        tmp.replace(path)
    return mask

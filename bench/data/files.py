"""What the on-disk readers share: locating a dataset, clear errors, decoding image files. The lowest module
of `bench.data`: `base` reads image files through it."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from bench.core.numerics import available_cores
from bench.errors import BenchError

if TYPE_CHECKING:
    from PIL import Image

class DatasetError(BenchError):
    """A dataset is missing, incomplete or corrupt; the message says what and where."""


DECODE_SIZE = 256  # file-backed images are decoded to Resize(256) + CenterCrop(256), the authors' 256 step


def locate(name: str, root: str | None, dirname: str, required: Sequence[str], layout: str) -> Path:
    """The dataset's directory: `root/dirname/dirname` (an archive unpacked into a folder of its own
    name), `root/dirname` or `root` itself, the first that holds every `required` entry."""
    if not root:
        raise DatasetError(f"dataset {name!r}: no data root given; use --data-root DIR, BENCH_DATA_ROOT or "
                           f"--cfg-options dataset.root=DIR. Expected layout: {layout}")
    base = Path(root).expanduser()
    candidates = [base / dirname / dirname, base / dirname, base]
    for path in candidates:
        if all((path / r).exists() for r in required):
            return path
    path = base / dirname if (base / dirname).is_dir() else base
    missing = [r for r in required if not (path / r).exists()]
    raise DatasetError(f"dataset {name!r} not found or incomplete at {path}: missing {', '.join(missing)}. "
                       f"Expected layout: {layout}")


def read_lines(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetError(f"cannot read {path}: {err}") from None


def open_resized(path: Path, short: int) -> Image.Image:
    """The image at `path` in RGB, resized (bicubic) so its shorter side is `short`; an unreadable or
    truncated file is a `DatasetError` that names it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as opened:
            img = opened.convert("RGB")
            w, h = img.size
            scale = short / min(w, h)
            return img.resize((max(short, round(w * scale)), max(short, round(h * scale))), Image.Resampling.BICUBIC)
    except (OSError, UnidentifiedImageError, ValueError) as err:
        raise DatasetError(f"unreadable image {path}: {err}") from None


def _decode_one(path: Path, size: int) -> np.ndarray:
    img = open_resized(path, size)
    left, top = (img.width - size) // 2, (img.height - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)), dtype=np.uint8)


def decode(paths: Sequence[Path], size: int = DECODE_SIZE, workers: int | None = None) -> np.ndarray:
    """Decode image files in parallel threads (PIL releases the GIL while decoding) to N×size×size×3."""
    workers = workers or min(16, available_cores())
    with ThreadPoolExecutor(workers) as pool:
        return np.stack(list(pool.map(lambda p: _decode_one(Path(p), size), paths))) if len(paths) else\
            np.empty((0, size, size, 3), np.uint8)


def decode_native(paths: Sequence[Path], workers: int | None = None) -> np.ndarray:
    """Decode same-size images (TinyImageNet's 64×64) without resizing."""
    from PIL import Image

    def one(p: Path) -> np.ndarray:
        try:
            with Image.open(p) as img:
                return np.asarray(img.convert("RGB"), dtype=np.uint8)
        except (OSError, ValueError) as err:
            raise DatasetError(f"unreadable image {p}: {err}") from None

    with ThreadPoolExecutor(workers or min(16, available_cores())) as pool:
        arrays = list(pool.map(one, paths))
    if not arrays:
        return np.empty((0, 0, 0, 3), np.uint8)
    odd = next((i for i, a in enumerate(arrays) if a.shape != arrays[0].shape), None)
    if odd is not None:
        raise DatasetError(f"image {paths[odd]} is {arrays[odd].shape[1]}×{arrays[odd].shape[0]} where every "
                           f"image should be {arrays[0].shape[1]}×{arrays[0].shape[0]}, like {paths[0]}")
    return np.stack(arrays)

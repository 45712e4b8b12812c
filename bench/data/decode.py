"""Decoding the images that training views are cut from (`bench.features.augment` cuts them).

File-backed images (CUB, Herbarium) are decoded by parallel threads to the authors' 256 step (shorter
side 256, bicubic) with their whole width or height (`Canvas`): the crops see the full picture, as the
authors' do, not only its centre square. In-memory images are handed on as float tensors. `batches`
decodes one batch ahead of the device.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from bench.core.numerics import available_cores
from bench.data.base import ImageSet
from bench.data.files import DECODE_SIZE, open_resized
from bench.data.preprocess import to_tensor

MAX_ASPECT = 2.0  # a decoded canvas keeps at most 2:1 of an image (the centre of anything longer)


@dataclass
class Canvas:
    """Images of different sizes as one batch: image i at the top-left of `pixels` (uint8 N×C×H×W),
    `sizes[i]` = (height, width) of its own area. Beyond that area its edge pixels are repeated, so
    interpolation at the image's border sees the image, not the filler."""

    pixels: torch.Tensor
    sizes: torch.Tensor  # int64 N×2, on the CPU

    def __len__(self) -> int:
        return self.pixels.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Canvas":
        return Canvas(self.pixels.to(device, non_blocking=non_blocking), self.sizes)

    def center_squares(self, size: int = DECODE_SIZE) -> np.ndarray:
        """N×size×size×C uint8: each image's centre square, exactly what `ImageSet.load` decodes."""
        out = np.empty((len(self), size, size, self.pixels.shape[1]), np.uint8)
        for i, (h, w) in enumerate(self.sizes.tolist()):
            top, left = (h - size) // 2, (w - size) // 2
            out[i] = self.pixels[i, :, top: top + size, left: left + size].permute(1, 2, 0).numpy()
        return out


def _decode_whole(path: Path, short: int) -> np.ndarray:
    img = open_resized(path, short)
    w, h = img.size
    # keep the centre 2:1 of very elongated images; the centre square is unchanged by this
    cw, ch = min(w, int(MAX_ASPECT * short)), min(h, int(MAX_ASPECT * short))
    left, top = (w - cw) // 2, (h - ch) // 2
    return np.asarray(img.crop((left, top, left + cw, top + ch)), dtype=np.uint8)


def decode_canvas(paths: Sequence[Path], short: int = DECODE_SIZE, workers: int | None = None) -> Canvas:
    """Decode image files in parallel threads to their shorter side `short`, whole (see `Canvas`)."""
    workers = workers or min(16, available_cores())
    with ThreadPoolExecutor(workers) as pool:
        arrays = list(pool.map(lambda p: _decode_whole(Path(p), short), paths))
    if not arrays:
        return Canvas(torch.empty(0, 3, short, short, dtype=torch.uint8), torch.empty(0, 2, dtype=torch.int64))
    height, width = max(a.shape[0] for a in arrays), max(a.shape[1] for a in arrays)
    canvas = np.empty((len(arrays), height, width, 3), np.uint8)
    for i, a in enumerate(arrays):
        canvas[i] = np.pad(a, ((0, height - a.shape[0]), (0, width - a.shape[1]), (0, 0)), mode="edge")
    sizes = torch.tensor([a.shape[:2] for a in arrays], dtype=torch.int64)
    return Canvas(torch.from_numpy(canvas).permute(0, 3, 1, 2), sizes)


ViewInput = torch.Tensor | Canvas  # what a view policy cuts views from


def view_input(images: ImageSet, index: np.ndarray | slice) -> ViewInput:
    """What the training views of `images[index]` are cut from: in-memory images as a float tensor
    in [0, 1] (N×C×H×W), file-backed ones decoded whole into a `Canvas`."""
    if isinstance(images.images, np.ndarray):
        return to_tensor(images.images[index])
    return decode_canvas(_files(images.images, index))


def _files(files: Sequence[Path], index: np.ndarray | slice) -> Sequence[Path]:
    return files[index] if isinstance(index, slice) else [files[i] for i in np.asarray(index)]


def _load(images: ImageSet, index: slice, views: bool) -> tuple[np.ndarray, ViewInput | None]:
    if isinstance(images.images, np.ndarray) or not views:
        batch = images.load(index)
        return batch, (view_input(images, index) if views else None)
    canvas = decode_canvas(_files(images.images, index))
    return canvas.center_squares(), canvas  # one decode serves the plain image and the views


def batches(images: ImageSet, batch_size: int, views: bool) -> Iterator[tuple[np.ndarray, ViewInput | None]]:
    """Per batch, in order: the uint8 N×H×W×C images of the test transform's input and (with
    `views`) what the training views are cut from. File-backed batches are decoded by a background
    thread one batch ahead, so decoding overlaps the device's work on the previous batch."""
    starts = range(0, len(images), batch_size)
    if images.in_memory:
        for start in starts:
            yield _load(images, slice(start, start + batch_size), views)
        return
    with ThreadPoolExecutor(1) as ahead:
        pending = None
        for start in starts:
            current = pending.result() if pending else _load(images, slice(start, start + batch_size), views)
            nxt = start + batch_size
            pending = ahead.submit(_load, images, slice(nxt, nxt + batch_size), views) if nxt < len(images) else None
            yield current

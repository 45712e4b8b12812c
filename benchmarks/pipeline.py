"""Throughput of the image pipeline on this machine (images/s), training views and test transform.

    python benchmarks/pipeline.py

- in memory, CIFAR-size (32×32 uint8): the `code` (authors' CIFAR policy) and `paper` (SimCLR-like)
  training views cut straight at the backbone's 224 (one resampling, then the colour operations at
  224 as the authors' order has them) and normalised; and the test transform alone;
- file-backed, CUB-size JPEGs (500×375): decoding by parallel threads to the 256 step, then whole
  images decoded into a canvas and the fine-grained view policy at 224.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from bench.features.augment import get_policy
from bench.data.preprocess import prepare, to_tensor
from bench.data.files import decode
from bench.data.decode import decode_canvas

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)


def rate(fn, n: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    cifar = rng.integers(0, 256, (512, 32, 32, 3), dtype=np.uint8)
    for preset in ("code", "paper"):
        policy = get_policy("cifar", preset, size=224)  # views cut straight at the backbone's 224
        r = rate(lambda: prepare(policy(to_tensor(cifar), gen), input_size=224, channels=3, mean=MEAN, std=STD),  # noqa: B023
                 512)  # (timed within this iteration)
        print(f"  CIFAR 32px train view at 224 ({preset} policy): {r:8.0f} img/s")
    r = rate(lambda: prepare(to_tensor(cifar), input_size=224, channels=3, mean=MEAN, std=STD), 512)
    print(f"  CIFAR 32px test transform (resize 256, crop 224): {r:8.0f} img/s")
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(128):
            path = Path(tmp) / f"{i}.jpg"
            Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)).save(path, quality=90)
            paths.append(path)
        r = rate(lambda: decode(paths), len(paths))
        print(f"  CUB-size JPEG decode to the 256 step (threads): {r:8.0f} img/s")
        policy = get_policy("finegrained", "code", size=224)
        r = rate(lambda: prepare(policy(decode_canvas(paths), gen), input_size=224, channels=3, mean=MEAN,
                                 std=STD), len(paths))
        print(f"  CUB-size whole-image decode + train view at 224: {r:8.0f} img/s")


if __name__ == "__main__":
    main()

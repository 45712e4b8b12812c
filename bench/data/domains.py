"""A dataset as a domain-shifted stream sees it (`setting.domains`, `bench.splits.domains`): every image in every
domain the stream names.

`shifted` returns the dataset with its training and test images once per distinct domain of the stream, in the
order the stages first bring them, and in `extra["stream"]` which domain each image is in (`train`, `test`: indices
into `names`) and which image of the dataset it shows (`source`, so that a draw can keep a labelled picture out of
the other stages in any domain). A clean domain is the images as they are; a corruption domain is them through the
corruption, applied once per image with numpy's generator seeded from the domain and the image's position
(`corrupted`), and cached beside the feature banks (`<cache>/corruptions/`), so a later run, or an epoch, never draws
it again. A dataset's own domains (DomainNet) are its images of that domain, shown once.

Corruptions come from `imagecorruptions` (the ImageNet-C family's functions; the maintained fork
`imagecorruptions-imaug` on PyPI, `pip install 'bench[domains]'`). They need images of at least 32 pixels a side.
File-backed images (CUB, DomainNet) are corrupted as `ImageSet.load` decodes them (256 pixels, the centre square) and
kept in memory thereafter; their clean copies in a corruption stream are decoded the same way.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bench.core.storage import write_atomic
from bench.data.base import ImageSet, LoadedDataset
from bench.errors import BenchError
from bench.splits.domains import Domain, distinct

Log = Callable[[str], None]
CACHE_FORMAT = 1


def corrupt_function() -> Callable[..., np.ndarray]:
    """imagecorruptions' `corrupt`, or a `BenchError` that says how to install it."""
    try:
        from imagecorruptions import corrupt
    except ImportError as err:  # an optional dependency: only corruption streams need it
        raise BenchError(f"corruption domains need the imagecorruptions package ({err}): pip install "
                         f"'bench[domains]' (imagecorruptions-imaug)") from None
    return corrupt


def corrupted(images: np.ndarray, domain: Domain, salt: int = 0) -> np.ndarray:
    """uint8 N×H×W×C `images` through `domain`'s corruption: image i with numpy's generators seeded
    [salt, corruption, severity, i] (its functions draw from the global generator; glass blur and impulse noise take
    a seed of their own), so the same image in the same domain is the same picture in every run."""
    if domain.kind != "corruption":
        return images
    if min(images.shape[1:3]) < 32:
        raise BenchError(f"corruption {domain}: the ImageNet-C functions need images of at least 32 pixels a side; "
                         f"these are {images.shape[1]}x{images.shape[2]}")
    corrupt = corrupt_function()
    from bench.splits.domains import CORRUPTIONS

    out = np.empty_like(images)
    kind = CORRUPTIONS.index(domain.name)
    state = np.random.get_state()
    try:
        for i, image in enumerate(images):
            seed = int(np.random.SeedSequence([salt, kind, domain.severity, i]).generate_state(1)[0])
            np.random.seed(seed)
            own = {"seed": seed} if domain.name in ("glass_blur", "impulse_noise") else {}
            out[i] = np.clip(np.asarray(corrupt(image, severity=domain.severity, corruption_name=domain.name, **own)),
                             0, 255).astype(np.uint8)
    finally:
        np.random.set_state(state)  # the run's own draws go on as if nothing had been corrupted
    return out


def _cached(images: ImageSet, domain: Domain, key: dict[str, Any], cache: Path, log: Log) -> ImageSet:
    """`images` in `domain`, from the cache or corrupted now and cached."""
    if domain.kind != "corruption":
        return images
    digest = hashlib.sha256(json.dumps({"format": CACHE_FORMAT, **key, "domain": str(domain)}, sort_keys=True,
                                       default=str).encode()).hexdigest()[:20]
    path = cache / "corruptions" / f"{digest}.npy"
    if path.exists():
        pixels = np.load(path, mmap_mode="r", allow_pickle=False)
        if len(pixels) == len(images):
            return ImageSet(pixels, images.labels)
    log(f"corrupting {len(images)} {key['part']} images with {domain} (cached in {path.parent})")
    pixels = corrupted(np.asarray(images.load(np.arange(len(images)))), domain)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")  # two runs may corrupt the same images at once: each its own
    np.save(tmp, pixels, allow_pickle=False)
    tmp.replace(path)
    write_atomic(path.with_suffix(".json"), json.dumps({**key, "domain": str(domain)}, default=str))
    return ImageSet(pixels, images.labels)


def _stack(parts: Sequence[ImageSet]) -> ImageSet:
    """The domains' copies one after another. File-backed clean images beside corrupted ones are decoded as the
    corrupted ones were (`ImageSet.load`: 256 pixels, the centre square), so that every domain shows the same crop."""
    labels = np.concatenate([p.labels for p in parts])
    if any(p.in_memory for p in parts):
        pixels = [np.asarray(p.images) if p.in_memory else p.load(np.arange(len(p))) for p in parts]
        return ImageSet(np.concatenate(pixels), labels)
    return ImageSet([f for p in parts for f in p.images], labels)


def shifted(data: LoadedDataset, stream: Sequence[Domain], cache: Path, identity: dict[str, Any],
            log: Log) -> LoadedDataset:
    """`data` with every image in every distinct domain of `stream` (module docstring). `identity` names the dataset's
    content (what the feature bank's key names: dataset, options, root, sizes) for the corruption cache."""
    domains = distinct(stream)
    names = [str(d) for d in domains]
    if domains[0].kind == "dataset":
        held = list(data.extra.get("domains", []))
        missing = [n for n in names if n not in held]
        if missing:
            raise BenchError(f"setting.domains names {', '.join(missing)}, which the dataset as read does not hold "
                             f"(dataset.domains gives {', '.join(held) or 'none'}): read them too")
        where = {n: held.index(n) for n in names}
        of = data.extra["domain"]
        parts: dict[str, tuple[ImageSet, np.ndarray, np.ndarray]] = {}
        for part in ("train", "test"):
            images: ImageSet = getattr(data, part)
            domain_of = np.asarray(of[part])
            keep = np.flatnonzero(np.isin(domain_of, [where[n] for n in names]))
            mapped = np.asarray([names.index(held[d]) for d in domain_of[keep]], dtype=np.int64)
            parts[part] = (images.subset(keep), mapped, np.arange(len(keep)))
        if data.val is not None:
            raise BenchError("a dataset-domain stream on a dataset with a val partition: not supported")
    else:
        parts = {}
        for part in ("train", "test"):
            images = getattr(data, part)
            copies = [_cached(images, d, {**identity, "part": part}, cache, log) for d in domains]
            parts[part] = (_stack(copies), np.repeat(np.arange(len(domains)), len(images)),
                           np.tile(np.arange(len(images)), len(domains)))
        if data.val is not None:
            raise BenchError("a corruption stream on a dataset with a val partition: the mixed setting trains on the "
                             "whole training set (setting.whole_train=True) with it")
    extra = {**data.extra, "stream": {"names": names, "train": parts["train"][1], "test": parts["test"][1],
                                      "source": parts["train"][2]}}
    log(f"domain-shifted stream {' > '.join(str(d) for d in stream)}: {len(parts['train'][0])} training and "
        f"{len(parts['test'][0])} test images over {len(names)} domain(s)")
    return replace(data, train=parts["train"][0], test=parts["test"][0], extra=extra)

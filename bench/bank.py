"""The feature bank: frozen-backbone features computed once per key and shared by every run.

A bank holds, for one (dataset, backbone and its weights, preprocessing and augmentation policy,
number of views V, bank seed), the plain features of the train, val and test images and V augmented
views of every training image, in fp16, under `<cache>/banks/<key>/`. Every method, seed and run
that asks for the same key reads the same files.

Concurrency: the builder holds an exclusive `fcntl` lock on `<key>.lock`; other jobs asking for the
same key block on that lock and then load what it built. The bank's files are written to a
temporary directory and renamed into place only when complete, so a crash mid-build leaves no
bank that looks complete (the stale temporary directory is removed by the next builder).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from bench.errors import BenchError

if TYPE_CHECKING:
    import torch

BANK_FILE, META_FILE = "bank.pt", "meta.json"


def default_cache_dir(results: Path) -> Path:
    """`$BENCH_CACHE_DIR`, else `<results>/cache`: beside the results, on the filesystem the jobs share."""
    return Path(os.environ.get("BENCH_CACHE_DIR") or Path(results) / "cache")


def bank_key(fields: Mapping[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def weights_identity(pretrained: Any) -> Any:
    """A local weights file is identified by its path, size and modification time, so replacing
    the file invalidates the banks built from it."""
    if isinstance(pretrained, str) and Path(pretrained).expanduser().is_file():
        stat = Path(pretrained).expanduser().stat()
        return {"file": str(Path(pretrained).expanduser().resolve()), "size": stat.st_size, "mtime": int(stat.st_mtime)}
    return pretrained


@dataclass
class BankInfo:
    key: str
    path: Path
    size_bytes: int
    fields: dict[str, Any]
    created: float
    last_used: float
    kind: str = "feature bank"


def _read_meta(path: Path) -> dict[str, Any]:
    return json.loads((path / META_FILE).read_text())


def load_or_build(cache: Path, fields: Mapping[str, Any], build: Callable[[], dict[str, torch.Tensor]],
                  log: Callable[[str], None] = lambda message: None) -> dict[str, torch.Tensor]:
    """The bank for `fields`, building it with `build()` (tensors are stored as fp16) if absent."""
    def write(tmp: Path) -> dict[str, Any]:
        import torch  # here: listing and removing banks (`bench cache`) imports no torch

        tensors = {name: t.to(torch.float16).contiguous() for name, t in build().items()}
        torch.save(tensors, tmp / BANK_FILE)
        return {name: list(t.shape) for name, t in tensors.items()}

    return _load(build_once(cache, fields, write, log, "feature bank"), log)


def build_once(cache: Path, fields: Mapping[str, Any], write: Callable[[Path], dict[str, Any]],
               log: Callable[[str], None], kind: str) -> Path:
    """The directory of the bank for `fields`, which `write(tmp)` fills (returning its arrays' shapes)
    if it is absent: one builder per key at a time (`flock`), the others wait and then read what it
    built; written to a temporary directory and renamed into place with its `meta.json` last, so a
    crash mid-build never leaves a bank that looks complete."""
    key = bank_key(fields)
    root = Path(cache) / "banks"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BenchError(f"feature cache {cache} is not writable ({err.strerror}); set BENCH_CACHE_DIR "
                         f"or --cfg-options features.cache_dir=DIR") from None
    final = root / key
    if not (final / META_FILE).exists():
        with (root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent builder of the same key: wait for it
            if not (final / META_FILE).exists():
                tmp = root / f".{key}.building"
                shutil.rmtree(tmp, ignore_errors=True)  # left by a builder that crashed
                tmp.mkdir()
                start = time.monotonic()
                shapes = write(tmp)
                now = time.time()
                meta = {"key": key, "kind": kind, "fields": dict(fields), "created": now, "last_used": now,
                        "shapes": shapes, "build_seconds": round(time.monotonic() - start, 3)}
                (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
                tmp.rename(final)
                log(f"{kind} {key} built in {meta['build_seconds']:.1f}s")
    return final


def touch(path: Path) -> None:
    """Record that a bank was used now (`bench cache list` shows it); a read-only cache still serves."""
    try:
        meta = _read_meta(path)
        meta["last_used"] = time.time()
        tmp = path / f".{META_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        tmp.replace(path / META_FILE)
    except OSError:
        pass


def _load(path: Path, log: Callable[[str], None]) -> dict[str, torch.Tensor]:
    import torch

    tensors = torch.load(path / BANK_FILE, weights_only=True)
    touch(path)
    log(f"feature bank {path.name} loaded")
    return tensors


def list_banks(cache: Path) -> list[BankInfo]:
    banks = []
    for path in sorted((Path(cache) / "banks").glob("*")):
        if path.is_dir() and not path.name.startswith(".") and (path / META_FILE).exists():
            meta = _read_meta(path)
            size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            banks.append(BankInfo(path.name, path, size, meta["fields"], meta["created"], meta["last_used"],
                                  meta.get("kind", "feature bank")))
    return banks


def remove_banks(cache: Path, keys: list[str] | None = None) -> list[str]:
    """Remove the named banks (all when `keys` is None); returns the removed keys."""
    present = {b.key: b for b in list_banks(cache)}
    wanted = list(present) if keys is None else keys
    missing = [k for k in wanted if k not in present]
    if missing:
        raise BenchError(f"no feature bank {missing[0]!r} in {cache}; present: {', '.join(sorted(present)) or 'none'}")
    for key in wanted:
        shutil.rmtree(present[key].path)
        (Path(cache) / "banks" / f"{key}.lock").unlink(missing_ok=True)
    return wanted

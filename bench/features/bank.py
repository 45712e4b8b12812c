"""The feature bank: frozen-backbone features computed once per key and shared by every run.

A bank holds, for one (dataset, backbone and its weights, preprocessing and augmentation policy,
number of views V, bank seed), the plain features of the train, val and test images and V augmented
views of every training image, in fp16, under `<cache>/banks/<key>/`. Every method, seed and run
that asks for the same key reads the same files.

Concurrency: the builder holds an exclusive `fcntl` lock on `<key>.lock`; other jobs asking for the
same key block on that lock and then load what it built. The bank's files are written to a
temporary directory and renamed into place only when complete, so a crash mid-build leaves no
bank that looks complete (the stale temporary directory is removed by the next builder).

Integrity: a bank's `meta.json` records what the bank must contain: every file's name and size,
and a CRC-32 (`zlib.crc32`) of each fixed-size chunk (`CHUNK_BYTES`, 64 MiB) of it. Opening a bank
always checks that `meta.json` reads as this key's meta and that every file is there with its
recorded size (a `stat` per file: free whatever the bank's size). The chunk checksums are verified:
- for a feature bank (0.07 to 1.3 GiB; `torch.load` reads all of it anyway) on every open;
- for a token bank of at most `VERIFY_AT_OPEN_BYTES` (2 GiB) once per process when it is opened;
- for a larger token bank (up to 130 GiB: hashing it all would cost minutes on every open) chunk by
  chunk, the first time a read touches a chunk in this process (`bench.features.token_bank`), so the first
  epoch reads whole chunks and later reads cost nothing.
A damaged bank found when it is opened (garbage or missing `meta.json`, a missing or truncated file,
a chunk whose checksum differs, an array whose shape is not the recorded one) is named in one line
of the run's log, moved aside to `<key>.damaged-<time>` (kept for inspection, never deleted), and
rebuilt; the run goes on. A chunk of a large token bank found damaged mid-run fails the run with one
line instead (its values never reach the method), after moving the bank aside: the next `bench run`
rebuilds it and resumes the run. Measured: `zlib.crc32` hashes 0.69 GiB/s from the page cache on the 2-core development machine,
so 1.9 s for a 1.3 GiB feature bank, 3 s for a 2 GiB token bank, over 3 minutes for 130 GiB. CRC-32 is
there to catch bit rot, truncation and interrupted
copies, not tampering. Banks built before these checksums existed (no `files` in their meta) still
load, checked by their files' presence and their arrays' recorded shapes only.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar

from bench.errors import BenchError, disk_full, first_line

if TYPE_CHECKING:
    import torch

BANK_FILE, META_FILE = "bank.pt", "meta.json"
CHUNK_BYTES = 64 * 2**20  # one CRC-32 per 64 MiB: 2,080 numbers in the meta of a 130 GiB token bank
VERIFY_AT_OPEN_BYTES = 2 * 2**30  # token banks up to this size are verified whole when opened
DAMAGED = ".damaged-"  # `<key>.damaged-<time>`: a damaged bank, moved aside
T = TypeVar("T")


class DamagedBank(BenchError):
    """A bank whose files are not what its `meta.json` records."""


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
    status: str = "ok"


def _read_meta(path: Path) -> dict[str, Any]:
    return json.loads((path / META_FILE).read_text())


def chunk_crcs(path: Path, chunk_bytes: int) -> list[int]:
    """The CRC-32 of every `chunk_bytes` chunk of a file, in order."""
    crcs = []
    with path.open("rb") as fh:
        while block := fh.read(chunk_bytes):
            crcs.append(zlib.crc32(block))
    return crcs


def file_records(directory: Path) -> dict[str, dict[str, Any]]:
    """What `meta.json` records of a bank's files: size, chunk size and the chunks' CRC-32s."""
    return {f.name: {"size": f.stat().st_size, "chunk_bytes": CHUNK_BYTES, "crc32": chunk_crcs(f, CHUNK_BYTES)}
            for f in sorted(directory.iterdir()) if f.is_file() and f.name != META_FILE}


def bad_chunk(path: Path, record: Mapping[str, Any], chunks: Iterable[int]) -> int | None:
    """The first of `chunks` of the file whose CRC-32 is not the one recorded, or None."""
    size = record["chunk_bytes"]
    with path.open("rb") as fh:
        for i in chunks:
            fh.seek(i * size)
            if zlib.crc32(fh.read(size)) != record["crc32"][i]:
                return i
    return None


def chunk_span(record: Mapping[str, Any], chunk: int) -> str:
    start = chunk * record["chunk_bytes"]
    return f"bytes {start}-{min(start + record['chunk_bytes'], record['size']) - 1}"


_VERIFIED: set[tuple[Any, ...]] = set()  # banks whose every chunk this process has verified (and their files' stat)


def _stat_key(path: Path, files: Mapping[str, Any]) -> tuple[Any, ...]:
    stats = [(path / name).stat() for name in sorted(files)]
    return (str(path), *((s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in stats))


def problem(path: Path, verify_limit: float = 0, once: bool = False) -> str | None:
    """Why the bank directory `path` cannot be used (in a few words), or None. Always: its meta is
    this key's and every recorded file is there with its size; every chunk's CRC-32 too when the
    bank holds at most `verify_limit` bytes (`once`: only the first time in this process, for files
    whose stat has not changed since)."""
    try:
        meta = _read_meta(path)
    except FileNotFoundError:
        return f"no {META_FILE}: an interrupted build or copy"
    except (OSError, ValueError) as err:
        return f"{META_FILE} unreadable ({first_line(err)})"
    if not isinstance(meta, dict) or meta.get("key") != path.name or not isinstance(meta.get("fields"), dict):
        return f"{META_FILE} does not describe bank {path.name}"
    files = meta.get("files")
    if files is None:  # built before checksums were recorded: the loader checks the arrays' shapes
        return None
    try:
        for name, record in files.items():
            size = (path / name).stat().st_size if (path / name).is_file() else None
            if size is None:
                return f"{name} is missing"
            if size != record["size"]:
                return f"{name} has {size} bytes, {record['size']} recorded (truncated or overwritten)"
        if sum(r["size"] for r in files.values()) > verify_limit:
            return None
        key = _stat_key(path, files)
        if once and key in _VERIFIED:
            return None
        for name, record in files.items():
            bad = bad_chunk(path / name, record, range(len(record["crc32"])))
            if bad is not None:
                return f"{name} {chunk_span(record, bad)} do not match their checksum"
    except (KeyError, TypeError, AttributeError, IndexError):
        return f"{META_FILE} does not describe bank {path.name}"
    if once:
        _VERIFIED.add(key)
    return None


def _move_aside(path: Path) -> Path:
    aside = path.with_name(f"{path.name}{DAMAGED}{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}")
    path.rename(aside)
    return aside


def set_aside(path: Path, reason: str, kind: str, log: Callable[[str], None], seen: int | None = None) -> Path | None:
    """Move the damaged bank `path` to `<key>.damaged-<time>` (kept, never deleted) under the key's
    lock, unless another process already did (or rebuilt it: `seen`, the inode judged damaged, is
    gone). Returns where it went, or None."""
    with (path.parent / f"{path.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if seen is not None and path.stat().st_ino != seen:
                return None
            aside = _move_aside(path)
        except FileNotFoundError:
            return None
    log(f"{kind} {path.name} is damaged ({reason}): moved to {aside}; rebuilding it")
    return aside


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def load_or_build(cache: Path, fields: Mapping[str, Any], build: Callable[[], dict[str, torch.Tensor]],
                  log: Callable[[str], None] = lambda message: None) -> dict[str, torch.Tensor]:
    """The bank for `fields`, building it with `build()` (tensors are stored as fp16) if absent."""
    def write(tmp: Path) -> dict[str, Any]:
        import torch  # here: listing and removing banks (`bench cache`) imports no torch

        tensors = {name: t.to(torch.float16).contiguous() for name, t in build().items()}
        torch.save(tensors, tmp / BANK_FILE)
        return {name: list(t.shape) for name, t in tensors.items()}

    # the whole file is verified on every open: torch.load reads all of it anyway
    return open_bank(cache, fields, write, lambda path: _load(path, log), log, "feature bank", math.inf)


def open_bank(cache: Path, fields: Mapping[str, Any], write: Callable[[Path], dict[str, Any]],
              load: Callable[[Path], T], log: Callable[[str], None], kind: str, verify_limit: float,
              once: bool = False) -> T:
    """`load(path)` of the bank for `fields` (built by `build_once` if absent or damaged); a bank that
    `load` finds damaged (`DamagedBank`: unreadable, other shapes than recorded) is set aside and
    rebuilt once."""
    for attempt in range(2):
        path = build_once(cache, fields, write, log, kind, verify_limit, once)
        seen = _inode(path)
        try:
            return load(path)
        except DamagedBank as err:
            if attempt:
                raise DamagedBank(f"{kind} {path.name} was rebuilt and is still unreadable ({err}); "
                                  f"check the disk under {cache}") from None
            set_aside(path, str(err), kind, log, seen)
    raise AssertionError("unreachable")


def build_once(cache: Path, fields: Mapping[str, Any], write: Callable[[Path], dict[str, Any]],
               log: Callable[[str], None], kind: str, verify_limit: float = 0, once: bool = False) -> Path:
    """The directory of the bank for `fields`, which `write(tmp)` fills (returning its arrays' shapes)
    if it is absent: one builder per key at a time (`flock`), the others wait and then read what it
    built; written to a temporary directory and renamed into place with its `meta.json` last, so a
    crash mid-build never leaves a bank that looks complete. A bank there that fails `problem` (its
    checksums verified up to `verify_limit` bytes) is moved aside and built again."""
    key = bank_key(fields)
    root = Path(cache) / "banks"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BenchError(f"bank cache {cache} is not writable ({err.strerror}); choose another with --cache-dir DIR "
                         f"or BENCH_CACHE_DIR") from None
    final = root / key
    seen = _inode(final)
    why = problem(final, verify_limit, once) if seen is not None else None
    if why:
        set_aside(final, why, kind, log, seen)
    if not (final / META_FILE).exists():
        with (root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent builder of the same key: wait for it
            if not (final / META_FILE).exists():
                if final.exists():  # a folder without its meta (an interrupted copy) would block the rename
                    log(f"{kind} {key} is incomplete (no {META_FILE}): moved to {_move_aside(final)}; rebuilding it")
                _build(root, key, fields, write, log, kind)
    return final


def _build(root: Path, key: str, fields: Mapping[str, Any], write: Callable[[Path], dict[str, Any]],
           log: Callable[[str], None], kind: str) -> None:
    """Build the bank in `.<key>.building` and rename it to `<key>` (the caller holds the key's lock)."""
    tmp = root / f".{key}.building"
    shutil.rmtree(tmp, ignore_errors=True)  # left by a builder that crashed
    tmp.mkdir()
    start = time.monotonic()
    try:
        shapes = write(tmp)
        files = file_records(tmp)  # read back once: what every later open checks the bank against
        now = time.time()
        meta = {"key": key, "kind": kind, "fields": dict(fields), "created": now, "last_used": now,
                "shapes": shapes, "files": files, "build_seconds": round(time.monotonic() - start, 3)}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
    except Exception as err:  # a full disk, a failed extraction: free the space now (a killed build cannot)
        shutil.rmtree(tmp, ignore_errors=True)
        if disk_full(err):
            raise OSError(errno.ENOSPC, f"No space left on device building {kind} {key}", str(root)) from err
        raise
    tmp.rename(root / key)
    log(f"{kind} {key} built in {meta['build_seconds']:.1f}s")


def touch(path: Path) -> None:
    """Record that a bank was used now (`bench cache list` shows it); a read-only or full cache still serves."""
    tmp = path / f".{META_FILE}.{os.getpid()}"
    try:
        meta = _read_meta(path)
        meta["last_used"] = time.time()
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        tmp.replace(path / META_FILE)
    except OSError:  # a full disk or a read-only cache (shared banks): the bank still serves
        try:
            tmp.unlink(missing_ok=True)  # a full disk: no half-written meta left behind
        except OSError:  # read-only: nothing was written to remove
            pass


def _load(path: Path, log: Callable[[str], None]) -> dict[str, torch.Tensor]:
    import torch

    try:
        tensors = torch.load(path / BANK_FILE, weights_only=True)
    except Exception as err:  # torch raises many types for a damaged file
        raise DamagedBank(f"{BANK_FILE} unreadable ({first_line(err)})") from None
    _check_shapes(path, {name: list(t.shape) for name, t in tensors.items()})
    touch(path)
    log(f"feature bank {path.name} loaded")
    return tensors


def _check_shapes(path: Path, shapes: Mapping[str, list[int]]) -> None:
    """Raise `DamagedBank` unless the loaded arrays are those `meta.json` records."""
    recorded = _read_meta(path).get("shapes")
    if recorded is not None and dict(shapes) != recorded:
        raise DamagedBank(f"its arrays {dict(shapes)} are not the recorded {recorded}")


def _info(path: Path) -> BankInfo:
    """What `bench cache list` shows of a folder under `banks/`, damaged or not (no checksums read)."""
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    stat = path.stat()
    if path.name.endswith(".building"):
        status = "incomplete: being built, or a build that was killed"
    elif DAMAGED in path.name:
        status = "damaged, moved aside"
    else:
        status = f"damaged: {why}" if (why := problem(path)) else "ok"
    try:
        meta = _read_meta(path)
        return BankInfo(path.name, path, size, dict(meta["fields"]), float(meta["created"]), float(meta["last_used"]),
                        str(meta.get("kind", "feature bank")), status)
    except (OSError, ValueError, KeyError, TypeError):
        return BankInfo(path.name, path, size, {}, stat.st_mtime, stat.st_mtime, "?", status)


def list_banks(cache: Path) -> list[BankInfo]:
    """The complete banks under `cache` (see `list_folders` for every folder, damaged ones included)."""
    return [b for b in list_folders(cache) if b.status == "ok"]


def list_folders(cache: Path) -> list[BankInfo]:
    """Every folder under `<cache>/banks`: banks, damaged and incomplete ones, with their status."""
    return [_info(path) for path in sorted((Path(cache) / "banks").glob("*"))
            if path.is_dir() and (not path.name.startswith(".") or path.name.endswith(".building"))]


def remove_banks(cache: Path, keys: list[str] | None = None) -> list[str]:
    """Remove the named bank folders, damaged ones included (all when `keys` is None); returns the removed
    names. A folder being built (its key's lock held) is left alone."""
    present = {b.key: b for b in list_folders(cache)}
    wanted = list(present) if keys is None else keys
    missing = [k for k in wanted if k not in present]
    if missing:
        raise BenchError(f"no bank {missing[0]!r} in {cache}; present: {', '.join(sorted(present)) or 'none'}")
    removed = []
    for name in wanted:
        key = name.lstrip(".").split(".")[0]
        with (Path(cache) / "banks" / f"{key}.lock").open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # being built or read-checked by a run now
                if keys is not None:
                    raise BenchError(f"bank {name} is in use (a run holds its lock); try again when it ends") from None
                continue
            shutil.rmtree(present[name].path)
        if name == key:
            (Path(cache) / "banks" / f"{key}.lock").unlink(missing_ok=True)
        removed.append(name)
    return removed

"""`bench data fetch`: each dataset's files downloaded (resumed, verified), unpacked, read by its reader, and only
then moved into the data root.

Everything in flight lives in `<data root>/.bench-fetch/`: the part files a broken download resumes from,
the verified archives, and the folder a dataset is assembled in. No reader looks there, and the dataset's
folder appears in the data root by one rename once its reader has read it, so a fetch killed at any point
leaves no folder bench would take for the dataset; the same command then resumes. Archives are unpacked by
`bench.core.unpack`, which trusts none of their members: a link, a device, a name leading out, members that
clash or a bomb refuse the archive, which is deleted with what it unpacked.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import IO, Mapping, Sequence

from bench.core.download import (WORK_DIR, NoSpace, Progress, RemoteFile, check_pins, download, held, mirror_from,
                                 with_checksum)
from bench.core.sizes import size_text
from bench.core.unpack import UnsafeArchive, unpack
from bench.data.base import DatasetError
from bench.data.sources import DATASET_SOURCES, PAPER_DATASETS, DatasetSource
from bench.errors import BenchError, disk_full, unknown

GROUPS = {"paper": PAPER_DATASETS}  # names that stand for several datasets


def fetchable() -> list[str]:
    """The datasets `bench data fetch` knows the files of (those that need none are not listed)."""
    return list(DATASET_SOURCES)


def expand_names(names: Sequence[str]) -> list[str]:
    """The datasets named, the groups (`paper`) spelt out, each once, in the order given."""
    out: list[str] = []
    for name in names:
        for one in GROUPS.get(name, (name,)):
            if one not in out:
                out.append(one)
    return out


def _unpack(archive: Path, into: Path, stream: IO[str] | None) -> None:
    """Unpack a .tar(.gz) or .zip archive into `into`, drawing progress by the bytes of the archive read; every
    member checked before it is written (`bench.core.unpack`)."""
    progress = Progress(f"unpacking {archive.name}", archive.stat().st_size, stream)
    try:
        unpack(archive, into, progress)
    finally:
        progress.close()


def _reader(name: str, root: str) -> object:
    from bench.data import make_reader

    return make_reader(name, {}, root)


def _in_place(name: str, root: Path) -> Path | None:
    """Where the dataset already is under `root` (its reader finds every file it needs), or None."""
    try:
        return _reader(name, str(root)).check()  # type: ignore[attr-defined]
    except DatasetError:
        return None


def _read(name: str, root: Path) -> str:
    """`bench data summary`'s check: the reader reads the whole dataset; what it found, in words."""
    from bench.data import build_dataset

    data = build_dataset(name, {}, str(root))  # no partitions_dir: a held-out partition is drawn, not stored
    val = len(data.val) if data.val is not None else 0
    return (f"{data.num_classes} classes, {len(data.train) + val} train and {len(data.test)} test images")


def fetch_dataset(name: str, root: Path, mirror: str | None = None, checksums: Mapping[str, str] | None = None,
                  out: IO[str] | None = None, stream: IO[str] | None = None) -> bool:
    """Fetch dataset `name` into the data root `root`; True once it is there and its reader read it, False
    where its files must be fetched by hand first (what to do is printed, in one line)."""
    out = sys.stdout if out is None else out
    reader = _reader(name, str(root))  # an unknown name is an error listing the registered ones
    if not hasattr(reader, "check"):
        print(f"{name}: nothing to fetch (its data ships with bench's dependencies or is generated)", file=out)
        return True
    source = DATASET_SOURCES.get(name)
    if source is None:
        raise BenchError(f"dataset {name!r} has no known source to fetch it from; bench fetches: "
                         f"{', '.join(fetchable())}")
    mirror = mirror_from(mirror)
    found = _in_place(name, root)
    if found is not None:
        print(f"{name}: already at {found}; reading it ...", file=out, flush=True)
        print(f"{name}: ready: {_read(name, root)}", file=out)
        return True
    target = root / source.folder
    if target.exists():
        raise BenchError(f"{target} exists but is not a complete {name} dataset ({_missing(name, root)}); move it "
                         f"away and fetch again")
    files = [with_checksum(f, checksums or {}) for f in source.files]
    if not source.parts or (mirror is None and any(f.url is None for f in files)):
        print(f"{name}: to be fetched by hand: {source.by_hand}; bench reads it from {target}/ "
              f"(check: bench data summary {name} --data-root {root})", file=out)
        return False
    work = root / WORK_DIR
    try:
        with held(work, name):
            try:
                assembled = _assemble(name, source, files, work, mirror, out, stream)
                print(f"{name}: reading it as bench data summary does ...", file=out, flush=True)
                said = _read(name, assembled.parent)  # read where it was assembled: what bench cannot read stays out
                os.rename(assembled, target)  # one step: the dataset's folder appears whole or not at all
            finally:  # a failure leaves only the verified downloads, which the same command uses again
                shutil.rmtree(work / f"{name}.staging", ignore_errors=True)
            for file in files:
                (work / file.name.replace("/", "__")).unlink(missing_ok=True)
    finally:
        _remove_if_empty(work)
    print(f"{name}: ready at {target}: {said}", file=out)
    return True


def _missing(name: str, root: Path) -> str:
    try:
        _reader(name, str(root)).check()  # type: ignore[attr-defined]
    except DatasetError as err:
        return str(err).split(". Expected layout")[0]
    return "incomplete"


def _assemble(name: str, source: DatasetSource, files: list[RemoteFile], work: Path, mirror: str | None,
              out: IO[str], stream: IO[str] | None) -> Path:
    """Download every part and unpack it into `<work>/<name>.staging/`; the dataset's folder there."""
    staging = work / f"{name}.staging"
    shutil.rmtree(staging, ignore_errors=True)  # what a killed fetch half-unpacked
    print(f"{name}: fetching {', '.join(f.name for f in files)} into {work.parent}", file=out, flush=True)
    for part, file in zip(source.parts, files):
        try:
            path = download(file, work, mirror, out, stream)
        except NoSpace as err:
            raise BenchError(f"{err}; {_needs(name, files, work, (err.size,) if err.size else ())}") from None
        how = f"{file.checked_by} verified" if file.checked_by else "no checksum recorded"
        place = staging / part.into
        print(f"  {file.name}: {size_text(path.stat().st_size)}, {how}; "
              f"{'unpacking' if part.unpack else 'placing'} it", file=out, flush=True)
        try:
            if part.unpack:
                _unpack(path, place, stream)
            else:
                place.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, place / file.name)
        except UnsafeArchive as err:  # deleted, or the same command would unpack it again
            path.unlink()
            pinned = "the checksum --checksums gave" if file != part.file else "bench's recorded checksum"
            raise UnsafeArchive(f"{name}: {err}; deleted it and what it had unpacked (it matched {pinned}: pin only "
                                f"a checksum its publisher published or one of a file you trust)") from None
        except OSError as err:
            if not disk_full(err):
                raise
            raise BenchError(f"no space left on device unpacking {file.name} into {work}: removed what it had "
                             f"unpacked and kept the verified download(s) there, which the same command uses again; "
                             f"{_needs(name, files, work)}") from None
    folder = staging / source.folder
    if not folder.is_dir():
        raise DatasetError(f"{name}: the fetched files hold no {source.folder}/ folder (found: "
                           f"{', '.join(sorted(p.name for p in staging.iterdir())) or 'nothing'})")
    return folder


def _needs(name: str, files: list[RemoteFile], work: Path, more: tuple[int, ...] = ()) -> str:
    """What a dataset needs free, in words, from the sizes of its archives known: those downloaded, and `more`."""
    sizes = [*(path.stat().st_size for f in files if (path := work / f.name.replace("/", "__")).is_file()), *more]
    known = sum(sizes)
    unknown = len(sizes) < len(files)
    return (f"{name}'s archives take {size_text(known)}{' and more' if unknown else ''} and unpack to about as "
            f"much again: free {'more than ' if unknown else ''}{size_text(2 * known)} under {work.parent} and run "
            f"the same command again")


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # something else is in flight there


def fetch_datasets(names: Sequence[str], root: str | Path, mirror: str | None = None,
                   checksums: Mapping[str, str] | None = None, out: IO[str] | None = None,
                   stream: IO[str] | None = None) -> list[str]:
    """Fetch each named dataset (or group: `paper`) into `root`, in order; the names still to be fetched by
    hand (each said in one line). Unknown names are refused before anything is fetched."""
    from bench.registries import DATASETS
    from bench.data import reader_class

    wanted = expand_names(names)
    for name in wanted:
        if reader_class(name) is None:
            raise unknown("dataset", name, [*DATASETS.module_dict, *GROUPS])
    check_pins(checksums or {}, {f.name for name in wanted if name in DATASET_SOURCES
                                 for f in DATASET_SOURCES[name].files}, "datasets")
    root = Path(root).expanduser()
    if root.exists() and not root.is_dir():
        raise BenchError(f"the data root {root} is a file, not a folder: give --data-root (or $BENCH_DATA_ROOT) a "
                         f"folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        if disk_full(err):
            raise
        raise BenchError(f"cannot make the data root {root} ({err.strerror or err}): give --data-root (or "
                         f"$BENCH_DATA_ROOT) a folder you can write") from None
    return [name for name in wanted if not fetch_dataset(name, root.resolve(), mirror, checksums, out, stream)]

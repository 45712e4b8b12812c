"""Archives unpacked without trusting them (`bench data fetch`): every member is checked before its bytes are
written, and only plain folders and files are ever made.

tarfile's and zipfile's own extraction is not used. tarfile's `data` filter is missing before Python 3.11.4 (on
Debian 12's 3.11.2, `filter=` is a TypeError) and links whose resolved path exceeds PATH_MAX bypassed it
(CVE-2025-4517: 3.10.13, 3.11.7, 3.12.1 and 3.13.0 write outside the folder). Here a member is refused
(`UnsafeArchive`, naming it and why) unless:

- its name is relative: not empty, no leading `/`, no drive letter, no backslash, no `..` part;
- it is a regular file or a folder. Symbolic and hard links, devices, fifos and sparse files are refused: the
  datasets bench fetches hold none, and with no link ever made, no path written through can lead out;
- it does not clash with what is there: a file twice, a file and a folder of one name, a file where a folder's
  path passes. `open(..., 'xb')` and `mkdir` never overwrite, and a folder met again is checked (`lstat`) to be
  a real folder, not a link or a file;
- the members so far number at most `max_members` and hold at most `max_bytes` bytes, both as declared in the
  headers and as written. By default that is 20 times the archive's size plus 1 GiB, and 4 million members:
  a 40 GB Herbarium zip of JPEGs (about as large unpacked as packed, about a million files) passes, a bomb
  (a small archive declaring terabytes, or millions of empty members) does not.

Files get no permission bits from the archive (the user's umask decides, as for any new file): no setuid, no
read-only folder that cannot be cleaned up. A tar archive is read in one pass, as a stream (each member's header
comes before its bytes); a zip archive's members are all checked before the first is written. What a refused
archive wrote so far stays under `into`: unpack into a fresh folder, move it into place only when whole and
delete it otherwise, as `bench data fetch` does with its staging folder.

Imports the standard library, bench.errors and `bench.core.sizes` (itself standard library only): a script on a
bare interpreter imports it (tests/archive_attacks.py runs on every Python at hand).
"""
from __future__ import annotations

import errno
import os
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import IO, Protocol

from bench.core.sizes import size_text
from bench.errors import BenchError

CHUNK = 1 << 20
RATIO = 20  # the default bound on what an archive unpacks to: RATIO times its size plus FLOOR
FLOOR = 1 << 30
MAX_MEMBERS = 4_000_000

# what a refused tar member is, by its type
_TAR_KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a device",
              tarfile.BLKTYPE: "a device", tarfile.FIFOTYPE: "a fifo", tarfile.GNUTYPE_SPARSE: "a sparse file"}
_TAR_FILES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)
# what a refused zip member is, by the file type in its Unix mode (external_attr's high 16 bits)
_ZIP_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
              stat.S_IFIFO: "a fifo", stat.S_IFSOCK: "a socket"}


class UnsafeArchive(BenchError):
    """An archive member refused before its bytes were written: which member, and why."""


class Progress(Protocol):
    def update(self, done: int) -> None: ...


def default_max_bytes(archive_size: int) -> int:
    """What an archive of `archive_size` bytes may unpack to by default."""
    return RATIO * archive_size + FLOOR


def unpack(archive: Path, into: Path, progress: Progress | None = None, *, max_bytes: int | None = None,
           max_members: int = MAX_MEMBERS) -> int:
    """Unpack the .tar(.gz, .bz2, .xz) or .zip `archive` into the folder `into` (made if missing); the bytes
    written. `progress.update` is told how many bytes of the archive were read. A member that is not safe to
    write is `UnsafeArchive`; an archive that cannot be read is a `BenchError`."""
    archive, into = Path(archive), Path(into)
    size = archive.stat().st_size
    bound = (f"{RATIO} times its size plus {size_text(FLOOR)}: an archive bomb" if max_bytes is None else
             "an archive bomb")
    writer = _Writer(archive, into, default_max_bytes(size) if max_bytes is None else max_bytes, max_members, bound)
    try:
        if zipfile.is_zipfile(archive):
            _unzip(archive, writer, progress)
        else:
            _untar(archive, writer, progress)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError) as err:
        raise BenchError(f"cannot unpack {archive}: {type(err).__name__}: {err}") from None
    return writer.written


def _untar(archive: Path, writer: _Writer, progress: Progress | None) -> None:
    with archive.open("rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
        for member in tar:  # one pass over a multi-GB archive: each member checked, then written
            parts = writer.parts(member.name)
            writer.count(member.name, member.size if member.isfile() else 0)
            if member.isdir():
                writer.folder(member.name, parts)
            elif member.type in _TAR_FILES and not member.issparse():
                source = tar.extractfile(member)
                assert source is not None  # a regular member always has a file object
                writer.file(member.name, parts, member.size, source)
            else:
                kind = _TAR_KINDS.get(member.type, f"of tar type {member.type!r}")
                to = f" to {_short(member.linkname)!r}" if member.issym() or member.islnk() else ""
                raise writer.refused(member.name, f"is {kind}{to}; bench unpacks only files and folders")
            if progress is not None:
                progress.update(raw.tell())


def _unzip(archive: Path, writer: _Writer, progress: Progress | None) -> None:
    with zipfile.ZipFile(archive) as zf:
        plan, seen = [], set()
        for info in zf.infolist():  # the central directory: every member checked before anything is written
            parts = writer.parts(info.filename)
            kind = _ZIP_KINDS.get(stat.S_IFMT(info.external_attr >> 16))
            if kind is not None:
                raise writer.refused(info.filename, f"is {kind}; bench unpacks only files and folders")
            if info.flag_bits & 0x1:
                raise writer.refused(info.filename, "is encrypted")
            folder = info.is_dir() or stat.S_ISDIR(info.external_attr >> 16)
            key = "/".join(parts)
            if not folder and key in seen:
                raise writer.refused(info.filename, "comes twice in the archive (or clashes with a folder)")
            seen.add(key)
            writer.count(info.filename, 0 if folder else info.file_size)
            plan.append((info, parts, folder))
        done = 0
        for info, parts, folder in plan:
            if folder:
                writer.folder(info.filename, parts)
            else:
                with zf.open(info) as source:
                    writer.file(info.filename, parts, info.file_size, source)
            done += info.compress_size
            if progress is not None:
                progress.update(done)


def _short(text: str, keep: int = 40) -> str:
    """A name short enough for a one-line message (a PATH_MAX chain's names run to kilobytes)."""
    return text if len(text) <= 2 * keep else f"{text[:keep]}…{text[-keep:]}"


class _Writer:
    """Makes the folders and files of one archive under `root`, after checking each member, and counts them."""

    def __init__(self, archive: Path, root: Path, max_bytes: int, max_members: int, bound: str) -> None:
        self.archive, self.root, self.max_bytes, self.max_members = archive, root, max_bytes, max_members
        self.bound = bound  # why max_bytes, in words
        self.members = self.declared = self.written = 0
        root.mkdir(parents=True, exist_ok=True)
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            raise BenchError(f"cannot unpack {archive.name} into {root}: it is a link, not a folder")
        self.folders = {""}  # folders under root made, or checked to be real folders (not links): each lstat once

    def refused(self, name: str, why: str) -> UnsafeArchive:
        return UnsafeArchive(f"refused to unpack {self.archive.name}: its member {_short(name)!r} {why}")

    def parts(self, name: str) -> tuple[str, ...]:
        """The member's path under the root, as its parts; refused where it could lead anywhere else."""
        if not name or "\x00" in name:
            raise self.refused(name, "has no name")
        if name.startswith("/"):
            raise self.refused(name, "has an absolute name; only names relative to the archive's folder are unpacked")
        if "\\" in name or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
            raise self.refused(name, "has a backslash or a drive letter in its name (a Windows path)")
        parts = tuple(p for p in name.split("/") if p not in ("", "."))  # `./` alone: the root itself
        if ".." in parts:
            raise self.refused(name, "has a `..` part in its name, which leads out of the folder it is unpacked in")
        return parts

    def count(self, name: str, size: int) -> None:
        """One more member of `size` bytes (as declared): refused once the bounds are passed."""
        self.members += 1
        self.declared += size
        if self.members > self.max_members:
            raise self.refused(name, f"is beyond the {self.max_members} members an archive may hold here "
                                     f"(an archive bomb, or not a dataset's archive)")
        if self.declared > self.max_bytes:
            raise self.refused(name, f"takes what the members declare past {size_text(self.max_bytes)}, the most "
                                     f"this {size_text(self.archive.stat().st_size)} archive may unpack to "
                                     f"({self.bound})")

    def folder(self, name: str, parts: tuple[str, ...]) -> Path:
        """The folder `root/parts`, made (with its parents) where missing; refused where a file or link is there."""
        key = "/".join(parts)
        for i in range(1, len(parts) + 1) if key not in self.folders else ():
            below = "/".join(parts[:i])
            if below in self.folders:
                continue
            path = self.root / below
            try:
                os.mkdir(path)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    what = "a link" if os.path.islink(path) else "a file"
                    raise self.refused(name, f"needs a folder {below!r} where there is {what} (members that "
                                             f"clash)") from None
            except OSError as err:
                raise self._os_error(name, err) from None
            self.folders.add(below)
        return self.root / key if key else self.root

    def file(self, name: str, parts: tuple[str, ...], size: int, source: IO[bytes]) -> None:
        """The file `root/parts`, new (never one there before), with `size` bytes read from `source`."""
        if not parts:
            raise self.refused(name, "is a file with no name")
        path = self.folder(name, parts[:-1]) / parts[-1]
        try:
            out = open(path, "xb")
        except FileExistsError:
            what = "a folder" if stat.S_ISDIR(os.lstat(path).st_mode) else "a file"
            raise self.refused(name, f"is a file where there is {what} of that name already (members that "
                                     f"clash)") from None
        except OSError as err:
            raise self._os_error(name, err) from None
        with out:
            left = size
            for block in iter(lambda: source.read(CHUNK), b""):
                left -= len(block)
                self.written += len(block)
                if left < 0 or self.written > self.max_bytes:
                    raise self.refused(name, f"holds more bytes than declared, or past {size_text(self.max_bytes)} "
                                             f"in all (an archive bomb)")
                out.write(block)

    def _os_error(self, name: str, err: OSError) -> OSError | UnsafeArchive:
        if err.errno == errno.ENAMETOOLONG:
            return self.refused(name, "has a name too long for the file system")
        if err.errno == errno.ENOTDIR:
            return self.refused(name, "lies under a file of the archive (members that clash)")
        return err  # a full disk, a read-only folder: the caller says what to do

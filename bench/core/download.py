"""Files fetched from their publisher (or a mirror) and kept only once whole and verified.

A download goes to `<name>.part` in a working folder, resumes from what that file holds (an HTTP Range
request; a server that ignores it sends the whole file again), and is renamed to `<name>` only after its
checksum matched. A file whose checksum does not match is deleted, and so is the part file of a download that
filled the disk (resuming it would only fill it again). Progress (bytes, rate, time left) is
drawn on a terminal and nothing is drawn in a log. Only the standard library speaks HTTP here (urllib).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Iterator, Mapping

from bench.core.resources import VERSION
from bench.core.sizes import size_text
from bench.errors import BenchError, ascii_digits, disk_full

MIRROR_ENV = "BENCH_MIRROR"
# beside what is fetched (on its file system, so that the final rename is atomic); no reader looks in it
WORK_DIR = ".bench-fetch"
CHUNK = 1 << 20
ATTEMPTS = 5  # a connection that breaks is resumed this many times before the command gives up
TIMEOUT_S = 60.0  # a server silent this long counts as a broken connection


@dataclass(frozen=True)
class RemoteFile:
    """A file as its publisher serves it. `name` is its file name, which is also its path under a mirror.
    `url` is None where no anonymous client can download it (a licence to accept, a login, a site gone):
    then only a mirror serves it. `sha256` may be a prefix (torch hub's file names carry 8 hex digits)."""

    name: str
    url: str | None
    sha256: str | None = None
    md5: str | None = None

    @property
    def checked_by(self) -> str:
        if self.sha256:
            return "sha256" if len(self.sha256) == 64 else "sha256 prefix"
        return "md5" if self.md5 else ""


def mirror_from(option: str | None) -> str | None:
    """The mirror to fetch from: the option, else $BENCH_MIRROR, else none (the publishers' URLs)."""
    return option or os.environ.get(MIRROR_ENV) or None


def source_url(file: RemoteFile, mirror: str | None) -> str:
    """Where `file` is fetched from: `<mirror>/<file name>` (a URL, or a local folder), else its publisher's URL."""
    if mirror:
        base = mirror if "://" in mirror else Path(mirror).expanduser().resolve().as_uri()
        return base.rstrip("/") + "/" + urllib.parse.quote(file.name)
    if file.url is None:
        raise BenchError(f"{file.name} has no public URL; give --mirror URL|DIR (or ${MIRROR_ENV}) serving it")
    return file.url


def read_checksums(path: str | Path) -> dict[str, str]:
    """`--checksums FILE`: lines `<hex digest>  <file name>` (sha256sum's or md5sum's output), as {name: digest}."""
    table: dict[str, str] = {}
    try:
        lines = Path(path).expanduser().read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise BenchError(f"cannot read the checksums file {path}: {err}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        digest, _, name = line.strip().partition(" ")
        name = name.strip().lstrip("*")  # sha256sum marks binary mode with '*'
        if len(digest) not in (32, 64) or not name or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise BenchError(f"{path}, line {number}: expected `<sha256 or md5 hex digest>  <file name>`, got {line!r}")
        table[name] = digest.lower()
    return table


def check_pins(checksums: Mapping[str, str], used: set[str], what: str) -> None:
    """`--checksums` lines that name no file of what is fetched (`used`): an error where none names one (a typo
    pins nothing, silently), else one warning line naming them."""
    extra = sorted(set(checksums) - used)
    if not extra:
        return
    listed = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
    if len(extra) == len(checksums):
        raise BenchError(f"no line of --checksums names a file of the {what} fetched ({listed}); they are "
                         f"{', '.join(sorted(used)) or 'none'}")
    print(f"bench: warning: {len(extra)} line(s) of --checksums name no file of the {what} fetched, unused: {listed}",
          file=sys.stderr)


def with_checksum(file: RemoteFile, checksums: Mapping[str, str]) -> RemoteFile:
    """`file` checked against the digest `checksums` gives for its name (in place of the recorded ones), if any."""
    digest = checksums.get(file.name)
    if digest is None:
        return file
    return replace(file, sha256=digest, md5=None) if len(digest) == 64 else replace(file, sha256=None, md5=digest)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """One line redrawn in place on a terminal: done / total, rate, time left. On anything else (a log, a
    pipe) it draws nothing: the callers say in one line what they start and what they finished."""

    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None, start: int = 0) -> None:
        self.label, self.total, self.done, self._first = label, total, start, start
        self.stream = sys.stderr if stream is None else stream
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self._began = self._drawn = time.monotonic()

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if self.on and now - self._drawn >= 0.2:
            self._drawn = now
            self.stream.write("\r" + self.line(now) + "\x1b[K")
            self.stream.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self._began, 1e-6)
        rate = (self.done - self._first) / elapsed
        text = f"{self.label}  {size_text(self.done)}"
        if self.total:
            text += f" of {size_text(self.total)} ({100 * self.done / self.total:.0f}%)"
        text += f"  {size_text(rate)}/s"
        if self.total and rate > 0:
            text += f"  {_clock(max(self.total - self.done, 0) / rate)} left"
        return text

    def close(self) -> None:
        if self.on:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def digests(path: Path, label: str, stream: IO[str] | None = None) -> tuple[str, str]:
    """The file's sha256 and md5, read once (a multi-GB archive takes seconds: progress is drawn)."""
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    progress = Progress(f"verifying {label}", path.stat().st_size, stream)
    done = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            sha256.update(block)
            md5.update(block)
            done += len(block)
            progress.update(done)
    progress.close()
    return sha256.hexdigest(), md5.hexdigest()


def mismatch(file: RemoteFile, path: Path, stream: IO[str] | None = None) -> str | None:
    """What differs between `path` and the checksum recorded for `file` (None: it matches, or none is recorded)."""
    if not file.checked_by:
        return None
    sha256, md5 = digests(path, file.name, stream)
    if file.sha256 and not sha256.startswith(file.sha256.lower()):
        return f"its sha256 is {sha256} where {file.sha256} was expected"
    if not file.sha256 and file.md5 and md5 != file.md5.lower():
        return f"its md5 is {md5} where {file.md5} was expected"
    return None


@contextlib.contextmanager
def held(folder: Path, key: str) -> Iterator[None]:
    """An exclusive lock on `key` in `folder`, refused at once where another fetch holds it (the two would
    write into the same part file)."""
    path = folder / f"{key}.lock"
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"{folder} is a file where bench keeps what it fetches in flight (a folder): move it away "
                         f"and fetch again")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fh = path.open("w")
    except OSError as err:
        if disk_full(err):
            raise
        raise BenchError(f"cannot write in {folder.parent} ({err.strerror or err}): fetching needs a folder you can "
                         f"write; give another one") from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchError(f"another fetch is fetching {key} into {folder.parent} now; wait for it to end") from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # by its holder, still holding it: a later fetch makes its own


class NoSpace(BenchError):
    """The disk filled while a file was downloaded; its part file was removed. `size`: the whole file's, if known."""

    def __init__(self, message: str, size: int | None) -> None:
        super().__init__(message)
        self.size = size


class _Full(Exception):
    def __init__(self, total: int | None) -> None:
        self.total = total


def _network(err: BaseException, url: str) -> bool:
    """Whether `err` is the connection's (worth resuming) rather than the disk's or the request's."""
    if url.startswith("file:"):
        return False  # a local folder: a missing file stays missing
    if isinstance(err, urllib.error.HTTPError):
        return err.code >= 500
    return isinstance(err, (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError))


def _total(response: object, start: int) -> int | None:
    """The whole file's size from a response (Content-Range for a range, else Content-Length), if the server said."""
    headers = getattr(response, "headers", {})
    content_range = headers.get("Content-Range", "") if headers else ""
    total = content_range.rsplit("/", 1)[1].strip() if "/" in content_range else ""
    if ascii_digits(total):  # `²` is a digit to isdigit, not to int: a hostile header's
        return int(total)
    length = headers.get("Content-Length") if headers else None
    return start + int(length) if length and ascii_digits(length) else None


def _transfer(url: str, part: Path, label: str, stream: IO[str] | None) -> bool:
    """One request for what `part` lacks; True once the file is whole (or its size is unknown and the server
    ended), False where the connection ended early. Network errors propagate to the caller, which resumes."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": f"bench/{VERSION}", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # nothing left to send: the part file is whole, its checksum decides
            return True
        raise
    with response:
        if have and getattr(response, "status", None) != 206:
            have = 0  # the server (or a local folder) sends the whole file again
        total = _total(response, have)
        progress = Progress(label, total, stream, start=have)
        try:
            with part.open("r+b" if have else "wb") as out:
                out.seek(have)
                out.truncate()
                read = getattr(response, "read1", response.read)  # what has arrived: a kill loses little of it
                for block in iter(lambda: read(CHUNK), b""):
                    out.write(block)
                    have += len(block)
                    progress.update(have)
        except OSError as err:
            if disk_full(err):
                raise _Full(total) from err
            raise
        finally:
            progress.close()
    return total is None or have >= total


def download(file: RemoteFile, folder: Path, mirror: str | None = None, out: IO[str] | None = None,
             stream: IO[str] | None = None) -> Path:
    """`folder/<name>`: `file` whole and verified against its recorded checksum, downloaded (resumed where a
    part file is left) from `mirror` or its publisher. A mismatch deletes what was downloaded and is one line."""
    out = sys.stdout if out is None else out
    flat = file.name.replace("/", "__")  # a mirror path such as timm/<repo>/model.safetensors
    done, part = folder / flat, folder / f"{flat}.part"
    url = source_url(file, mirror)
    folder.mkdir(parents=True, exist_ok=True)
    if done.exists():  # downloaded by a fetch that ended before using it: used again if it still matches
        if mismatch(file, done, stream) is None:
            return done
        done.unlink()
    resumed = part.stat().st_size if part.exists() else 0
    print(f"  {file.name}: downloading from {url}" + (f", resuming after {size_text(resumed)}" if resumed else ""),
          file=out, flush=True)
    for attempt in range(ATTEMPTS):
        try:
            if _transfer(url, part, file.name, stream):
                break
            reason = "the connection ended early"
        except _Full as full:  # a part file kept on a full disk only fills it again: removed, and said
            part.unlink(missing_ok=True)
            size = f" ({size_text(full.total)})" if full.total else ""
            raise NoSpace(f"no space left on device downloading {file.name}{size} into {folder}: removed the "
                          f"partial download", full.total) from None
        except Exception as err:  # noqa: BLE001  (only the connection's errors are retried; see _network)
            if not _network(err, url):
                if isinstance(err, (urllib.error.URLError, ValueError)):
                    layout = f" (a mirror serves each file as <mirror>/{file.name})" if mirror else ""
                    raise BenchError(f"cannot download {file.name} from {url}: {err}{layout}") from None
                raise
            reason = f"{type(err).__name__}: {err}"
        if attempt == ATTEMPTS - 1:
            kept = part.stat().st_size if part.exists() else 0
            resume = f"; {size_text(kept)} kept in {part}: the same command resumes from there" if kept else ""
            raise BenchError(f"cannot download {file.name} from {url} ({reason}){resume}; --mirror URL|DIR (or "
                             f"${MIRROR_ENV}) fetches it from elsewhere")
        time.sleep(0.5 * attempt)  # the first retry at once, then a little later each time
    wrong = mismatch(file, part, stream)
    if wrong is not None:
        part.unlink()
        # "deleted it" read as the mirror's file: say whose copy went, that the source is untouched, and what to do
        raise BenchError(f"{file.name} from {url} is not the published file: {wrong}; the copy downloaded here was "
                         f"removed (the file at the source is untouched). Fetch it from another mirror (--mirror), or, "
                         f"where you trust this file, pin its checksum with --checksums FILE (lines `<sha256>  "
                         f"{file.name}`, as sha256sum prints them)")
    os.replace(part, done)
    return done

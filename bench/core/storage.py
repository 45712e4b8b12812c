"""Writing files so that nothing finished is ever half-written: atomic replacement and the one-line
checks that a directory can be written at all and that a path is one the file system can look up, before
anything runs. Light on purpose (no torch, no
mmengine): the catalogue and the light commands use it too."""
from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

from bench.errors import BenchError, disk_full


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary sibling of `path` for the block to write, renamed over `path` when it ends. If the
    block fails the temporary file is removed (a full disk leaves no half-written file behind and
    `path` as it was), and a full disk is raised as one `OSError` naming `path`. The temporary name
    holds the process id: two processes writing the same file (two reports, two jobs writing the same
    partition) never write into each other's."""
    tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    try:
        yield tmp
        tmp.replace(path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if disk_full(err) and not (isinstance(err, OSError) and err.filename == str(path)):
            raise OSError(errno.ENOSPC, "No space left on device", str(path)) from err
        raise


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write to a temporary sibling and rename, so readers never see a half-written file."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def unwritable(directory: Path) -> OSError | None:
    """Why `directory` (created if missing) cannot take a new file, or None when it can."""
    probe = Path(directory) / f".write-test-{os.getpid()}"
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        probe.write_text("")
    except OSError as err:
        return err
    finally:
        try:
            probe.unlink(missing_ok=True)  # also when creating it succeeded and writing failed
        except OSError:  # not a directory, read-only: there is nothing to remove
            pass
    return None


def usable_path(path: Path, option: str) -> Path:
    """`path`, or one line when the file system cannot even look it up (longer than its limits: 255
    bytes a name, 4096 a path on Linux); whether it exists is checked where it is used."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise BenchError(f"{option} {shortened(path)} is too long for the file system ({len(str(path))} "
                             f"characters; {err.strerror}); give a shorter path") from None
    return path


def shortened(path: Path | str, keep: int = 60) -> str:
    """A path short enough for a one-line message."""
    text = str(path)
    return text if len(text) <= 2 * keep else f"{text[:keep]}…{text[-keep:]}"

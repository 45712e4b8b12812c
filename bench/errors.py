"""The one error type the command line turns into a single clear line instead of a traceback."""
from __future__ import annotations

import errno
from typing import Iterable


class BenchError(Exception):
    """A user-facing error: bad input, missing data, unknown names. The message says what to do."""


def first_line(err: BaseException) -> str:
    """`Type: first line of the message`: what a one-line report of a library's exception keeps
    (torch and pyarrow append paragraphs of advice)."""
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"


def disk_full(err: BaseException) -> bool:
    """Whether `err` says the disk (or the quota) is full; torch and pyarrow word it their own way."""
    return (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
        words in str(err) for words in ("No space left on device", "Disk quota exceeded", "file write failed"))


PLUGGABLE = ("method", "dataset", "backbone")  # what a plugin that failed to import might have provided


def unknown(kind: str, name: str, known: Iterable[str]) -> BenchError:
    """`unknown method 'basline'; known: Baseline, K-means`, and for a name a plugin may provide, what
    each plugin that failed to import said (`; plugin /x/my.py not loaded: NameError: ...`)."""
    note = ""
    if kind in PLUGGABLE:
        from bench.plugins import failure_note

        note = failure_note()
    return BenchError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known, key=str.lower))}{note}")

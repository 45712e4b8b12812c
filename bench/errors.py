"""The one error type the command line turns into a single clear line instead of a traceback.

Imports from: nothing of bench.
"""
from __future__ import annotations

import difflib
import errno
from typing import Callable, Iterable, Mapping


class BenchError(Exception):
    """A user-facing error: bad input, missing data, unknown names. The message says what to do."""


def first_line(err: BaseException) -> str:
    """`Type: first line of the message`: what a one-line report of a library's exception keeps
    (torch and pyarrow append paragraphs of advice)."""
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"


def ascii_digits(text: object) -> bool:
    """Whether `text` is a non-empty run of the digits 0-9 only: `str.isdigit` alone admits `²` and other
    digits `int()` refuses, so a hostile header or a typo would raise where a clear refusal is due."""
    value = str(text)
    return value.isascii() and value.isdigit()


def disk_full(err: BaseException) -> bool:
    """Whether `err` says the disk (or the quota) is full; torch and pyarrow word it their own way."""
    return (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
        words in str(err) for words in ("No space left on device", "Disk quota exceeded", "file write failed"))


PLUGGABLE = ("method", "dataset", "backbone")  # what a plugin that failed to import might have provided
# what an unknown pluggable name's error adds: the plugin loader registers its failures' note here when it is
# imported (before that no plugin was loaded, so none failed); errors, the lowest module, imports nothing
_UNKNOWN_NOTES: list[Callable[[], str]] = []


def add_unknown_note(note: Callable[[], str]) -> None:
    """Have every `unknown(...)` of a pluggable kind end with what `note()` says then."""
    if note not in _UNKNOWN_NOTES:
        _UNKNOWN_NOTES.append(note)


def unknown(kind: str, name: str, known: Iterable[str], aliases: Mapping[str, str] | None = None) -> BenchError:
    """`unknown method 'basline'; known: Baseline, K-means; did you mean 'Baseline'?`: the valid names, the closest
    of them (or of their `aliases`, other spellings of a name, e.g. slugs, suggested as the name they stand for),
    and for a name a plugin may provide, what each plugin that failed to import said
    (`; plugin /x/my.py not loaded: NameError: ...`)."""
    known = [str(k) for k in known]
    spellings = {**{k: k for k in known}, **dict(aliases or {})}
    close = list(dict.fromkeys(spellings[c] for c in closest(str(name), spellings)))
    hint = suggestion(close)
    listed = sorted(known, key=str.lower)
    note = "".join(note() for note in _UNKNOWN_NOTES) if kind in PLUGGABLE else ""
    return BenchError(f"unknown {kind} {name!r}; known: {', '.join(listed)}{hint}{note}")


def suggestion(close: Iterable[str]) -> str:
    """`; did you mean 'a', 'b' or 'c'?` for the names `close` (nothing for none)."""
    said = [repr(c) for c in close]
    if not said:
        return ""
    return f"; did you mean {' or '.join([', '.join(said[:-1]), said[-1]] if len(said) > 2 else said)}?"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`; did you mean ...?` with the known names closest to `name`, or nothing."""
    return suggestion(closest(name, known))


def closest(name: str, known: Iterable[str], count: int = 3) -> list[str]:
    """The known names closest to `name` (letters compared without case), best first."""
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(k.lower(), k)
    return [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=count, cutoff=0.6)]

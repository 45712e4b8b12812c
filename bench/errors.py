"""The one error type the command line turns into a single clear line instead of a traceback."""
from __future__ import annotations

from typing import Iterable


class BenchError(Exception):
    """A user-facing error: bad input, missing data, unknown names. The message says what to do."""


def unknown(kind: str, name: str, known: Iterable[str]) -> BenchError:
    """`unknown method 'basline'; known: Baseline, K-means`."""
    return BenchError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known, key=str.lower))}")

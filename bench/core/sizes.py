"""Byte counts as a person reads them, in binary units (1 KiB = 1024 B): what a download, a fetched
file and the html site's file listings say of a file's size."""
from __future__ import annotations


def size_text(n: float) -> str:
    """`n` bytes in the largest unit up to GiB it is at least one of: whole bytes below 1 KiB
    (`1023 B`), else one decimal (`1.0 KiB`, `1.5 MiB`, `3072.0 GiB`)."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"

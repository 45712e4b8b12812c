"""`bench new method|dataset NAME --dir DIR`: a method (or dataset reader) to start from, with its
preset and a test, that runs as written (`bench.kit.scaffold`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    new = sub.add_parser("new", help="write a new method or dataset reader, with its preset and a test, to start from")
    new.add_argument("kind", choices=("method", "dataset"))
    new.add_argument("name", help="its registered name: letters, digits, '-' or '_' (e.g. proto-head)")
    new.add_argument("--dir", type=Path, required=True, help="the folder to write into (created if missing)")


def command(args: argparse.Namespace) -> int:
    from bench.kit.scaffold import new

    for path in new(args.kind, args.name, args.dir):
        print(f"wrote {path}")
    return 0

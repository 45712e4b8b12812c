"""`bench new method|dataset NAME --dir DIR [--setting incd|mixed]`: a method (or dataset reader) to start from,
with its preset and a test, that runs as written (`bench.kit.scaffold`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.kit.scaffold import DEFAULT_SETTING, METHOD_TEMPLATES


def add_parser(sub: Any) -> None:
    new = sub.add_parser("new", help="write a new method or dataset reader, with its preset and a test, to start from")
    new.add_argument("kind", choices=("method", "dataset"))
    new.add_argument("name", help="its registered name: letters, digits, '-' or '_' (e.g. proto-head)")
    new.add_argument("--dir", type=Path, required=True, help="the folder to write into (created if missing)")
    new.add_argument("--setting", choices=tuple(METHOD_TEMPLATES), default=None,
                     help=f"the setting a new method runs (default {DEFAULT_SETTING}): incd, class-iNCD (every step "
                          "unlabelled images of new classes only); mixed, continual category discovery (a labelled "
                          "first step, step.labels, then unlabelled steps of old and new classes: the method declares "
                          "RunsOn(settings=(\"mixed\",)))")


def command(args: argparse.Namespace) -> int:
    from bench.kit.scaffold import new

    for path in new(args.kind, args.name, args.dir, args.setting):
        print(f"wrote {path}")
    return 0

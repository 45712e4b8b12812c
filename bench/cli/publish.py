"""`bench publish`: a grid's finished runs bundled into a results store on a new branch (bench.api.publish;
docs/results-store.md)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.cli.common import add_selection, selection


def add_parser(sub: Any) -> None:
    pub = sub.add_parser("publish", help="bundle a grid's finished runs into a results store, on a new branch")
    add_selection(pub)
    pub.add_argument("--store", required=True, metavar="PATH|URL",
                     help="the store: a checkout (a branch is made in it), a bare repository or a git URL (cloned)")
    pub.add_argument("--push", action="store_true", help="push the new branch to the store's remote")
    pub.add_argument("--branch", help="the new branch's name (default: publish/<grid>-<time>-<origin>)")
    pub.add_argument("--checkout", type=Path, metavar="DIR",
                     help="where to clone a store that is not a checkout (default: a new temporary folder)")


def command(args: argparse.Namespace) -> int:
    from bench.api import publish

    publish(selection(args), args.store, push=args.push, branch=args.branch, checkout=args.checkout)
    return 0

"""`bench check method NAME`: the conformance kit (`bench.kit.conformance`) that bench's own methods pass,
one line per check, exit status 1 when any fails."""
from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    check = sub.add_parser("check", help="run the conformance kit: does a method obey the protocol?")
    check.add_argument("kind", choices=("method",))
    check.add_argument("name", help="a registered method or its slug (see `bench list methods`)")


def command(args: argparse.Namespace) -> int:
    from bench.kit.conformance import check_method

    return 0 if check_method(args.name, echo=lambda line: print(line, flush=True)) else 1

"""`bench weights fetch NAME...`: the registered backbones' published files downloaded from their publishers (or a
mirror), verified where a checksum is published (else loaded into their backbones), into the weights directory
(`bench.features.weight_sources`)."""
from __future__ import annotations

import argparse
import os
from typing import Any

from bench.cli.common import add_fetch_options, checksums_of, fetch_outcome
from bench.errors import BenchError


def add_parser(sub: Any) -> None:
    weights = sub.add_parser("weights", help="fetch backbone weight files",
                             description="fetch: download the published weight file of each backbone named (or "
                                         "`paper` for the paper's three, `all`) into --weights-dir under the name "
                                         "bench reads, verified against its published checksum where there is one, "
                                         "else loaded into its backbone (a file that does not load is deleted); "
                                         "a broken download resumes with the same command.")
    weights.add_argument("action", choices=("fetch",))
    weights.add_argument("backbones", nargs="+", metavar="BACKBONE",
                         help="registered backbones (bench list backbones), `paper` or `all`")
    weights.add_argument("--weights-dir", help="where to put the files (else $BENCH_WEIGHTS_DIR)")
    add_fetch_options(weights)


def command(args: argparse.Namespace) -> int:
    """0 when every file named is in place; 1 when some must be downloaded by hand first (each said)."""
    from bench.features.weight_sources import fetch_weights

    folder = args.weights_dir or os.environ.get("BENCH_WEIGHTS_DIR")
    if not folder:
        raise BenchError("bench weights fetch needs --weights-dir DIR (or $BENCH_WEIGHTS_DIR): where to put the files")
    return fetch_outcome(fetch_weights(args.backbones, folder, args.mirror, checksums_of(args)), "file(s)")

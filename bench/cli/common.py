"""What several commands share: the selection options (`--grid`, `--methods` …, where the results and
data are) and the one `Selection` they make (`bench.config.selection`), which `bench.api` and
`bench.execution.selection` take whole; the options of the two `fetch` commands (`bench data fetch`,
`bench weights fetch`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.config.selection import DEFAULT_RESULTS, Selection


def add_selection(p: argparse.ArgumentParser, grid_help: str = "default: demo") -> None:
    p.add_argument("--grid", default="demo", help=f"grid name (see `bench list grids`); {grid_help}")
    p.add_argument("--methods", nargs="+", metavar="M",
                   help="methods to run, by name or slug (joint-frozen), optionally with a preset: "
                        "Baseline:equations (default: code)")
    p.add_argument("--datasets", nargs="+", metavar="D")
    p.add_argument("--splits", nargs="+", metavar="S")
    p.add_argument("--seeds", nargs="+", type=int, metavar="N")
    p.add_argument("--backbone", nargs="+", dest="backbones", metavar="B",
                   help="backbone(s): pixels, timm:<model> (e.g. timm:vit_base_patch16_224.dino)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results root (default: ./results)")
    p.add_argument("--data-root", help="directory holding the datasets (else $BENCH_DATA_ROOT)")
    p.add_argument("--cache-dir", help="feature-bank cache (else $BENCH_CACHE_DIR, else <results>/cache)")
    p.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V",
                   help="override config keys, e.g. method.epochs=10 features.views=4")


def selection(args: argparse.Namespace) -> Selection:
    """The runs the selection options name, as `bench.run(...)` / `bench.report(...)` name them by keyword."""
    return Selection(args.grid, methods=args.methods, datasets=args.datasets, splits=args.splits, seeds=args.seeds,
                     backbones=args.backbones, results=args.results, data_root=args.data_root,
                     cache_dir=args.cache_dir, cfg_options=args.cfg_options)


def read_ahead(args: argparse.Namespace) -> bool | None:
    """`--read-ahead on|off` as the API takes it; None where not given (or not an option of the command)."""
    value = getattr(args, "read_ahead", None)
    return None if value is None else value == "on"


def expand(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The grid and run specs the selection options of `bench run`, `status`, `cancel`, `metrics` name."""
    from bench.execution.selection import expand_selection

    return expand_selection(selection(args), device=getattr(args, "device", None), read_ahead=read_ahead(args),
                            threads=getattr(args, "threads", None), weights_dir=getattr(args, "weights_dir", None),
                            trackers=getattr(args, "trackers", None))


def fetch_outcome(by_hand: list[str], what: str) -> int:
    """How `bench data fetch` and `bench weights fetch` end: 0 when everything named is in place, 1 (and one line
    naming them) when some `what` must be fetched by hand first."""
    import sys

    if by_hand:
        print(f"bench: {len(by_hand)} {what} to fetch by hand first: {', '.join(by_hand)}", file=sys.stderr)
    return 1 if by_hand else 0


def checksums_of(args: argparse.Namespace) -> dict[str, str]:
    """`--checksums FILE`'s lines, or none."""
    from bench.core.download import read_checksums

    return read_checksums(args.checksums) if args.checksums else {}


def add_fetch_options(parser: argparse.ArgumentParser) -> None:
    """--mirror and --checksums, which `bench data fetch` and `bench weights fetch` share."""
    parser.add_argument("--mirror", metavar="URL|DIR",
                        help="fetch: get every file from <URL|DIR>/<file name> instead of its publisher (else "
                             "$BENCH_MIRROR); still verified")
    parser.add_argument("--checksums", metavar="FILE",
                        help="fetch: `<sha256 or md5>  <file name>` lines (sha256sum's format) that replace bench's "
                             "recorded checksums for the files they name")

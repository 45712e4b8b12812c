"""`bench data summary DATASET`: a dataset's classes and images per task of a split."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.api import DEFAULT_RESULTS
from bench.errors import BenchError


def add_parser(sub: Any) -> None:
    data = sub.add_parser("data", help="inspect a dataset")
    data.add_argument("action", choices=("summary",))
    data.add_argument("dataset")
    data.add_argument("--data-root", help="directory holding the dataset (else $BENCH_DATA_ROOT)")
    data.add_argument("--split", default="2-step", help="2-step, 5-step or 10-step (default: 2-step)")
    data.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="where partitions are persisted")
    data.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V", help="dataset options, e.g. dataset.root=DIR")


def command(args: argparse.Namespace) -> int:
    from bench.data import build_dataset
    from bench.data.summary import summary_table
    from bench.config.spec import n_steps_of
    from bench.execution.preflight import resolve_data_root
    from bench.registries import load_all
    from bench.execution.selection import parse_options

    load_all()
    options = {}
    for key, value in parse_options(args.cfg_options).items():
        if not key.startswith("dataset."):
            raise BenchError(f"bench data takes dataset options only (dataset.key=value), got {key!r}")
        options[key.split(".", 1)[1]] = value
    n_steps = n_steps_of(args.split)
    data = build_dataset(args.dataset, options, resolve_data_root(args.data_root), str(Path(args.results).resolve() / "partitions"))
    try:
        print(summary_table(data.name, data.train.labels, data.test.labels, data.num_classes, n_steps,
                            len(data.val) if data.val is not None else 0, root=data.root))
    except ValueError as err:
        raise BenchError(f"split {args.split!r} does not fit dataset {args.dataset!r}: {err}") from None
    return 0


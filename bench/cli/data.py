"""`bench data summary DATASET`: a dataset's classes and images per task of a split; `bench data fetch NAME...`:
the datasets downloaded from their publishers (or a mirror), verified, unpacked and checked (`bench.data.fetch`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.api import DEFAULT_RESULTS
from bench.cli.common import add_fetch_options, checksums_of, fetch_outcome
from bench.errors import BenchError


def add_parser(sub: Any) -> None:
    data = sub.add_parser("data", help="fetch or inspect a dataset",
                          description="summary: a dataset's classes and images per task of a split. fetch: download "
                                      "datasets from their publishers (or --mirror), verify their checksums, unpack "
                                      "them under --data-root and read them as summary does; a broken download "
                                      "resumes with the same command.")
    data.add_argument("action", choices=("summary", "fetch"))
    data.add_argument("datasets", nargs="+", metavar="DATASET",
                      help="summary: one dataset; fetch: datasets, or `paper` for the paper's five")
    data.add_argument("--data-root", help="directory holding the datasets (else $BENCH_DATA_ROOT)")
    data.add_argument("--split", default="2-step", help="summary: 2-step, 5-step, 10-step or a split of the mixed setting, e.g. happy-5-stage "
                           "(default: 2-step)")
    data.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="summary: where partitions are persisted")
    data.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V",
                      help="summary: dataset options, e.g. dataset.root=DIR")
    add_fetch_options(data)


def command(args: argparse.Namespace) -> int:
    if args.action == "fetch":
        return fetch(args)
    if len(args.datasets) != 1:
        raise BenchError(f"bench data summary takes one dataset, got {len(args.datasets)}: {' '.join(args.datasets)}")
    return summary(args, args.datasets[0])


def fetch(args: argparse.Namespace) -> int:
    """0 when every dataset named is in place and read; 1 when some must be fetched by hand (each said)."""
    from bench.data.fetch import fetch_datasets
    from bench.execution.preflight import resolve_data_root

    root = resolve_data_root(args.data_root)  # the datasets' readers only: no method or backbone is imported
    if root is None:
        raise BenchError("bench data fetch needs --data-root DIR (or $BENCH_DATA_ROOT): where to put the datasets")
    return fetch_outcome(fetch_datasets(args.datasets, root, args.mirror, checksums_of(args)), "dataset(s)")


def summary(args: argparse.Namespace, dataset: str) -> int:
    from bench.data import build_dataset
    import numpy as np

    from bench.data.summary import mixed_summary_table, summary_table
    from bench.splits.settings import MIXED_SPLITS
    from bench.config.spec import n_steps_of
    from bench.execution.preflight import resolve_data_root
    from bench.registries import load_all
    from bench.config.selection import parse_options

    load_all()
    options = {}
    for key, value in parse_options(args.cfg_options).items():
        if not key.startswith("dataset."):
            raise BenchError(f"bench data takes dataset options only (dataset.key=value), got {key!r}")
        options[key.split(".", 1)[1]] = value
    n_steps = n_steps_of(args.split)
    data = build_dataset(dataset, options, resolve_data_root(args.data_root), str(Path(args.results).resolve() / "partitions"))
    if args.split in MIXED_SPLITS:  # a labelled step, then steps of old and new classes: not class-iNCD's tasks
        print(mixed_summary_table(data.name, args.split, np.asarray(data.train.labels), np.asarray(data.test.labels),
                                  data.num_classes, partitioned=data.val is not None, root=data.root))
        return 0
    try:
        print(summary_table(data.name, data.train.labels, data.test.labels, data.num_classes, n_steps,
                            len(data.val) if data.val is not None else 0, root=data.root))
    except ValueError as err:
        raise BenchError(f"split {args.split!r} does not fit dataset {dataset!r}: {err}") from None
    return 0

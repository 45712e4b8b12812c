"""`bench cancel`: cancel a grid's queued and running SLURM jobs."""
from __future__ import annotations

import argparse
from typing import Any

from bench.cli.common import add_selection, expand


def add_parser(sub: Any) -> None:
    cancel = sub.add_parser("cancel", help="cancel a grid's queued and running SLURM jobs")
    add_selection(cancel)


def command(args: argparse.Namespace) -> int:
    from bench.execution import slurm

    grid, specs = expand(args)
    ids = slurm.cancel(args.results, specs)
    print(f"grid {grid.name}: cancelled {len(ids)} job(s)" + (f": {', '.join(ids)}" if ids else ""))
    return 0


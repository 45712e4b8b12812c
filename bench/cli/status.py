"""`bench status`: what of a grid is pending, running, done, failed or cancelled (SLURM accounting
where reachable, else the run directories)."""
from __future__ import annotations

import argparse
from typing import Any

from bench.cli.common import add_selection, expand


def add_parser(sub: Any) -> None:
    st = sub.add_parser("status", help="what of a grid is pending, running, done, failed, cancelled")
    add_selection(st)


def command(args: argparse.Namespace) -> int:
    from bench.execution import slurm
    from bench.reporting.outcomes import error_line
    from bench.runs.rundir import run_dir

    grid, specs = expand(args)
    current = slurm.status(args.results, specs)
    counts = current.counts()
    print(f"grid {grid.name}: {len(specs)} runs: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    if not current.accounting:
        print("(no SLURM accounting reachable: states come from the run directories)")
    failed = current.states.get("failed", [])
    if failed:
        from tabulate import tabulate

        jobs = slurm.latest_jobs(args.results)
        rows = [(s.describe(), jobs.get(s.run_id, {}).get("job_id", "-"), error_line(args.results, s),
                 str(run_dir(args.results, s) / "log.txt")) for s in failed]
        print(tabulate(rows, headers=("failed run", "job", "error", "log"), tablefmt="github"))
    return 0

"""`bench metrics recompute`: finished runs' metrics recomputed from their stored predictions."""
from __future__ import annotations

import argparse
from typing import Any

from bench.errors import BenchError
from bench.cli.common import add_selection, expand


def add_parser(sub: Any) -> None:
    met = sub.add_parser("metrics", help="recompute finished runs' metrics from their stored predictions")
    met.add_argument("action", choices=("recompute",))
    add_selection(met)
    met.set_defaults(grid=None)  # no grid named: every finished run under the results root
    met.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")


def command(args: argparse.Namespace) -> int:
    """`bench metrics recompute`: every finished run of the grid (or under the results root)."""
    from bench.protocol.recompute import finished_runs, recompute_run
    from bench.runs.rundir import run_dir

    if args.grid:
        _, specs = expand(args)
        runs = [run_dir(args.results, s) for s in specs if (run_dir(args.results, s) / "DONE").exists()]
    else:
        runs = finished_runs(args.results)
    if not runs:
        raise BenchError(f"no finished runs under {args.results}" + (f" of grid {args.grid!r}" if args.grid else ""))
    outcomes = [recompute_run(run, write=not args.dry_run) for run in runs]
    for outcome in outcomes:
        if outcome.status == "changed":
            print(f"{outcome.run.name}: {outcome.n_changed} value(s) {'would change' if args.dry_run else 'changed'}, e.g. "
                  + "; ".join(outcome.changed[:3]))
        elif outcome.status == "rebuilt":
            print(f"{outcome.run.name}: {outcome.changed[0]}")
        elif outcome.status == "not rebuilt":
            print(f"{outcome.run.name}: {outcome.changed[0]}")
        elif outcome.status == "skipped":
            print(f"{outcome.run.name}: skipped: {outcome.changed[0]}")
        elif outcome.status != "unchanged":
            print(f"{outcome.run.name}: skipped, {outcome.status} (recorded before runs kept them); left as it is")
    counts = {status: sum(o.status == status for o in outcomes)
              for status in ("changed", "unchanged", "rebuilt", "not rebuilt", "skipped", "no stored predictions")}
    print(f"recomputed {len(runs)} finished run(s): {counts['changed']} changed, {counts['unchanged']} unchanged, "
          f"{counts['rebuilt']} rebuilt, " + (f"{counts['not rebuilt']} not rebuilt, " if counts["not rebuilt"] else "")
          + (f"{counts['skipped']} skipped (their predictions unreadable or another run's), " if counts["skipped"] else "")
          + f"{counts['no stored predictions']} without stored predictions")
    return 1 if counts["not rebuilt"] or counts["skipped"] else 0

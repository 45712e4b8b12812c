"""`bench worker`: claim a grid's pending runs one at a time and run them until none is left (`bench.execution.pull`);
start as many as you have GPUs or machines, each pointed at the same `--results`."""
from __future__ import annotations

import argparse
from typing import Any

from bench.cli.common import add_selection, expand

MAX_POLL_S = 3600  # an hour between looks: longer only leaves a dead worker's run waiting


def add_parser(sub: Any) -> None:
    worker = sub.add_parser("worker", help="claim and run a grid's pending runs until none is left (start N of them)")
    add_selection(worker)
    worker.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda if available; one GPU per worker: "
                                         "give each its own with CUDA_VISIBLE_DEVICES)")
    worker.add_argument("--threads", type=int, default=None, help="CPU compute threads of each run (default 1)")
    worker.add_argument("--weights-dir", help="directory holding the backbones' weight files (else $BENCH_WEIGHTS_DIR)")
    worker.add_argument("--tracker", action="append", dest="trackers", default=[], metavar="NAME",
                        help="also send each run's losses and metrics to tensorboard, wandb or mlflow, as bench run does")
    worker.add_argument("--retry-failed", action="store_true",
                        help="also claim the runs that had failed before this worker started (once)")
    worker.add_argument("--max-attempts", type=int, default=3, metavar="N",
                        help="a run claimed N times by workers that died before finishing it is recorded as failed "
                             "(default 3)")
    worker.add_argument("--poll", type=float, default=5.0, metavar="S",
                        help="seconds between looks while the only runs left are held by other workers (default 5, "
                             "at most 3600)")


def command(args: argparse.Namespace) -> int:
    from bench.errors import BenchError
    from bench.execution import preflight, pull
    from bench.execution.workers import sigterm_stops
    from bench.runs.rundir import check_writable, is_done

    if args.max_attempts < 1:
        raise BenchError(f"--max-attempts {args.max_attempts}: must be an integer >= 1 (default 3)")
    if not 0 < args.poll <= MAX_POLL_S:  # nan and inf too: time.sleep refuses them with a traceback
        raise BenchError(f"--poll {args.poll:g}: must be a number of seconds > 0 and at most {MAX_POLL_S} (default 5)")
    preflight.check_cluster("local", None, args.threads)
    preflight.check_device(args.device, "local")
    grid, specs = expand(args)
    preflight.check_splits(specs)
    preflight.check_tail_backbones(specs)
    preflight.check_timm_models(specs)
    pending = [s for s in specs if not is_done(args.results, s)]
    preflight.check_inputs(pending)
    check_writable(args.results)
    preflight.check_caches(args.results, pending)
    pull.check_locks(args.results)
    print(f"grid {grid.name}: {len(specs)} runs, {len(specs) - len(pending)} done; claiming the others "
          f"(results {args.results}, on a {pull.filesystem_of(args.results)} filesystem)", flush=True)
    with sigterm_stops():  # a pod's or a job's SIGTERM: the run in flight unwinds, another worker resumes it
        outcome = pull.work(specs, args.results, retry_failed=args.retry_failed, max_attempts=args.max_attempts,
                            poll_s=args.poll, say=lambda line: print(line, flush=True))
    done = sum(is_done(args.results, s) for s in specs)
    print(f"worker: ran {len(outcome.ran)}, {len(outcome.failed)} failed here; grid {grid.name}: {done} of "
          f"{len(specs)} done, {len(outcome.left_failed)} failed (`bench status`)")
    return 1 if outcome.left_failed else 0

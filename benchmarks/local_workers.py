"""Local grids: warm worker processes vs one fresh process per run, side by side in one run.

    python benchmarks/local_workers.py [--grid demo] [--workers N] [--repeats 1]

Both run the same grid into fresh results directories, with as many runs at a time as there are
workers (default: the available cores):

1. one process per run: submitit's local executor, as `bench run --cluster local` did before the
   pool (every run imports torch, timm, pandas, scikit-learn and mmengine, and pays the interpreter's
   exit);
2. warm workers: `bench.execution.workers.run_pool`, what `bench run --cluster local` does now.

It prints both wall times, their ratio and whether the two leaderboards agree (they must: the runs
are the same, only the processes that execute them differ).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import submitit  # noqa: E402

from bench.runs.rundir import METRICS, run_dir  # noqa: E402
from bench.execution.scheduler import job  # noqa: E402
from bench.config.grids import expand, load_grid  # noqa: E402
from bench.core.numerics import available_cores  # noqa: E402
from bench.execution.workers import run_pool  # noqa: E402


def one_process_per_run(specs, results: Path, workers: int) -> None:
    executor = submitit.AutoExecutor(folder=results / "submitit" / datetime.now().strftime("%H%M%S%f"), cluster="local")
    executor.update_parameters(timeout_min=60)
    queue, running = list(specs), []
    while queue or running:
        while queue and len(running) < workers:
            running.append(executor.submit(job, queue.pop(0).to_json(), str(results)))
        for handle in [h for h in running if h.done()]:
            running.remove(handle)
            handle.result()
        time.sleep(0.05)


def warm_workers(specs, results: Path, workers: int) -> None:
    failed = []
    run_pool(specs, results, workers=workers, folder=results / "submitit" / "pool",
             finished=lambda spec, kind, seconds, reason: kind == "failed" and failed.append(reason))
    assert not failed, failed


def final_metrics(specs, results: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(run_dir(results, s) / METRICS) for s in specs]
    rows = pd.concat(frames)
    rows = rows[rows["group"] == "summary"][["run_id", "flavour", "metric", "value"]]
    return rows.sort_values(["run_id", "flavour", "metric"]).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", default="demo")
    parser.add_argument("--workers", type=int, default=available_cores())
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    specs = expand(load_grid(args.grid))
    print(f"grid {args.grid}: {len(specs)} runs, {args.workers} at a time, {available_cores()} available cores")
    for repeat in range(args.repeats):
        times, metrics = {}, {}
        for name, runner in (("one process per run", one_process_per_run), ("warm workers", warm_workers)):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                runner(specs, Path(tmp), args.workers)
                times[name] = time.perf_counter() - start
                metrics[name] = final_metrics(specs, Path(tmp))
            print(f"  [{repeat + 1}] {name:<20} {times[name]:6.1f} s")
        same = metrics["one process per run"].equals(metrics["warm workers"])
        print(f"  [{repeat + 1}] warm workers are {times['one process per run'] / times['warm workers']:.2f}x faster; "
              f"identical final metrics: {same}")


if __name__ == "__main__":
    main()

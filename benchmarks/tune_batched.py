"""`bench tune` on a frozen-feature method: trials per hour, one trial per process vs `--batch N`, side by side.

    python benchmarks/tune_batched.py [--trials 16] [--batch 16] [--method Baseline] [--epochs E] [--workers 1]

Both tune the same method on the default grid's data (`demo`: scikit-learn's digits, flattened pixels as the
backbone, its 2-step split, seed 0) with the same budget of trials, each into a fresh results directory that reads
one feature bank (built once beforehand, outside the timings, as a study's first trial would):

1. one trial per process: `bench.tune(..., batch=1)`, what `bench tune` did before `--batch` (each trial a `bench run`
   through the local pool: a fresh worker process per trial);
2. one at a time in process: `bench.tune(..., batch=1, cluster="debug")`, the same runs without a process each (what
   batching saves beyond the processes);
3. batched: `bench.tune(..., batch=N)`, each N trials' runs stepped together in this process, their heads trained as
   one batched computation (`bench.methods.batched_heads`).

It prints each wall time (Optuna and the runs' files included) as trials per hour, their ratio, and the largest
relative difference between the two studies' trial values where they ran the same hyper-parameters (the samplers
are seeded alike, so the first batch's values may differ only where TPE's constant liar changes later draws: each
study's best is printed too). `--epochs` overrides the preset's epochs (the demo's: the code preset's 200).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench import tune  # noqa: E402
from bench.core.numerics import available_cores  # noqa: E402


def study(results: Path, cache: Path, trials: int, batch: int, method: str, options: dict, workers: int,
          cluster: str = "local") -> tuple[float, dict]:
    start = time.perf_counter()
    outcome = tune("demo", methods=[method], datasets=["digits"], splits=["2-step"], seeds=[0],
                   results=results, cache_dir=cache, cfg_options=options, trials=trials, batch=batch,
                   workers=workers, seed=0, cluster=cluster)
    seconds = time.perf_counter() - start
    return seconds, {tuple(sorted(t["values"].items())): t["value"] for t in outcome.trials}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--method", default="Baseline")
    parser.add_argument("--epochs", type=int, help="method.epochs (default: the preset's)")
    parser.add_argument("--workers", type=int, default=1, help="local workers of the one-trial-per-process tuner")
    args = parser.parse_args()
    options = {"method.epochs": args.epochs} if args.epochs else {}
    print(f"{args.method} on digits 2-step (pixels), {args.trials} trials, {available_cores()} available cores"
          + (f", method.epochs={args.epochs}" if args.epochs else ""))
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        study(Path(tmp) / "warm", cache, 1, 1, args.method, options, args.workers)  # the feature bank, once
        times, values = {}, {}
        modes = (("one trial per process", 1, "local"), ("one at a time, in process", 1, "debug"),
                 (f"batched (--batch {args.batch})", args.batch, "local"))
        for i, (name, batch, cluster) in enumerate(modes):
            times[name], values[name] = study(Path(tmp) / f"mode{i}", cache, args.trials, batch, args.method,
                                              options, args.workers, cluster)
            print(f"  {name:<26} {times[name]:7.1f} s  {3600 * args.trials / times[name]:8.0f} trials/hour  "
                  f"best A {max(v for v in values[name].values() if v is not None):.2f}")
    alone, _, together = values.values()
    shared = [k for k in alone if k in together and alone[k] is not None and together[k] is not None]
    worst = max((abs(together[k] - alone[k]) / max(abs(alone[k]), 1e-12) for k in shared), default=float("nan"))
    first, in_process, batched = times.values()
    print(f"  batched: {first / batched:.2f}x the trials per hour of one trial per process, {in_process / batched:.2f}x "
          f"those of one at a time in process; {len(shared)} trial(s) with the same values batched and alone, largest "
          f"relative difference of their A {worst:.1e}")


if __name__ == "__main__":
    main()

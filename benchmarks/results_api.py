"""What `bench.results(...)` costs: its first call in a fresh process (`import bench` included, as a notebook's first
cell pays it) and a second call in the same process (the work itself), with the heavy libraries the call imported.

    python benchmarks/results_api.py --results /tmp/cmp-demo [--grid cgcd-demo] [--repeat 3] [--cold] [--after-bench]

Each repeat is a new Python process, so that nothing is imported before the clock starts; the best of `--repeat`
is printed, wall-clock and this process's CPU seconds (steadier where other work shares the cores). `--cold` gives each process an empty bytecode cache (`PYTHONPYCACHEPREFIX`):
every module of bench and of the libraries it imports is compiled from source first, as after an install without
precompiled bytecode. `--after-bench` gives each process a cache folder of its own (`XDG_CACHE_HOME`) in which the
method catalogue (registries/catalogue.py) was just written by another name of this interpreter (the venv's
`python3`, as the `bench` script's first line names it, when this is its `python`): a notebook's first
`bench.results` after `bench run`. The results folder is made by `bench run --grid cgcd-demo --results DIR` (84 runs; see
docs/performance.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "scipy.stats", "scipy.special", "matplotlib", "sklearn", "timm", "mmengine", "pyarrow", "pandas")

CHILD = """
import json, sys, time
start, cpu_start = time.perf_counter(), time.process_time()
import bench
kwargs = json.loads(sys.argv[1])
first = bench.results(**kwargs)
middle, cpu_middle = time.perf_counter(), time.process_time()
bench.results(**kwargs)
end, cpu_end = time.perf_counter(), time.process_time()
print(json.dumps({"first": middle - start, "second": end - middle, "first_cpu": cpu_middle - cpu_start,
                  "second_cpu": cpu_end - cpu_middle, "runs": int(first.runs["run_id"].nunique()),
                  "rows": len(first.runs), "imported": [m for m in %r if m in sys.modules]}))
""" % (HEAVY,)


def other_name() -> Path:
    """Another name of this interpreter in its folder (`python3` beside `python`)."""
    me = Path(sys.executable)
    for path in sorted(me.parent.glob("python*")):
        if path.name != me.name and os.path.realpath(path) == os.path.realpath(me):
            return path
    raise SystemExit(f"--after-bench: no other name of {me} in its folder")


def once(kwargs: dict, cold: bool, after_bench: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as home_cache:
        if cold:
            env["PYTHONPYCACHEPREFIX"] = cache
        if after_bench:
            env["XDG_CACHE_HOME"] = home_cache
            subprocess.run([str(other_name()), "-c", "from bench.registries.catalogue import catalogue; catalogue()"],
                           env=env, check=True, capture_output=True, cwd=tempfile.gettempdir())
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(kwargs)], env=env, check=True,
                             capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", required=True)
    parser.add_argument("--grid", default=None, help="the grid's name (default: every finished run)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="compile every module from source in each process")
    parser.add_argument("--after-bench", action="store_true",
                        help="a catalogue just written by another name of this interpreter, as by `bench run`")
    args = parser.parse_args()
    kwargs = {"results": str(Path(args.results).resolve()), **({"grid": args.grid} if args.grid else {})}
    tries = [once(kwargs, args.cold, args.after_bench) for _ in range(args.repeat)]
    for t in tries:
        print(f"first call {t['first']:.2f} s ({t['first_cpu']:.2f} s CPU), second {t['second']:.2f} s "
              f"({t['second_cpu']:.2f} s CPU)")
    best = {key: min(t[key] for t in tries) for key in ("first", "second", "first_cpu", "second_cpu")}
    print(f"{tries[0]['runs']} runs, {tries[0]['rows']} metric rows, best of {args.repeat}"
          f"{', cold bytecode' if args.cold else ''}{', after bench' if args.after_bench else ''}: first call (import bench included) {best['first']:.2f} s "
          f"({best['first_cpu']:.2f} s CPU), second call {best['second']:.2f} s ({best['second_cpu']:.2f} s CPU); "
          f"imported: {', '.join(tries[0]['imported'])}")


if __name__ == "__main__":
    main()

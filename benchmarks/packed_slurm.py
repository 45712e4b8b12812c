"""The `full` grid's frozen-feature block through a SLURM cluster, packed against unpacked: wall time from the
submission to the last run done, measured side by side in one run of this script.

    bash slurm/start-local.sh && python benchmarks/packed_slurm.py [--profile local] [--pack auto]

The block: every run of the `full` grid whose method trains on frozen features (150 runs: Baseline, Baseline++,
their no_cosnorm presets, K-means and Joint (frozen), on five datasets, two splits, three backbones, three
seeds), each on generated data instead of its dataset (the smoke grid's synthetic images, pixel backbone, a
distinct number of images per class for each dataset and backbone, so that the 150 runs stay 150 distinct runs). What is measured is
the engine: a scheduling slot and a fresh import of the stack per run, against one per packed task.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.config.grids import expand, load_grid
from bench.execution import slurm
from bench.config.selection import Selection
from bench.execution.selection import expand_selection
from bench.registries.catalogue import method_info

TINY = {"features.views": 2, "dataset.image_size": 8, "dataset.num_classes": 10, "dataset.test_per_class": 6}


def frozen_block() -> list:
    """The `full` grid's frozen-feature runs, each on synthetic data of its own size."""
    _, specs = expand_selection(Selection("full"))
    frozen = [s for s in specs if method_info(s.method).inputs == "features"]
    pairs = sorted({(s.dataset, s.backbone) for s in frozen})
    smoke = load_grid("smoke")
    out = []
    for s in frozen:
        per_class = 12 + pairs.index((s.dataset, s.backbone))  # a size per (dataset, backbone): distinct runs
        label = s.method if s.preset == "code" else f"{s.method}:{s.preset}"
        out += expand(smoke, methods=[label], datasets=["synthetic"], splits=[s.split], seeds=[s.seed],
                      backbones=["pixels"], options={**TINY, "dataset.train_per_class": per_class})
    assert len({s.run_id for s in out}) == len(frozen)
    return out


def timed(specs: list, results: Path, profile: slurm.Profile, pack: int | str | None) -> tuple[float, int]:
    start = time.monotonic()
    submission = slurm.submit(specs, results, profile, {}, "frozen-block", pack=pack)
    final = slurm.wait(results, specs, progress=lambda line: None, poll_s=1.0)
    assert final.counts()["done"] == len(specs), final.counts()
    return time.monotonic() - start, sum(tasks for *_, tasks in submission.arrays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="local")
    parser.add_argument("--pack", default="auto")
    args = parser.parse_args()
    specs = frozen_block()
    profile = slurm.load_profile(args.profile)
    with tempfile.TemporaryDirectory() as tmp:
        packed = timed(specs, Path(tmp) / "packed", profile, args.pack if args.pack == "auto" else int(args.pack))
        unpacked = timed(specs, Path(tmp) / "unpacked", profile, None)
    print(f"{len(specs)} runs, profile {profile.name} (array_parallelism {profile.array_parallelism})")
    print(f"  unpacked: {unpacked[1]:4d} array tasks, {unpacked[0]:7.1f} s")
    print(f"  packed  : {packed[1]:4d} array tasks, {packed[0]:7.1f} s  (--pack {args.pack})")
    print(f"  unpacked / packed: {unpacked[0] / packed[0]:.1f}x")


if __name__ == "__main__":
    main()

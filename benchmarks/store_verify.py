"""The results store at scale: a store of the `full` grid's 348 runs, each with predictions generated at its
dataset's real test-set size, then `bench store verify` (every claim recomputed from its predictions) and
`bench store site` timed on it.

    python benchmarks/store_verify.py [--dir /tmp/store-bench] [--runs N]

The runs are generated, not trained: each run folder gets the grid's own spec.json, a predictions.npz in the schema
a class-iNCD run writes (test labels at the real sizes: CIFAR-10 10,000 images, CIFAR-100 10,000, TinyImageNet
10,000, CUB-200 5,794, Herbarium19 2,679 in its reader's validation partition; mapping images as many as each
dataset's training or validation images, capped at 50,000), with about 70% of predictions right, and a
metrics.parquet whose rows are what bench's evaluator gives for them. Each is bundled as `bench publish` bundles
it (bench.store.bundle), then the store is verified and its site written, each timed once on this machine.
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.config.grids import expand, load_grid
from bench.protocol.steps import replay
from bench.runs import predictions
from bench.splits.layout import TaskLayout
from bench.store.bundle import bundle_of, write_entry
from bench.store.claimed import init_store
from bench.store.layout import SUBMISSION, SUBMISSIONS, dump
from bench.store.site import write_store_site
from bench.store.verify import verify_store

TEST = {"cifar10": 1000, "cifar100": 100, "tinyimagenet": 50, "cub200": 29, "herbarium19": 4}  # per class
MAPPING = {"cifar10": 5000, "cifar100": 500, "tinyimagenet": 250, "cub200": 6, "herbarium19": 4}
CLASSES = {"cifar10": 10, "cifar100": 100, "tinyimagenet": 200, "cub200": 200, "herbarium19": 683}


def noisy(labels: np.ndarray, classes: int, rng: np.random.Generator) -> np.ndarray:
    wrong = rng.random(len(labels)) > 0.7
    return np.where(wrong, rng.integers(0, classes, len(labels)), labels)


def generated_run(out: Path, spec, rng: np.random.Generator) -> None:
    """A finished class-iNCD run's files, with predictions at the dataset's sizes and the rows they give."""
    classes = CLASSES[spec.dataset]
    layout = TaskLayout.contiguous(classes, spec.n_steps)
    stored: dict[str, np.ndarray] = {}
    for t in range(spec.n_steps):
        first, size = layout.offsets[t], layout.sizes[t]
        seen = first + size
        val = np.repeat(np.arange(size), MAPPING[spec.dataset])[:50_000]
        test = np.repeat(np.arange(seen), TEST[spec.dataset])
        current = test >= first
        predictions.record(stored, t, val_labels=val + first, val_pred=noisy(val, size, rng),
                           test_labels=test, unified=noisy(test, seen, rng),
                           task_pred=noisy(test[current] - first, size, rng),
                           mapping=np.arange(size), refit_pred=[noisy(np.repeat(np.arange(layout.sizes[s]),
                                                                               MAPPING[spec.dataset])[:50_000],
                                                                     layout.sizes[s], rng) for s in range(t)])
    out.mkdir(parents=True)
    (out / "spec.json").write_text(spec.to_json())
    (out / "provenance.json").write_text("{}\n")
    predictions.write(out, layout, stored, spec.run_id)
    with predictions.opened(out / predictions.PREDICTIONS) as kept:
        rows = replay(kept)
    frame = pd.DataFrame([r.__dict__ for r in rows]).assign(method_sha256="0" * 64, reported_A="w/A", reported_F="w/F")
    frame.to_parquet(out / "metrics.parquet", index=False)
    (out / "DONE").write_text("generated\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/store-bench"))
    parser.add_argument("--runs", type=int, default=0, help="the first N runs of the grid only (0: all 348)")
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    specs = [s for s in expand(load_grid("full")) if s.dataset in CLASSES]
    specs = specs[: args.runs] if args.runs else specs
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for spec in specs:
        generated_run(args.dir / "results" / "runs" / spec.run_id, spec, rng)
    generated = time.perf_counter() - start
    store = args.dir / "store"
    store.mkdir()
    init_store(store)
    submission = "full-generated"
    start = time.perf_counter()
    for spec in specs:
        bundle = bundle_of(args.dir / "results" / "runs" / spec.run_id, "generated0000", submission)
        write_entry(bundle, store / SUBMISSIONS / submission / bundle.id)
    (store / SUBMISSIONS / submission / SUBMISSION).write_text(dump({"submitted": "2026-11-28T00:00:00+00:00"}))
    bundled = time.perf_counter() - start
    size = sum(p.stat().st_size for p in (store / SUBMISSIONS).rglob("*") if p.is_file())
    start = time.perf_counter()
    verdicts = verify_store(store, say=None)
    verified = time.perf_counter() - start
    levels = pd.Series([v.level or "refused" for v in verdicts]).value_counts().to_dict()
    start = time.perf_counter()
    write_store_site(verdicts, args.dir / "site")
    site = time.perf_counter() - start
    print(f"{len(specs)} runs of the full grid: generated in {generated:.1f} s, bundled in {bundled:.1f} s "
          f"({size / 2**20:.1f} MiB of entries)")
    print(f"bench store verify: {verified:.1f} s ({verified / len(specs) * 1000:.0f} ms per entry), levels {levels}")
    print(f"bench store site: {site:.1f} s")


if __name__ == "__main__":
    main()

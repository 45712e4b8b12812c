"""The statistics part of `bench report` at scale: generated results of the `full` grid (the paper's 116 cells ×
3 seeds, `report_site.generate`), each finished run given a predictions.npz of its dataset's real size (classes,
test images), then the statistics part timed: ranks and corrected comparisons alone (--bootstrap 0), and with the
paired test-image × seed bootstrap over every run's stored predictions (1000 resamples), then its files written.

    python benchmarks/report_statistics.py [--seeds 3] [--dir /tmp/report-statistics] [--resamples 1000]

The predictions hold what the bootstrap reads (every step's val labels and task-head answers, the last step's
test labels and unified-head answers, the re-fitted heads where a method reports `wo_refit`): the unified head is
right on a share of the images drawn per run, wrong elsewhere. Their sizes are the datasets' (test images: CIFAR
10,000; Tiny ImageNet's val 10,000; CUB 5,794; Herbarium19's val 2,679), so the Hungarian matches K-means' A needs
per resample are as large as on real runs (683 × 683 on Herbarium19).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_site import generate  # noqa: E402

from bench.runs.predictions import PREDICTIONS, SCHEMA_VERSION, Keys  # noqa: E402
from bench.splits.layout import TaskLayout  # noqa: E402

DATASETS = {"cifar10": (10, 10000), "cifar100": (100, 10000), "tinyimagenet": (200, 10000), "cub200": (200, 5794),
            "herbarium19": (683, 2679)}  # classes, test images


def predictions(spec: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    classes, images = DATASETS[spec["dataset"]]
    layout = TaskLayout.contiguous(classes, spec["n_steps"])
    last = layout.n_steps - 1
    out = {Keys.version: np.asarray(SCHEMA_VERSION, dtype=np.int16), Keys.offsets: np.asarray(layout.offsets),
           Keys.sizes: np.asarray(layout.sizes), Keys.run_id: np.asarray(spec["run_id"])}
    for t in range(layout.n_steps):
        local = np.arange(layout.sizes[t])
        out[Keys.val_labels(t)] = np.repeat(local + layout.offsets[t], 3)
        out[Keys.val_pred(t)] = np.repeat(local, 3)
    # one test set per dataset, as on real runs: every method and seed of a cell scored the same images
    labels = np.sort(np.random.default_rng(zlib.crc32(spec["dataset"].encode())).integers(0, classes, images))
    right = rng.random(images) < rng.uniform(0.4, 0.9)
    out[Keys.test_labels(last)] = labels
    out[Keys.unified(last)] = np.where(right, labels, rng.integers(0, classes, images))
    out[Keys.refit(last)] = np.asarray([last])
    for s in range(last):
        out[Keys.refit_pred(last, s)] = out[Keys.val_pred(s)]
    return out


def add_predictions(results: Path) -> int:
    rng, n = np.random.default_rng(1), 0
    for run in sorted((results / "runs").iterdir()):
        if (run / "DONE").exists():
            spec = json.loads((run / "spec.json").read_text())
            spec.setdefault("run_id", run.name)
            np.savez_compressed(run / PREDICTIONS, **predictions(spec, rng))
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/report-statistics"))
    parser.add_argument("--reuse", action="store_true", help="reuse the runs an earlier call generated there")
    args = parser.parse_args()
    results = args.dir / f"seeds{args.seeds}"
    if not args.reuse:
        shutil.rmtree(results, ignore_errors=True)
        generate(results, args.seeds)
    add_predictions(results)
    from bench.reporting.aggregate import backbone_label, final_scores
    from bench.reporting.load import load_runs
    from bench.reporting.statistics import Options, compute
    from bench.reporting.stats_files import write_statistics

    directories = sorted((results / "runs").iterdir())
    frame, _ = load_runs(directories)
    # as `bench report` labels them: Tab. 4's other backbones are rows of their own
    frame = frame.assign(label=[backbone_label(l, b, "dino-vitb16") for l, b in zip(frame["label"], frame["backbone"])])
    scores = final_scores(frame)
    runs = {d.name: d for d in directories}
    row = dict(seeds=args.seeds, finished=int(frame["run_id"].nunique()),
               blocks=int(scores[["split", "dataset"]].drop_duplicates().shape[0]), labels=int(scores["label"].nunique()))
    plain = compute(frame, scores, runs, Options(resamples=0))
    row["ranks_and_tests_s"] = round(plain.seconds, 2)
    full = compute(frame, scores, runs, Options(resamples=args.resamples))
    row[f"with_image_bootstrap_{args.resamples}_s"] = round(full.seconds, 1)
    row["pairs_bootstrapped"] = int(full.comparisons["p_better"].notna().sum())
    print(json.dumps(row), flush=True)
    start = time.perf_counter()
    write_statistics(full, results / "reports", ["markdown", "latex"])
    row["files_s"] = round(time.perf_counter() - start, 2)
    print(json.dumps(row))


if __name__ == "__main__":
    main()

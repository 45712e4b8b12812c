"""What re-fitting class-iNCD's maps (`wo_refit`) reads, with and without re-reading the earlier task heads of a
method whose heads stay as they were (`RunsOn.frozen_task_heads`), and what it costs in wall time.

    python benchmarks/refit_reads.py [--dataset C100] [--dim 768] [--repeat 3] [--threads 1] [--pass-only]
                                     [--methods Baseline "NCM + k-means" "Gaussian per class"]

- Passes: after step t the evaluation reads task t's head on its mapping images (what freezes its map) and,
  re-reading, every earlier task's head on theirs (what re-fits their maps): Σ_t Σ_{s<=t} m_s images over a
  run, T(T+1)/2 passes. A method that declares `frozen_task_heads` has each head read once, at its own step:
  Σ_s m_s images, T passes. The mapping images are the training images on CIFAR and TinyImageNet and the
  held-out val partition on CUB and Herbarium; their counts per task are the cost model's
  (`benchmarks/cost_model.py`'s TASKS and EVAL: the val share of EVAL split over the tasks like the training
  images).
- Wall time: `ClassIncrementalSteps.evaluate` of every step of a generated run of `--dataset`'s sizes (random
  features of `--dim` channels, each of `--methods`' heads drawn at random through its `load_state_dict`: the
  time does not depend on what they learnt), on this machine's CPU, re-reading the heads (as a method that declares
  nothing) and reusing their answers: wall-clock and this process's CPU seconds (steadier where other work
  shares the cores), the best of `--repeat` interleaved runs each. Both give the same rows and stored
  predictions, which the script checks. Last (or alone, `--pass-only`), what one re-read costs: a task head's
  pass over 10,000 mapping images.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench from this checkout

from cost_model import EVAL, TASKS  # noqa: E402  (beside this script, which Python puts on the path)

CLASSES = {"C10": 10, "C100": 100, "T200": 200, "B200": 200, "H683": 683}
HELD_OUT = {"B200": 1199, "H683": 3415}  # the val share of EVAL: the mapping images of CUB and Herbarium


def mapping_images(dataset: str, steps: int) -> list[int]:
    """The mapping images of each task of `dataset`'s `steps`-step split."""
    train = TASKS[dataset][steps]
    if dataset not in HELD_OUT:
        return list(train)
    return [round(HELD_OUT[dataset] * n / sum(train)) for n in train]


def images_read(per_task: list[int], reread: bool) -> int:
    """Mapping images read by task heads over a run: every earlier head again at every step, or each once."""
    if reread:
        return sum(sum(per_task[: t + 1]) for t in range(len(per_task)))
    return sum(per_task)


def passes_table() -> None:
    print("mapping images read by task heads over a run (passes: T(T+1)/2 re-reading, T reusing)")
    print(f"{'dataset':8} {'split':7} {'per task':>24} {'re-reading':>12} {'reusing':>10} {'ratio':>6}")
    for dataset in TASKS:
        for steps in (2, 5):
            per_task = mapping_images(dataset, steps)
            before, after = images_read(per_task, True), images_read(per_task, False)
            shown = ", ".join(f"{n:,}" for n in per_task) if len(set(per_task)) > 1 else f"{steps} × {per_task[0]:,}"
            print(f"{dataset:8} {steps}-step {shown:>24} {before:>12,} {after:>10,} {before / after:>5.1f}×")


def generated_method(name: str, layout: Any, dim: int, gen: torch.Generator) -> tuple[Any, Any]:
    """A registered method on features and its state after each step, with random heads (set through its own
    `load_state_dict`, as a resumed run's): `state(t)` holds the heads of tasks 0..t."""
    from bench.registries import METHODS, load_all

    load_all()
    k, sizes = sum(layout.sizes), list(layout.sizes)
    if name == "Baseline":
        hparams: dict[str, Any] = {"normalize_weights": True}
        heads = [torch.randn(c, dim, generator=gen) for c in sizes]

        def state(t: int) -> dict[str, Any]:
            return {"heads": heads[: t + 1], "losses": []}
    elif name == "Gaussian per class":
        hparams = {"normalize": True, "shrinkage": 0.5, "min_variance": 1e-4}
        means = torch.randn(k, dim, generator=gen)
        chols = torch.eye(dim).repeat(k, 1, 1) * (0.5 + torch.rand(k, 1, 1, generator=gen))

        def state(t: int) -> dict[str, Any]:
            end = layout.offsets[t] + sizes[t]
            return {"means": means[:end], "chols": chols[:end], "task_sizes": sizes[: t + 1]}
    elif name == "NCM + k-means":
        hparams = {"normalize": True}
        prototypes = torch.randn(k, dim, generator=gen)

        def state(t: int) -> dict[str, Any]:
            end = layout.offsets[t] + sizes[t]
            return {"prototypes": prototypes[:end], "task_sizes": sizes[: t + 1]}
    else:
        raise SystemExit(f"{name}: pick Baseline, Gaussian per class or NCM + k-means")
    return METHODS.get(name)(dim, 0, **hparams), state


def time_evaluation(name: str, dataset: str, steps: int, dim: int, reread: bool,
                    seed: int = 0) -> tuple[float, float, int, Any]:
    """Wall and CPU seconds of every step's `evaluate` of one generated run, the val passes it made, and what it
    gave."""
    from bench.splits.layout import TaskLayout
    from bench.features.views import FeatureViews
    from bench.protocol.class_incd import ClassIncrementalSteps
    from bench.protocol.feeding import Feed, FeatureInputs

    gen = torch.Generator().manual_seed(seed)
    classes = CLASSES[dataset]
    layout = TaskLayout.contiguous(classes, steps)
    per_class_val = max(1, sum(mapping_images(dataset, steps)) // classes)
    per_class_test = max(1, (EVAL[dataset] - HELD_OUT.get(dataset, 0)) // classes)
    val_labels = np.repeat(np.arange(classes), per_class_val)
    test_labels = np.repeat(np.arange(classes), per_class_test)

    def features(n: int) -> FeatureViews:
        return FeatureViews(torch.randn(n, dim, generator=gen), torch.empty(n, 0, dim))

    val, test = features(len(val_labels)), features(len(test_labels))
    cpu = torch.device("cpu")
    feed = Feed(FeatureInputs(features=(val, val, test), device=cpu), val, layout.task_of(val_labels), seed, cpu,
                steps, False)
    passes = [0]
    batches = feed.batches

    def counted(split: str, index: np.ndarray) -> Any:
        passes[0] += split == "val"
        return batches(split, index)

    feed.batches = counted  # type: ignore[method-assign]
    parts = SimpleNamespace(layout=layout, val_images=SimpleNamespace(labels=val_labels),
                            data=SimpleNamespace(test=SimpleNamespace(labels=test_labels)))
    stages = ClassIncrementalSteps(SimpleNamespace(n_steps=steps), parts, feed)
    method, state = generated_method(name, layout, dim, gen)
    if reread:  # as a method that declares nothing
        method.runs_on = replace(type(method).runs_on, frozen_task_heads=False)
    stored: dict[str, np.ndarray] = {}
    rows, wall, cpu = [], 0.0, 0.0
    with torch.no_grad():
        for t in range(steps):
            method.load_state_dict(state(t))  # what step t learnt: the heads of tasks 0..t
            step = stages.step(t, stored)  # what the method was told; not timed
            start, start_cpu = time.perf_counter(), time.process_time()
            rows += stages.evaluate(t, step, method, stored)
            wall, cpu = wall + time.perf_counter() - start, cpu + time.process_time() - start_cpu
    return wall, cpu, passes[0], (rows, stored)


def time_pass(name: str, dim: int, repeat: int, images: int = 10000) -> float:
    """Seconds of one task head's pass over `images` mapping images' features (task 0 of a C100 5-step run;
    its argmax, as the evaluation takes it), the best of `repeat`."""
    from bench.splits.layout import TaskLayout

    gen = torch.Generator().manual_seed(0)
    method, state = generated_method(name, TaskLayout.contiguous(100, 5), dim, gen)
    method.load_state_dict(state(4))
    x = torch.randn(images, dim, generator=gen)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        method.task_logits(x, 0).argmax(1)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="C100", choices=list(CLASSES))
    parser.add_argument("--dim", type=int, default=768, help="feature channels (ViT-B/16: 768)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    parser.add_argument("--pass-only", action="store_true", help="time one head's pass only, not a run's evaluate")
    parser.add_argument("--methods", nargs="+", default=["Baseline", "NCM + k-means"],
                        help="Baseline, NCM + k-means or Gaussian per class (slow at D = 768: give it a smaller --dim)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    passes_table()
    if args.pass_only:
        return print_passes(args)
    print(f"\nevaluate over a generated {args.dataset} run (D = {args.dim}, {torch.get_num_threads()} thread(s)), "
          f"best of {args.repeat}")
    print(f"{'':28} {'passes':>11}   {'wall (best)':>25}   {'CPU (best)':>25}")
    print(f"{'method':20} {'split':7} {'re-read':>6} {'reuse':>4}   {'re-read':>9} {'reuse':>8} {'saved':>6}   "
          f"{'re-read':>9} {'reuse':>8} {'saved':>6}")
    for name in args.methods:
        for steps in (2, 5):
            runs: dict[bool, list[Any]] = {True: [], False: []}
            for _ in range(args.repeat):  # the two interleaved, so that a busy spell of the machine hits both
                for reread in (True, False):
                    runs[reread].append(time_evaluation(name, args.dataset, steps, args.dim, reread))
            timed = {reread: (min(r[0] for r in done), min(r[1] for r in done), done[0][2], done[0][3])
                     for reread, done in runs.items()}
            (rows_a, stored_a), (rows_b, stored_b) = timed[True][3], timed[False][3]
            same = rows_a == rows_b and stored_a.keys() == stored_b.keys() and all(
                np.array_equal(stored_a[k], stored_b[k]) for k in stored_a)
            if not same:
                raise SystemExit(f"{name} {steps}-step: reusing the answers gave other rows or predictions")
            (before, cpu_before, n_before), (after, cpu_after, n_after) = timed[True][:3], timed[False][:3]
            print(f"{name:20} {steps}-step {n_before:>6} {n_after:>4}   {before:>8.2f}s {after:>7.2f}s "
                  f"{100 * (1 - after / before):>5.0f}%   {cpu_before:>8.2f}s {cpu_after:>7.2f}s "
                  f"{100 * (1 - cpu_after / cpu_before):>5.0f}%")
    print("(rows and stored predictions identical both ways)")
    print_passes(args)


def print_passes(args: argparse.Namespace) -> None:
    for name in args.methods:
        print(f"{name} (D = {args.dim}): one task head's pass over 10,000 mapping images "
              f"{time_pass(name, args.dim, args.repeat):.3f}s")


if __name__ == "__main__":
    main()

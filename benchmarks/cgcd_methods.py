"""Time per step of the mixed setting's methods that train the last block (continual SimGCD, Happy, Happy++, PromptCCD,
MetaGCD)
beside the frozen-feature baselines, and what the cost model prices their CIFAR-100 run at.

    python benchmarks/cgcd_methods.py [--recipe smoke|vitb16] [--images 4] [--tokens live|bank] [--throughput 7600]

- `smoke`: the cgcd-smoke grid's recipe (tiny generated images, a tiny random ViT, its epochs), each method's
  wall-clock per step (its `learn`), the mean over the 6 steps of happy-5-stage.
- `vitb16`: DINO ViT-B/16's architecture (random weights: the timing does not depend on them) at 224 px on this
  machine's CPU, `--images` training images a class, batch 8, one epoch a step: a few batches per step. The
  feature bank and token bank are built before the clock starts (as a grid shares them).
- The GPU hours of one CIFAR-100 run (`happy-5-stage`; PromptCCD `promptccd-3-stage`) at `--throughput` full
  ViT-B/16 forwards a second (default the cost model's 7600, measured on an H200): `bench.execution.cost.priced`,
  the very number `bench run --dry-run` prints for that run (`mixed_units`: the methods' epochs on the
  protocol's step sizes, the trained block's forward and backward, the frozen prefix with `--tokens live`).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.execution.cost import THROUGHPUT, priced  # noqa: E402

METHODS = ["NCM + k-means", "Gaussian per class", "SimGCD (continual)", "Happy", "Happy++", "PromptCCD", "MetaGCD"]
TRAINED = ("SimGCD (continual)", "Happy", "Happy++", "PromptCCD", "MetaGCD")
SIZES: list[int] = []  # the training images of each step timed (the last method's)


def hours(method: str, tokens: str = "bank", throughput: float = THROUGHPUT) -> float:
    """The cost model's GPU hours of one CIFAR-100 run of `method` (its banks excluded, counted once per dataset),
    the frozen prefix read from the token bank or (`live`) run on every view."""
    split = "promptccd-3-stage" if method == "PromptCCD" else "happy-5-stage"
    seconds = priced(method, "cifar100", split, options={"features.tokens": tokens}, throughput=throughput)
    assert seconds is not None  # CIFAR-100's size is known
    return seconds / 3600


def time_stages(method: str, recipe: str, images: int, work: Path, tokens: str = "live") -> list[float]:
    """Seconds of each step's `learn`, for one run of `method` under `recipe`."""
    from bench.config.grids import expand, load_grid
    from bench.methods.base import Method
    from bench.protocol.runner import execute
    from bench.registries import METHODS as REGISTRY

    grid = load_grid("cgcd-smoke")
    options = {}
    if recipe == "vitb16":
        options = {"dataset.image_size": 224, "dataset.train_per_class": images, "dataset.test_per_class": 2,
                   "backbone.kwargs": {}}
        if method in TRAINED:  # the real projector, batch 8, one epoch
            options.update({"method.batch_size": 8, "method.epochs": 1, "method.proj_hidden_dim": 2048,
                            "method.proj_dim": 256})
        if method in ("SimGCD (continual)", "Happy", "Happy++"):
            options["method.labelled_epochs"] = 1
        if method == "MetaGCD":  # one offline epoch, one meta-task of two pseudo sessions, one inner epoch and step
            options.update({"method.offline_epochs": 1, "method.offline_batch_size": 8, "method.meta_tasks": 1,
                            "method.pseudo_sessions": 2, "method.inner_epochs": 1, "method.outer_steps": 1,
                            "method.meta_batch_size": 8})
    backbone = "dino-vitb16" if recipe == "vitb16" else grid.backbones[0]
    if method in TRAINED:
        options["features.tokens"] = tokens  # the token bank is built before `learn`: not timed
    specs = expand(grid, methods=[method], splits=["happy-5-stage"], backbones=[backbone],
                   options={"backbone.pretrained": False, **options} if recipe == "vitb16" else options)
    cls: type[Method] = REGISTRY.get(method)
    real, spent = cls.learn, []

    def timed(self, step):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        real(self, step)
        spent.append(time.perf_counter() - start)
        SIZES.append(len(step.tokens) if step.tokens is not None else len(step.train.plain))

    cls.learn = timed
    try:
        execute(specs[0], work)
    finally:
        cls.learn = real
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", choices=("smoke", "vitb16"), default="smoke")
    parser.add_argument("--images", type=int, default=4, help="training images a class (vitb16)")
    parser.add_argument("--throughput", type=float, default=THROUGHPUT, help="ViT-B/16 full forwards a second")
    parser.add_argument("--methods", nargs="+", default=METHODS)
    parser.add_argument("--tokens", choices=("live", "bank"), default="live",
                        help="where the methods that train the last block read their tokens (features.tokens)")
    args = parser.parse_args()
    print(f"{'method':<20} {'s/step (labelled)':>19} {'s/step (mean of the rest)':>27} {'GPU h, CIFAR-100':>18}  images")
    for method in args.methods:
        work = Path(tempfile.mkdtemp(prefix="bench-cgcd-"))
        try:
            spent = time_stages(method, args.recipe, args.images, work, args.tokens)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rest = sum(spent[1:]) / max(len(spent) - 1, 1)
        cost = hours(method, args.tokens, args.throughput)
        print(f"{method:<20} {spent[0]:>19.2f} {rest:>27.2f} {cost:>18.2f}  {'/'.join(map(str, SIZES))}")
        SIZES.clear()


if __name__ == "__main__":
    main()

"""A run's GPU time before it runs: the cost model that plans packed SLURM tasks (`bench.execution.packing`) and
prices a grid in `bench run --dry-run` (`bench.execution.plan`). A model, not a measurement.

The unit is one transformer block's forward pass on one image of ViT-B/16 at 224; its twelve blocks cost the
same, so a full forward is `DEPTH` units, and a trained block's backward twice its forward. Units become
seconds through `THROUGHPUT`, full ViT-B/16 forwards a second in bf16, and other backbones scale by their time
against ViT-B/16 (`BACKBONE_COST`). Measured on an NVIDIA H200 (docs/performance.md#measured-on-a-gpu):
`benchmarks/gpu_throughput.py` gives 8719 bare forwards a second, a full forward 12.8 block forwards and a
trained block's backward 2.08 times its forward (the premises above); `benchmarks/feature_bank.py` gives 7632
images a second through bench's extraction, preprocessing included, which is the rate used.

- A method on frozen features trains heads on the feature bank: next to no GPU time (`FLOOR_S`, the run's
  start, bank load and heads). The bank itself (V + 1 full forwards of every training image and one of
  every evaluation image) is built once per dataset and backbone and shared: `bank_seconds`.
- A method that trains the last blocks reads the token bank and runs only those blocks each epoch; the paper's
  methods by the counts of `benchmarks/cost_model.py` (which imports them from here), any other method on
  tokens as `epochs` (its `method.epochs`, else 100) passes of two views through its trained blocks.
"""
from __future__ import annotations

from typing import Any, Sequence

from bench.config.spec import RunSpec

DEPTH = 12  # ViT-B/16's blocks: a full forward in units
VIEWS = 8  # the feature bank's stored views per training image (`features.views`' paper default)
THROUGHPUT = 7600.0  # ViT-B/16 images a second through bench's extraction in bf16, measured on an H200 (7632)
FLOOR_S = 60.0  # a run on the feature bank: the stack's start, the bank read, the heads' epochs
# training images per task of each split (the paper's appendix) and evaluation images (test, plus CUB's and
# Herbarium's held-out val, 20% of the official training images)
TASKS = {
    "cifar10": {2: [25000] * 2, 5: [10000] * 5},
    "cifar100": {2: [25000] * 2, 5: [10000] * 5},
    "tinyimagenet": {2: [50000] * 2, 5: [20000] * 5},
    "cub200": {2: [2400] * 2, 5: [959] * 5},
    "herbarium19": {2: [14500, 16300], 5: [6300, 5400, 6100, 6800, 6300]},
}
EVAL = {"cifar10": 10000, "cifar100": 10000, "tinyimagenet": 10000, "cub200": 5794 + 1199, "herbarium19": 2700 + 3415}
# the training images of datasets the paper does not use (the mixed setting's, the demos'), cut evenly
TRAIN = {"imagenet100": 128000, "aircraft": 6667, "cars": 8144, "digits": 1437, "synthetic": 600}
# a full bf16 forward's time against ViT-B/16's at 224: measured on the H200 for DINOv2-B/14 (1.47), DINOv3-B/16
# (1.90: its rotary embedding costs time its FLOPs do not show) and CLIP-L/14 (4.27), and given to their variants
# with 4 registers (1% more tokens); the others by forward FLOPs (published model cards). A backbone not listed
# counts as ViT-B/16.
BACKBONE_COST = {"dino-vitb16": 1.0, "sup21k-vitb16": 1.0, "dinov3-vitb16": 1.9, "clip-vitb16": 1.0,
                 "dino-resnet50": 0.23, "dinov2-vits14": 0.31, "dinov2-vits14-reg4": 0.31, "dinov2-vitb14": 1.47,
                 "dinov2-vitb14-reg4": 1.47, "dinov2-vitl14": 4.4, "dinov2-vitl14-reg4": 4.4, "clip-vitl14": 4.27,
                 "pixels": 0.0}
ON_FEATURES = ("K-means", "Baseline", "Baseline++", "Joint (frozen)")


def units(method: str, sizes: Sequence[int], *, epochs: int = 100, full: float = DEPTH) -> float:
    """Block-forward units of one run in bench with its steps' training images `sizes`, the banks excluded
    (`bank_units`); `epochs` for a method on tokens the paper does not have."""
    n, t = sum(sizes), len(sizes)
    seen = sum(sum(sizes[: s + 1]) for s in range(t))
    later = n - sizes[0]
    if method in ON_FEATURES:
        return 0.0  # heads on stored features
    if method == "Joint (unfrozen)":  # stage 2's teachers label each stored view once per step
        return 200 * 2 * n * 3 + 100 * 2 * seen * 3 + VIEWS * seen * 1
    if method in ("EwC", "LwF", "DER"):
        extra = {"EwC": 0, "LwF": 1, "DER": 1 + 2}[method]  # DER replays stored views of its buffer's images
        return 100 * 2 * n * 1 + 100 * 2 * n * 3 + 100 * 2 * later * extra
    if method == "ResTune":  # the trained blocks and branches; the prefix ends before block 10
        return 100 * 2 * n * (2 + t / 2) + 100 * 2 * n * 3 * (2 + t / 2) + 100 * later * (2 + t / 2)
    if method == "FRoST":
        return 200 * 2 * n * 3 + 200 * later * 1
    if method == "CaSSLe":  # asymmetric views are drawn fresh through the prefix
        return 100 * 2 * n * (full + 2 + 1) + 100 * 2 * later * 1 + 200 * 2 * n * 1
    return epochs * 2 * n * 3  # another method on tokens: one trained block, forward and backward, two views


def bank_units(dataset: str, full: float = DEPTH) -> float:
    """Units to build a paper dataset's banks: the feature bank and the token banks at prefix depths 11 and 10."""
    n, ev = sum(TASKS[dataset][2]), EVAL[dataset]
    return (n * (VIEWS + 1) + ev) * (full + full * 11 / DEPTH + full * 10 / DEPTH)


def sizes_of(dataset: str, n_steps: int) -> list[int] | None:
    """Training images per step of `dataset` cut into `n_steps` (None where bench does not know its size)."""
    if dataset in TASKS and n_steps in TASKS[dataset]:
        return list(TASKS[dataset][n_steps])
    total = sum(TASKS[dataset][2]) if dataset in TASKS else TRAIN.get(dataset)
    return None if total is None else [total // n_steps] * n_steps


def run_seconds(spec: RunSpec, throughput: float = THROUGHPUT) -> float | None:
    """The GPU seconds one run is modelled to take (its share of the banks excluded), at `throughput`; None
    where its dataset's size is unknown."""
    sizes = sizes_of(spec.dataset, spec.n_steps)
    if sizes is None:
        return None
    from bench.registries.catalogue import method_info  # what methods declare, without importing them (torch)

    info = method_info(spec.method)
    if info is None or info.inputs == "features":
        return FLOOR_S
    epochs = int((spec.config.get("method") or {}).get("epochs", 100) or 100)
    scale = BACKBONE_COST.get(spec.backbone, 1.0)
    return FLOOR_S + units(spec.method, sizes, epochs=epochs) * scale / (throughput * DEPTH)


def bank_seconds(specs: Sequence[Any], throughput: float = THROUGHPUT) -> float:
    """The GPU seconds of the banks `specs` read, each (dataset, backbone) once; datasets the paper does not
    use count as a feature bank of their training images."""
    total = 0.0
    for dataset, backbone in sorted({(s.dataset, s.backbone) for s in specs}):
        scale = BACKBONE_COST.get(backbone, 1.0)
        if dataset in TASKS:
            total += bank_units(dataset) * scale / (throughput * DEPTH)
        elif dataset in TRAIN:
            total += TRAIN[dataset] * (VIEWS + 1) * DEPTH * scale / (throughput * DEPTH)
    return total

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
- The mixed setting's methods that train the last block (`mixed_units`: continual SimGCD, Happy, PromptCCD) by
  their own epochs on their protocol's steps (`mixed_sizes`), with `features.tokens` as the run sets it: `live`
  runs the 11 frozen blocks on every view, `bank` reads their tokens. VB-CGCD, on the feature bank, adds its
  Adam steps (`adam_seconds`).

This module is the one cost per method: `bench run --dry-run` prints it per run and per method
(`bench.execution.plan`), and docs/performance.md's table of it is checked against it (tests/test_cost.py).
"""
from __future__ import annotations

import functools
import json
from typing import Any, Mapping, Sequence

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
# the mixed setting's methods that train the last block, priced by `mixed_units`
MIXED_TAILS = ("SimGCD (continual)", "Happy", "Happy++", "PromptCCD", "MetaGCD")
# VB-CGCD: one Adam step of its Gaussians' fit (methods/vb_cgcd.py), measured by benchmarks/vb_cgcd_speed.py on
# one CPU thread at the cgcd-demo grid's 64 dimensions (docs/performance.md#vb-cgcds-fit); not measured on a GPU
# nor at ViT-B/16's 384 PCA dimensions, where a step decomposes larger matrices: a lower bound there
ADAM_STEP_S = 0.002


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


def mixed_units(method: str, sizes: Sequence[int], method_cfg: Mapping[str, Any], tokens: str) -> float:
    """Block-forward units of one mixed run of a method in `MIXED_TAILS` whose steps train on `sizes` images (the
    labelled step first), the banks excluded: two views an image an epoch, each through the frozen 11 blocks where
    `tokens` is `live` (none on the token bank), the trained block's forward and backward (3) and:
    MetaGCD, its offline epochs and its meta-tasks' inner epochs over the pseudo sessions;
    Happy, the previous step's block on them after the labelled step (feature distillation); PromptCCD, its query
    (a full forward) and the prompted pass from `prompt_from` on, its prompts entering at block 0 (the whole ViT
    runs on every view, bank or not)."""
    labelled, later = sizes[0], sum(sizes[1:])
    prefix, trained = (DEPTH - 1 if tokens == "live" else 0), 1 + 2
    if method == "SimGCD (continual)":
        return 2 * (method_cfg["labelled_epochs"] * labelled + method_cfg["epochs"] * later) * (prefix + trained)
    if method in ("Happy", "Happy++"):  # Happy++: Happy's passes (its switches add no forward of a block)
        return 2 * (method_cfg["labelled_epochs"] * labelled * (prefix + trained)
                    + method_cfg["epochs"] * later * (prefix + trained + 1))
    if method == "PromptCCD":
        plain, prompted = DEPTH - 1 + trained, DEPTH + DEPTH - 1 + trained
        first = min(method_cfg["prompt_from"], method_cfg["epochs"])
        return 2 * sum(first * n * plain + (method_cfg["epochs"] - first) * n * prompted for n in sizes)
    if method == "MetaGCD":  # offline epochs, then each meta-task's pseudo sessions' inner epochs (outer batches: few)
        c = method_cfg
        sessions = c["pseudo_sessions"]
        seen = labelled * ((1 - c["pseudo_old_ratio"]) * c["pseudo_novel_share"] * (sessions + 1) / 2
                           + c["pseudo_old_ratio"] * c["pseudo_old_held"])  # images of one meta-task's sessions
        return 2 * (c["offline_epochs"] * labelled + c["meta_tasks"] * c["inner_epochs"] * seen
                    + c["epochs"] * later) * (prefix + trained)
    raise ValueError(f"no mixed-setting count for {method!r}")


def adam_seconds(method: str, n_steps: int, method_cfg: Mapping[str, Any]) -> float:
    """VB-CGCD's Adam steps at `ADAM_STEP_S` each: `svi_iters` for the first step's fit, then two fits a step (the
    new classes, then their refit on the images no known class explains), as many if no early stop ends them; 0
    for another method."""
    if method != "VB-CGCD":
        return 0.0
    return ADAM_STEP_S * int(method_cfg["svi_iters"]) * (2 * n_steps - 1)


def mixed_sizes(dataset: str, config: Mapping[str, Any]) -> list[int] | None:
    """The training images of each step of a mixed run (the labelled step's labelled images, then each unlabelled
    step's), its protocol applied to the dataset's training images shared evenly among its classes; None where
    bench does not know the dataset's size."""
    total = sum(TASKS[dataset][2]) if dataset in TASKS else TRAIN.get(dataset)
    if total is None:
        return None
    return list(_mixed_sizes(dataset, total, json.dumps(config["setting"], sort_keys=True),
                             json.dumps(config.get("dataset") or {}, sort_keys=True)))


@functools.lru_cache(maxsize=None)
def _mixed_sizes(dataset: str, total: int, setting: str, options: str) -> tuple[int, ...]:
    import numpy as np

    from bench.data import declared_num_classes
    from bench.splits.manifests import labelled_count
    from bench.splits.settings import protocol_for

    classes = declared_num_classes(dataset, json.loads(options)) or 1
    labels = np.repeat(np.arange(classes), total // classes)
    protocol = protocol_for(json.loads(setting), classes, labels)
    labelled = sum(int(n) for n in labelled_count(protocol, labels.tolist()).values())
    return (labelled, *(sum(int(n) for n in step.values()) for step in protocol.steps))


def run_seconds(spec: RunSpec, throughput: float = THROUGHPUT) -> float | None:
    """The GPU seconds one run is modelled to take (its share of the banks excluded), at `throughput`; None
    where its dataset's size is unknown."""
    mixed = (spec.config.get("setting") or {}).get("name") == "mixed"
    sizes = mixed_sizes(spec.dataset, spec.config) if mixed else sizes_of(spec.dataset, spec.n_steps)
    if sizes is None:
        return None
    from bench.registries.catalogue import method_info  # what methods declare, without importing them (torch)

    method_cfg = spec.config.get("method") or {}
    info = method_info(spec.method)
    if info is None or info.inputs == "features":
        return FLOOR_S + adam_seconds(spec.method, spec.n_steps, method_cfg)
    scale = BACKBONE_COST.get(spec.backbone, 1.0)
    if mixed and spec.method in MIXED_TAILS:
        tokens = (spec.config.get("features") or {}).get("tokens", "live")
        return FLOOR_S + mixed_units(spec.method, sizes, method_cfg, tokens) * scale / (throughput * DEPTH)
    epochs = int(method_cfg.get("epochs", 100) or 100)
    return FLOOR_S + units(spec.method, sizes, epochs=epochs) * scale / (throughput * DEPTH)


def priced(method: str, dataset: str, split: str, *, backbone: str = "dino-vitb16",
           options: Mapping[str, Any] | None = None, throughput: float = THROUGHPUT) -> float | None:
    """`run_seconds` of the run of `method` (its default preset) on `dataset` and `split`, seed 0, as a grid
    expands it with `options` (`--cfg-options`): the runs docs/performance.md prices."""
    from bench.config.grids import Block, Grid, expand

    grid = Grid("priced", (Block((method,), (dataset,), (split,), (backbone,)),), (0,), {})
    (spec,) = expand(grid, options=options)
    return run_seconds(spec, throughput)


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

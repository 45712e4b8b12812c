"""GPU-hours of the paper's full grid, the authors' protocol against bench's banks, and the memory of
the banks per dataset.

    python benchmarks/cost_model.py [--throughput 7600] [--measure]

The grid: the eleven methods (each at one epoch count per step: 200 for the heads, 100 + 100 for EwC,
LwF and DER; DER's own scripts, its `code` default, run 35 to 80 + the same, so its share here is an
upper bound; Baseline's shorter later steps are left out), five datasets, two splits, three
seeds, DINO ViT-B/16 at 224. The unit of cost is one transformer block's forward pass on one image;
ViT-B/16's blocks are identical, so a full forward is 12 units (patch embedding and head are left
out), and a trained block's backward costs twice its forward.

- The authors' protocol: every epoch pushes two fresh views of every image of the step through the
  whole ViT (also for the frozen-backbone methods), plus the teachers' forwards.
- bench (`features.tokens=bank` for the image-trained methods): the frozen-backbone methods train on the feature bank (V + 1 full forwards per training
  image and one per evaluation image, once per dataset and shared by every method and seed; the heads'
  epochs cost nothing against that); the methods that train the last blocks read the token bank
  (the prefix once per stored view) and run only the trained blocks every epoch, teachers included.

Units become GPU-hours through a ViT-B/16 throughput in full forwards per second (`--throughput`; by default
the cost model's, `bench.execution.cost.THROUGHPUT`: 7600 img/s, bench's bf16 extraction measured on an H200;
`benchmarks/gpu_throughput.py` measures it, and the two premises, on another GPU). `--measure` checks the
"every block costs the same" premise on this machine: a 12-block ViT's full forward against one block's
forward on its tokens.
"""
from __future__ import annotations

import argparse
import time

from bench.execution import cost

DEPTH, VIEWS = cost.DEPTH, cost.VIEWS
TOKENS, DIM = 197, 768  # ViT-B/16 at 224: 14 × 14 patches and the class token; 768 channels
SEEDS = 3
SHORT = {"C10": "cifar10", "C100": "cifar100", "T200": "tinyimagenet", "B200": "cub200", "H683": "herbarium19"}
# training images per task of each split and evaluation images: bench's own table (bench.execution.cost)
TASKS = {short: cost.TASKS[name] for short, name in SHORT.items()}
EVAL = {short: cost.EVAL[name] for short, name in SHORT.items()}


def authors(method: str, sizes: list[int], full: float = DEPTH) -> float:
    """Block-forward units of one run under the authors' protocol; `full`: a whole ViT's forward in units."""
    n, t = sum(sizes), len(sizes)
    seen = sum(sum(sizes[: s + 1]) for s in range(t))  # images of tasks <= s, summed over steps
    later = n - sizes[0]  # images of steps >= 1
    if method == "K-means":
        return n * full
    if method == "Baseline":
        return 200 * 2 * n * full
    if method == "Baseline++":
        return 200 * 2 * n * full + 200 * 2 * later * full
    if method == "Joint (frozen)":
        return 200 * 2 * n * full + 100 * 2 * seen * full
    if method == "Joint (unfrozen)":  # Baseline heads; step 1 per step; step 2 on every seen step, teachers labelling
        return 200 * 2 * n * full + 200 * 2 * n * (full + 2) + 100 * 2 * seen * (full + 2 + 1)
    if method in ("EwC", "LwF", "DER"):
        # LwF: the teacher's block; DER: a replayed batch, re-augmented through the whole ViT, and the
        # trained block's backward on it
        extra = {"EwC": 0, "LwF": 1, "DER": full + 2}[method]
        return 100 * 2 * n * full + 100 * 2 * n * (full + 2) + 100 * 2 * later * extra
    if method == "ResTune":  # two trained base blocks and the branches (about one per step) on two views
        return 100 * 2 * n * (full + t / 2) + 100 * 2 * n * (full + 2 * (2 + t / 2)) + 100 * later * (full + t / 2)
    if method == "FRoST":  # one step; the previous backbone on view 1
        return 200 * 2 * n * (full + 2) + 200 * later * full
    if method == "CaSSLe":  # BYOL: online and EMA target on two views, the frozen teacher; then the head
        return 100 * 2 * n * (full + 2 + full) + 100 * 2 * later * full + 200 * 2 * n * full
    raise ValueError(method)


def bench(method: str, sizes: list[int], full: float = DEPTH) -> float:
    """Block-forward units of one run in bench, the banks excluded (they are counted once per dataset):
    `bench.execution.cost.units`, the same counts `bench run --dry-run` prices runs with."""
    return cost.units(method, sizes, full=full)


METHODS = ["Baseline", "Baseline++", "K-means", "Joint (frozen)", "Joint (unfrozen)", "EwC", "LwF", "DER",
           "ResTune", "FRoST", "CaSSLe"]
TAIL = ["Joint (unfrozen)", "EwC", "LwF", "DER", "ResTune", "FRoST"]  # read a token bank (CaSSLe: not its SSL step)


def banks(dataset: str, full: float = DEPTH) -> tuple[float, float, float]:
    """Units to build a dataset's banks (feature bank, token banks at prefix depths 11 and 10) and their bytes."""
    n, ev = sum(TASKS[dataset][2]), EVAL[dataset]
    return cost.bank_units(SHORT[dataset], full), (n * (VIEWS + 1) + ev) * DIM * 2, (n * (VIEWS + 1) + ev) * TOKENS * DIM * 2


def measure() -> float:
    """A whole 12-block ViT's forward in units of one block's forward, timed on this machine."""
    import torch
    import timm

    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, depth=DEPTH, img_size=64,
                              embed_dim=192, num_heads=3).eval()
    x = torch.randn(32, 3, 64, 64)
    with torch.no_grad():
        tokens = model.patch_embed(x)
        tokens = model._pos_embed(tokens)
        seconds = {}
        for fn, name in ((lambda: model(x), "full forward"), (lambda: model.blocks[-1](tokens), "one block")):
            fn()
            start = time.perf_counter()
            for _ in range(5):
                fn()
            seconds[name] = (time.perf_counter() - start) / 5
            print(f"  {name:<13} {seconds[name] * 1000:7.1f} ms per batch of 32")
    ratio = seconds["full forward"] / seconds["one block"]
    print(f"  a full forward costs {ratio:.1f} blocks (the model assumes {DEPTH}); the estimate below uses {ratio:.1f}")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--throughput", type=float, default=cost.THROUGHPUT, help="ViT-B/16 full forwards per second")
    parser.add_argument("--measure", action="store_true")
    args = parser.parse_args()
    full = float(DEPTH)
    if args.measure:
        print("Block cost premise, a 12-block ViT on this machine:")
        full = measure()
    hours = 1 / (args.throughput * full) / 3600  # GPU-hours per unit: `throughput` full forwards a second
    print(f"The paper's full grid: {len(METHODS)} methods × 5 datasets × 2 splits × {SEEDS} seeds, ViT-B/16 at 224, "
          f"{args.throughput:.0f} img/s\n")
    print(f"{'method':<18}{'authors GPU-h':>15}{'bench GPU-h':>14}{'ratio':>8}")
    total_a = total_b = 0.0
    for method in METHODS:
        a = sum(authors(method, sizes, full) for d in TASKS for sizes in TASKS[d].values()) * SEEDS * hours
        b = sum(bench(method, sizes, full) for d in TASKS for sizes in TASKS[d].values()) * SEEDS * hours
        total_a, total_b = total_a + a, total_b + b
        ratio = f"{a / b:8.1f}" if b >= 0.05 else f"{'bank only':>12}"
        print(f"{method:<18}{a:15.1f}{b:14.1f}{ratio}")
    bank_units = sum(banks(d, full)[0] for d in TASKS)
    print(f"{'banks (once)':<18}{'':>15}{bank_units * hours:14.1f}")
    total_b += bank_units * hours
    print(f"{'total':<18}{total_a:15.1f}{total_b:14.1f}{total_a / total_b:8.1f}\n")
    print(f"Bank sizes per dataset (V = {VIEWS}, fp16; token banks for a prefix ending before block 11; ResTune's, before "
          f"block 10, is as large again):")
    for d in TASKS:
        _, feature, tokens = banks(d)
        print(f"  {d:<5} feature bank {feature / 2**30:6.2f} GiB   token bank {tokens / 2**30:8.1f} GiB")


if __name__ == "__main__":
    main()

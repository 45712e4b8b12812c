"""How accuracy moves with the token bank's V against fresh views, on a backbone that learned something.

    python benchmarks/views_vs_exact.py [--methods "Joint (unfrozen)" EwC] [--views 2 4 8] [--seeds 0 1 2]

A randomly initialised ViT (what `benchmarks/token_bank.py` times) leaves A at chance, so it says
nothing about whether training the last block for many epochs on V fixed views overfits them. This
script first pre-trains a small ViT with labels on generated images of `--pretrain-classes` classes
(templates drawn with another seed: classes disjoint from the ones discovered later, as ImageNet's
are from the benchmarks' novel classes), saves it as a timm `.pth` file, and then runs each method
2-step on a harder generated dataset with that backbone (`--lr` for the fine-tuning methods: the
presets' 0.1 makes their last block collapse on this small ViT): `features.tokens=live` (fresh views
through the prefix every epoch, the paper's protocol) and the token bank at each V. It prints A (mean ± std
over the seeds, and each seed's paired difference to live), and the wall time per run. The same
backbone's frozen features give the Baseline row, for scale.

What it can show is bounded by what runs on a CPU: a 4-block ViT at 16 px and tens of epochs, not
ViT-B/16 with DINO weights at 224 px for 200. Its numbers are evidence for this regime only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import timm  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from smoke_run import timed_run  # noqa: E402

from bench.data import build_dataset  # noqa: E402


def vit_kwargs(args: argparse.Namespace) -> dict:
    return {"img_size": args.image_size, "patch_size": args.patch_size, "embed_dim": args.embed_dim,
            "depth": args.depth, "num_heads": args.heads}


def target_options(args: argparse.Namespace) -> dict:
    return {"num_classes": 10, "image_size": args.image_size, "train_per_class": args.per_class,
            "test_per_class": 20, "noise": args.noise, "seed": 0}


def pretrain(args: argparse.Namespace, path: Path) -> float:
    """A ViT trained with labels on `--pretrain-classes` generated classes (template seed 1); returns
    its test accuracy there."""
    data = build_dataset("synthetic", {"num_classes": args.pretrain_classes, "image_size": args.image_size,
                                       "train_per_class": 60, "test_per_class": 10, "noise": args.pretrain_noise,
                                       "seed": 1})
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", num_classes=args.pretrain_classes, **vit_kwargs(args))
    mean, std = torch.tensor(data.mean).view(1, -1, 1, 1), torch.tensor(data.std).view(1, -1, 1, 1)

    def tensor(images: np.ndarray) -> torch.Tensor:
        return (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255 - mean) / std

    x, y = tensor(data.train.images), torch.from_numpy(data.train.labels)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    steps = args.pretrain_epochs * -(-len(x) // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=steps)
    gen = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(args.pretrain_epochs):
        for batch in torch.randperm(len(x), generator=gen).split(128):
            shift = torch.randint(-2, 3, (2,), generator=gen).tolist()
            xb = torch.roll(x[batch], shifts=shift, dims=(2, 3))
            if torch.rand((), generator=gen) < 0.5:
                xb = xb.flip(3)
            loss = F.cross_entropy(model(xb), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(tensor(data.test.images)).argmax(1) == torch.from_numpy(data.test.labels)).float().mean()
    torch.save(model.state_dict(), path)
    return 100 * float(accuracy)


def run(method: str, seed: int, tokens: str, views: int, args: argparse.Namespace, weights: Path,
        results: Path) -> tuple[float, float]:
    epochs = {"EwC": {"method.warmup_epochs": args.epochs, "method.epochs": args.epochs, "method.batch_size": 64},
              "Joint (unfrozen)": {"method.stage1_epochs": args.epochs, "method.stage2_epochs": args.epochs,
                                   "method.stage1_batch_size": 64, "method.stage2_batch_size": 64},
              "Baseline": {"method.epochs": args.epochs, "method.batch_size": 64}}
    options = {"backbone.kwargs": vit_kwargs(args), "backbone.pretrained": str(weights), "features.tokens": tokens,
               "features.views": views, **{f"dataset.{k}": v for k, v in target_options(args).items()},
               **epochs.get(method, {}), **({"method.lr": args.lr} if method != "Baseline" else {})}
    location = {"device": args.device, "cache_dir": str(results.parent / "cache")}  # banks shared by the runs
    return timed_run(method, seed, "timm:vit_tiny_patch16_224", options, location, results)


def spread(values: list[float]) -> float:
    """The sample standard deviation (0 for one seed)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["Joint (unfrozen)", "EwC"])
    parser.add_argument("--views", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=60, help="epochs of each step of the methods")
    parser.add_argument("--pretrain-epochs", type=int, default=60)
    parser.add_argument("--pretrain-classes", type=int, default=64)
    parser.add_argument("--per-class", type=int, default=60, help="training images per class of the target data")
    parser.add_argument("--noise", type=float, default=0.8, help="the target images' noise (harder when larger)")
    parser.add_argument("--pretrain-noise", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=0.01,
                        help="the fine-tuning methods' learning rate (the presets' 0.1 collapses this small ViT)")
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--patch-size", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(min(torch.get_num_threads(), len(os.sched_getaffinity(0))))
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "pretrained.pth"
        start = time.perf_counter()
        accuracy = pretrain(args, weights)
        print(f"pre-trained ViT: depth {args.depth}, {args.embed_dim}-d, {args.image_size} px / patch {args.patch_size}, "
              f"{args.pretrain_classes} classes (template seed 1), test accuracy {accuracy:.1f}% "
              f"({time.perf_counter() - start:.0f} s)")
        print(f"target: 10 generated classes (template seed 0), {args.per_class} training images each, noise "
              f"{args.noise}; 2-step; {args.epochs} epochs per step, lr {args.lr}; seeds {args.seeds}; {args.device}")
        baseline = [run("Baseline", seed, "live", 2, args, weights, Path(tmp) / f"baseline{seed}") for seed in args.seeds]
        print(f"\nBaseline (frozen backbone, its preset's learning rate): A {statistics.mean(a for _, a in baseline):5.1f} ± "
              f"{spread([a for _, a in baseline]):.1f}")
        for method in args.methods:
            print(f"\n{method}")
            live: list[float] = []
            for tokens, views in [("live", 2)] + [("bank", v) for v in args.views]:
                results = [run(method, seed, tokens, views, args, weights, Path(tmp) / f"{method}-{tokens}{views}-{seed}")
                           for seed in args.seeds]
                accs = [a for _, a in results]
                live = live or accs
                diffs = " ".join(f"{a - b:+5.1f}" for a, b in zip(accs, live))
                name = "live (exact views)" if tokens == "live" else f"token bank V={views}"
                print(f"  {name:<20} A {statistics.mean(accs):5.1f} ± {spread(accs):4.1f}   per seed "
                      f"{' '.join(f'{a:5.1f}' for a in accs)}   − live {diffs}   "
                      f"{statistics.mean(s for s, _ in results):6.1f} s per run")


if __name__ == "__main__":
    main()

"""Speed of the frozen-backbone path, measured side by side in one process.

    python benchmarks/feature_bank.py [--epochs 200] [--device cpu|cuda]

1. Baseline end to end on a synthetic image dataset with a small timm ViT: `exact` mode (fresh
   augmented views through the backbone every epoch, as the paper) vs `bank` mode (V stored views,
   the bank built inside the timed run), with the accuracy of each and the ratio.
2. Head training on stored features (the Baseline inner loop) vs the full-batch floor: the same
   epochs, one batch holding everything, no shuffling, no view sampling.
3. Feature extraction (preprocessing + backbone, `bench.features.views.extract`) vs the same model's plain
   forward pass on already-prepared tensors, in images/s.
4. With CUDA: the same extraction comparison for ViT-B/16 (random weights) at 224 in bf16.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench.data.preprocess import prepare, to_tensor  # noqa: E402
from bench.features.backbones import build_backbone  # noqa: E402
from bench.data import build_dataset  # noqa: E402
from bench.features.views import Encoder, FeatureViews, extract  # noqa: E402
from bench.methods.blocks import CosineHead, swapped_prediction_loss, train_head_swapped  # noqa: E402
from bench.methods.loop import cosine_lr  # noqa: E402
from smoke_run import timed_run  # noqa: E402

TINY_VIT = "timm:vit_tiny_patch16_224"
TINY_KWARGS = {"img_size": 32, "patch_size": 8, "embed_dim": 64, "depth": 2, "num_heads": 2}
DATA = {"num_classes": 10, "image_size": 32, "train_per_class": 40, "test_per_class": 20}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def end_to_end(epochs: int, device: str) -> None:
    options = {"method.epochs": epochs, "method.batch_size": 256, "backbone.pretrained": False, "backbone.kwargs": TINY_KWARGS,
               **{f"dataset.{k}": v for k, v in DATA.items()}}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("exact", "bank"):
            results[mode] = timed_run("Baseline", 0, TINY_VIT, {**options, "features.mode": mode},
                                      {"device": device}, Path(tmp) / mode)
            print(f"  {mode:<5}: {results[mode][0]:7.2f} s   A = {results[mode][1]:.1f}")
    print(f"bank vs exact: {results['exact'][0] / results['bank'][0]:.1f}x "
          f"(Baseline, {epochs} epochs, 2-step, {DATA['num_classes'] * DATA['train_per_class']} train images)")


def head_training(epochs: int, device: str) -> None:
    n, dim, views, k = 10_000, 768, 8, 20
    gen = torch.Generator().manual_seed(0)
    data = FeatureViews(torch.randn(n, dim, generator=gen).to(device),
                        torch.randn(n, views, dim, generator=gen).half().to(device))
    hp = dict(lr=0.1, momentum=0.9, weight_decay=1e-4, eta_min=1e-4, temperature=0.1, sk_epsilon=0.05, sk_iters=3,
              swap_reduction="mean")

    def ours():
        head = CosineHead(dim, k).to(device)
        train_head_swapped(head, data, hp, epochs=epochs, batch_size=256, gen=torch.Generator().manual_seed(1))

    def floor():  # one full batch, no shuffle, no view sampling: the least work the same epochs can be
        head = CosineHead(dim, k).to(device)
        opt = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        x1, x2 = data.views[:, 0].float(), data.views[:, 1].float()
        for epoch in range(epochs):
            opt.param_groups[0]["lr"] = cosine_lr(epoch, epochs, 0.1, 1e-4)
            head.renormalize()
            loss = swapped_prediction_loss(head(x1), head(x2), 0.1, 0.05, 3, reduction="mean")
            opt.zero_grad()
            loss.backward()
            opt.step()

    t_ours, t_floor = timed(ours)[1], timed(floor)[1]
    print(f"  batch 256, stored views: {t_ours:6.2f} s   full-batch floor: {t_floor:6.2f} s")
    print(f"head training vs floor: {t_ours / t_floor:.2f}x ({n} features of dim {dim}, {epochs} epochs)")


def extraction(model: str, kwargs: dict, size: int, n: int, device: str, bf16: bool) -> None:
    data = build_dataset("synthetic", {"num_classes": 10, "image_size": size, "train_per_class": n // 10,
                                       "test_per_class": 1})
    backbone = build_backbone(model, {"pretrained": False, "kwargs": kwargs}, data.train.images[0].shape).to(device)
    encoder = Encoder(backbone, data, device)
    batch = 256
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else torch.autocast("cpu", enabled=False)
    prepared = [prepare(to_tensor(data.train.images[i: i + batch]), input_size=backbone.input_size,
                        channels=backbone.channels, mean=data.mean, std=data.std).to(device)
                for i in range(0, len(data.train), batch)]

    def plain_forward():
        with torch.no_grad(), ctx:
            for x in prepared:
                backbone(x)
        if device == "cuda":
            torch.cuda.synchronize()

    def ours():
        with ctx:
            extract(encoder, data.train, views=0, seed=0, batch_size=batch)
        if device == "cuda":
            torch.cuda.synchronize()

    plain_forward(), ours()  # warm-up
    # best of 3, alternating, so that both see the same machine state
    t_plain, t_ours = float("inf"), float("inf")
    for _ in range(3):
        t_plain = min(t_plain, timed(plain_forward)[1])
        t_ours = min(t_ours, timed(ours)[1])
    n = len(data.train)
    print(f"  {model} at {backbone.input_size}px{' bf16' if bf16 else ''}: extract {n / t_ours:8.0f} img/s, "
          f"plain forward {n / t_plain:8.0f} img/s")
    print(f"extraction vs plain forward: {t_ours / t_plain:.2f}x the time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    print(f"device {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("1. Baseline end to end, exact vs bank")
    end_to_end(args.epochs, args.device)
    print("2. Head training on stored features")
    head_training(args.epochs, args.device)
    print("3. Feature extraction, tiny ViT")
    extraction(TINY_VIT, TINY_KWARGS, 32, 4000, args.device, bf16=False)
    if args.device == "cuda":
        print("4. Feature extraction, ViT-B/16 at 224, bf16")
        extraction("timm:vit_base_patch16_224", {}, 224, 4096, "cuda", bf16=True)


if __name__ == "__main__":
    main()

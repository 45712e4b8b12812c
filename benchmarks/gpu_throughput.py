"""What the cost model (bench.execution.cost) assumes, measured on this machine's accelerator: a backbone's full
forward in images/s (fp32 and bf16 autocast, as bench's feature and token banks run it), and one trained last
block on the prefix's tokens, forward and forward + backward (bf16 autocast, as the tails run by default).

    python benchmarks/gpu_throughput.py [--device cuda] [--batch 256] [--seconds 4]
                                        [--backbones dino-vitb16 dinov2-vitb14 dinov3-vitb16 clip-vitl14]

Random weights (`backbone.pretrained=False`): throughput does not depend on the values. Each number is the
median of timed batches after warm-up, with the device synchronised around each. Printed per backbone:

- `full fp32`, `full bf16`: images/s of the whole backbone, no grad (the banks' extraction);
- `block fwd`, `block fwd+bwd`: images/s of one trainable copy of the last block on the prefix's tokens;
- `full / block`: a full forward in units of one block's forward (the model takes it as the block count);
- `bwd / fwd`: a trained block's backward against its forward (the model takes 2);
- `vs ViT-B/16`: the full bf16 forward's cost against dino-vitb16's (the model's `BACKBONE_COST`);
- peak memory of each measurement.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Callable

import torch

from bench.execution import cost
from bench.features.backbones import build_backbone
from bench.features.tokens import Prefix, rotary, run_block, vit_of
from bench.features.precision import autocast_for


def timed(fn: Callable[[], object], device: torch.device, seconds: float) -> tuple[float, float]:
    """Median seconds of one call of `fn` (after two warm-up calls) over about `seconds`, and the peak memory
    (GiB) it reached on a CUDA device (0 elsewhere)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(2):
        fn()
    sync()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return statistics.median(times), peak


def measure(name: str, device: torch.device, batch: int, size: int, seconds: float) -> dict[str, float]:
    """The images/s and peak memory of backbone `name` (random weights) on `batch` images of `size` px: its full
    forward without grad in fp32 and bf16, and a trainable copy of its last block on the prefix's tokens in bf16,
    forward (recording autograd, as a trained block runs) and forward + backward."""
    backbone = build_backbone(name, {"pretrained": False}, (3, size, size)).to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    out: dict[str, float] = {}
    with torch.no_grad():
        for precision in ("fp32", "bf16"):
            def full() -> object:
                with autocast_for(device, precision):  # noqa: B023 (timed within this iteration)
                    return backbone(x)
            s, peak = timed(full, device, seconds)
            out[f"full {precision}"], out[f"full {precision} GiB"] = batch / s, peak
    model = vit_of(backbone)
    last = len(model.blocks) - 1
    tokens = Prefix(backbone, last)(x).detach()
    rope = rotary(model, tokens)
    block = copy.deepcopy(model.blocks[last]).requires_grad_(True)

    def forward() -> torch.Tensor:
        with autocast_for(device, "bf16"):
            return run_block(model, last, block, tokens, rope)

    def forward_backward() -> object:
        forward()[:, 0].float().square().mean().backward()
        block.zero_grad(set_to_none=True)
        return None

    s, out["block fwd GiB"] = timed(forward, device, seconds)
    out["block fwd"] = batch / s
    s, out["block fwd+bwd GiB"] = timed(forward_backward, device, seconds)
    out["block fwd+bwd"] = batch / s
    out["full / block"] = out["block fwd"] / out["full bf16"]
    out["bwd / fwd"] = out["block fwd"] / out["block fwd+bwd"] - 1  # (t_fwd+bwd - t_fwd) / t_fwd
    out["blocks"] = float(len(model.blocks))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--backbones", nargs="+", default=["dino-vitb16", "dinov2-vitb14", "dinov3-vitb16", "clip-vitl14"])
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as written: bench sets no TF32
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"device: {name}; torch {torch.__version__}; batch {args.batch} at {args.size} px; "
          f"median of timed batches over {args.seconds:g} s each")
    rows = {}
    for name in args.backbones:
        try:
            rows[name] = measure(name, device, args.batch, args.size, args.seconds)
        except Exception as err:  # one backbone this environment cannot build does not lose the others' numbers
            print(f"{name}: not measured: {type(err).__name__}: {err}")
    base = rows.get("dino-vitb16", {}).get("full bf16")
    print(f"\n{'backbone':<16} {'blocks':>6} {'full fp32':>10} {'full bf16':>10} {'block fwd':>10} "
          f"{'fwd+bwd':>10} {'full/block':>10} {'bwd/fwd':>8} {'vs B/16':>8} {'model':>6}   peak GiB (fp32, bf16, fwd, fwd+bwd)")
    for name, r in rows.items():
        versus = base / r["full bf16"] if base else float("nan")
        print(f"{name:<16} {r['blocks']:>6.0f} {r['full fp32']:>10.0f} {r['full bf16']:>10.0f} {r['block fwd']:>10.0f} "
              f"{r['block fwd+bwd']:>10.0f} {r['full / block']:>10.1f} {r['bwd / fwd']:>8.2f} {versus:>8.2f} "
              f"{cost.BACKBONE_COST.get(name, 1.0):>6.2f}   {r['full fp32 GiB']:.1f}, {r['full bf16 GiB']:.1f}, "
              f"{r['block fwd GiB']:.1f}, {r['block fwd+bwd GiB']:.1f}")
    if base:
        print(f"\nViT-B/16 full forwards a second in bf16: {base:.0f} measured; the cost model uses "
              f"{cost.THROUGHPUT:.0f}")


if __name__ == "__main__":
    main()

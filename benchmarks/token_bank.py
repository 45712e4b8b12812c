"""The token bank against live prefix tokens, side by side in one run.

    python benchmarks/token_bank.py [--methods EwC LwF DER "Joint (unfrozen)"] [--depth 12] [--views 2 4 8] [--seeds 0 1 2]

For each method, on generated images with a randomly initialised ViT of `--depth` blocks (the last
trains, the others are the frozen prefix): wall time and final A of the run with fresh views through
the prefix every epoch (`features.tokens=live`, the paper's protocol) and with the token bank at
each V (`features.tokens=bank`, the bank built inside the timed run, in a fresh cache; with
`--prebuilt`, built before the clock starts, as in a grid where one bank serves every method and
seed), the speed-up, and A's mean ± std over the seeds. `--read-ahead both` adds each V without the
background read of the next batch. On a GPU (`--device cuda`) the same with ViT-B/16 at 224 in bf16
is `--model vit_base_patch16_224 --image-size 224 --embed-dim 768`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from smoke_run import stage_options, timed_run  # noqa: E402


def run(method: str, seed: int, tokens: str, views: int, args: argparse.Namespace, results: Path,
        read_ahead: bool | None = None) -> tuple[float, float]:
    kwargs = {"img_size": args.image_size, "patch_size": args.patch_size, "embed_dim": args.embed_dim,
              "depth": args.depth, "num_heads": args.heads}
    options = {"backbone.kwargs": kwargs, "backbone.pretrained": False, "features.tokens": tokens,
               "features.views": views, "dataset.num_classes": 10, "dataset.image_size": args.image_size,
               "dataset.train_per_class": args.per_class, "dataset.test_per_class": 10,
               **stage_options(method, args.epochs)}
    location = {"device": args.device, "cache_dir": str(results / "cache"),
                **({} if read_ahead is None else {"read_ahead": read_ahead})}
    return timed_run(method, seed, f"timm:{args.model}", options, location, results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["EwC", "Joint (unfrozen)"])
    parser.add_argument("--views", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--per-class", type=int, default=40)
    parser.add_argument("--model", default="vit_tiny_patch16_224")
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--patch-size", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prebuilt", action="store_true", help="build each bank before timing the runs")
    parser.add_argument("--read-ahead", choices=["default", "on", "off", "both"], default="default",
                        help="read the next batch's stored views in a background thread (default: on a GPU only; "
                             "both: a row for each)")
    args = parser.parse_args()
    timed = ["EwC", "LwF", "DER", "Joint (unfrozen)"]
    if unknown := [m for m in args.methods if m not in timed]:
        parser.error(f"--methods: this benchmark sets the steps of {', '.join(timed)}; got {', '.join(unknown)}")
    print(f"{args.model} depth {args.depth}, {args.image_size} px, {args.epochs} epochs per step, 10 classes × "
          f"{args.per_class} images, seeds {args.seeds}, {args.device}, "
          f"{'banks built before timing' if args.prebuilt else 'banks built in the timed runs'}")
    for method in args.methods:
        rows = []
        ahead = {"default": [None], "on": [True], "off": [False], "both": [True, False]}[args.read_ahead]
        for tokens, views, read_ahead in [("live", 2, None)] + [("bank", v, r) for v in args.views for r in ahead]:
            times, accs = [], []
            with tempfile.TemporaryDirectory() as shared:
                if args.prebuilt:  # a run of another seed builds the banks (they do not depend on the run seed)
                    run(method, 999, tokens, views, args, Path(shared), read_ahead)
                for seed in args.seeds:
                    with tempfile.TemporaryDirectory() as tmp:  # a fresh cache unless prebuilt
                        results = Path(tmp)
                        if args.prebuilt:
                            (results / "cache").symlink_to(Path(shared) / "cache")
                        seconds, a = run(method, seed, tokens, views, args, results, read_ahead)
                    times.append(seconds)
                    accs.append(a)
            name = ("live (exact views)" if tokens == "live" else f"token bank V={views}"
                    + {None: "", True: ", read-ahead", False: ", no read-ahead"}[read_ahead])
            rows.append((name,
                         statistics.mean(times), statistics.mean(accs), statistics.stdev(accs) if len(accs) > 1 else 0.0))
        live = rows[0][1]
        print(f"\n{method}")
        for name, seconds, mean, std in rows:
            print(f"  {name:<34} {seconds:6.2f} s per run  {live / seconds:5.2f}x   A {mean:5.1f} ± {std:.1f}")


if __name__ == "__main__":
    main()

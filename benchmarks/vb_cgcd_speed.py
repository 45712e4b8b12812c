"""VB-CGCD's Adam fit, the per-class loop with autograd (its form before issue 51) against the
closed-form gradients over every class at once (methods/vb_cgcd.py `nll_and_grad`), side by side on the same
input in one process: the seconds of each and their ratio, and the largest difference of what they return.

    python benchmarks/vb_cgcd_speed.py [--runs happy-5-stage promptccd-3-stage] [--iters 1000] [--repeat 3]

- `fit`: `fit_gaussians` on scikit-learn's digits (8×8 pixels, PCA to 64 components as the cgcd-demo grid's
  runs do), the labelled step's fit (classes 0-4, 1000 Adam steps of 128 images, no early stop) and a fit with
  the early stop on (checked from step 334 on, a line it never crosses: it is priced at every step); each form
  `--repeat` times, interleaved, the least time kept.
- `--runs`: whole runs of the cgcd-demo grid (VB-CGCD, seed 0, K known), once with the loop form patched in
  and once as shipped: the seconds of each run and whether their metrics agree.

Both forms run in float64 on one CPU thread; seconds are CPU seconds of this process (`time.process_time`),
which a machine shared with other work disturbs less than the wall clock (printed beside them).
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench.methods.vb_cgcd as vb  # noqa: E402
from bench.methods.vb_cgcd import STOP_AFTER, learning_rate, symmetric  # noqa: E402


# -- the loop form: methods/vb_cgcd.py before the change, verbatim but for the names --

def loop_batch_nll(z: torch.Tensor, labels: torch.Tensor, means: torch.Tensor, covs: torch.Tensor) -> torch.Tensor:
    present = torch.unique(labels)
    chols, info = torch.linalg.cholesky_ex(symmetric(covs[present]))
    if bool(info.any()):
        return z.new_tensor(math.nan)
    total = z.new_zeros(())
    for j, c in enumerate(present.tolist()):
        part = labels == c
        y = torch.linalg.solve_triangular(chols[j], (z[part] - means[c]).T, upper=False)
        total = total + 0.5 * y.square().sum() + int(part.sum()) * chols[j].diagonal().log().sum()
    return total + len(z) * 0.5 * z.shape[1] * math.log(2 * math.pi)


def loop_fit_gaussians(z: torch.Tensor, labels: torch.Tensor, n_classes: int, *, iters: int, lr: float,
                       batch_size: int, gen: torch.Generator, stop: Callable[[torch.Tensor], bool] | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    n, d = z.shape
    means = torch.zeros(n_classes, d, dtype=z.dtype, device=z.device, requires_grad=True)
    covs = torch.eye(d, dtype=z.dtype, device=z.device).repeat(n_classes, 1, 1).requires_grad_(True)
    opt = torch.optim.Adam([means, covs], lr=lr, betas=(0.9, 0.999), eps=1e-8)
    batch = min(batch_size, n)
    previous, losses = None, []
    for t in range(iters):
        if stop is not None and previous is not None and t > STOP_AFTER * iters and stop(covs.detach()):
            means.data, covs.data = previous
            break
        previous = (means.detach().clone(), covs.detach().clone())
        rows = torch.randperm(n, generator=gen)[:batch].to(z.device) if batch < n else torch.arange(n, device=z.device)
        loss = loop_batch_nll(z[rows], labels[rows], means, covs) * (n / batch)
        if not torch.isfinite(loss):
            break
        for group in opt.param_groups:
            group["lr"] = learning_rate(t, lr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return means.detach(), covs.detach(), losses


def slogdet_log_mean_det(covs: torch.Tensor) -> float:
    sign, logabs = torch.linalg.slogdet(symmetric(covs))
    if len(covs) == 0 or bool((sign <= 0).any()):
        return math.nan
    return float(torch.logsumexp(logabs, 0)) - math.log(len(covs))


@contextmanager
def loop_form() -> Iterator[None]:
    """VB-CGCD with the loop form's fit and log-determinant patched in."""
    real = vb.fit_gaussians, vb.log_mean_det
    vb.fit_gaussians, vb.log_mean_det = loop_fit_gaussians, slogdet_log_mean_det  # type: ignore[assignment]
    try:
        yield
    finally:
        vb.fit_gaussians, vb.log_mean_det = real


def clocked(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float, float]:
    """fn(*args, **kwargs)'s result, CPU seconds and wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.process_time() - cpu, time.perf_counter() - wall


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float64)
    mean, axes = vb.pca_fit(x, 64)
    return (x - mean) @ axes, torch.tensor(y)


def time_fits(iters: int, repeat: int) -> None:
    z, y = digits()
    labelled = y < 5
    cases = {"labelled step, 5 classes": None, "with the early stop": vb.covariance_stop(-1e9, 2.0)}
    print(f"{'fit (digits, 64 dims)':<26} {'loop CPU s':>10} {'closed CPU s':>12} {'ratio':>6}"
          f" {'loop wall':>9} {'closed wall':>11}  largest relative difference (means, covs, losses)")
    for name, stop in cases.items():
        kwargs = dict(iters=iters, lr=4e-6, batch_size=128, stop=stop)
        best: dict[str, tuple[float, float]] = {}
        for _ in range(repeat):  # interleaved; the least CPU time of each form
            for form, fit in (("loop", loop_fit_gaussians), ("closed", vb.fit_gaussians)):
                out, cpu, wall = clocked(fit, z[labelled], y[labelled], 5, gen=torch.Generator().manual_seed(0),
                                         **kwargs)
                best[form] = min(best.get(form, (cpu, wall)), (cpu, wall))
                if form == "loop":
                    m0, c0, l0 = out
                else:
                    m1, c1, l1 = out
        assert len(l0) == len(l1)
        diff = [float(((a - b).abs().max() / b.abs().max())) for a, b in ((m1, m0), (c1, c0))]
        diff.append(max(abs(a - b) / abs(b) for a, b in zip(l1, l0)))
        (cpu0, wall0), (cpu1, wall1) = best["loop"], best["closed"]
        print(f"{name:<26} {cpu0:>10.2f} {cpu1:>12.2f} {cpu0 / cpu1:>6.1f} {wall0:>9.2f} {wall1:>11.2f}  "
              + ", ".join(f"{d:.1e}" for d in diff))


def time_runs(splits: list[str]) -> None:
    import pandas as pd

    from bench.config.grids import expand, load_grid
    from bench.protocol.runner import execute

    print(f"\n{'cgcd-demo run (VB-CGCD, seed 0)':<34} {'loop CPU s':>10} {'closed CPU s':>12} {'ratio':>6}"
          f" {'loop wall':>9} {'closed wall':>11}  metrics")
    for split in splits:
        spec = expand(load_grid("cgcd-demo"), methods=["VB-CGCD"], seeds=[0], splits=[split])[0]  # K known
        frames = []
        for form in ("loop", "closed"):
            work = Path(tempfile.mkdtemp(prefix="bench-vbcgcd-"))
            try:
                if form == "loop":
                    with loop_form():
                        out, cpu, wall = clocked(execute, spec, work)
                else:
                    out, cpu, wall = clocked(execute, spec, work)
                frames.append((pd.read_parquet(Path(str(out)) / "metrics.parquet"), cpu, wall))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        (a, cpu0, wall0), (b, cpu1, wall1) = frames
        same = a["value"].fillna(-1).round(9).equals(b["value"].fillna(-1).round(9))
        print(f"{split:<34} {cpu0:>10.2f} {cpu1:>12.2f} {cpu0 / cpu1:>6.1f} {wall0:>9.2f} {wall1:>11.2f}  "
              f"{'equal' if same else 'DIFFER'} ({len(a)} rows)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=1000, help="Adam steps of each fit")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each fit, interleaved (the least time kept)")
    parser.add_argument("--runs", nargs="*", default=[], metavar="SPLIT",
                        help="also time whole cgcd-demo runs on these splits (happy-5-stage, promptccd-3-stage)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    time_fits(args.iters, args.repeat)
    if args.runs:
        time_runs(args.runs)


if __name__ == "__main__":
    main()

"""VB-CGCD: bench's port (methods/vb_cgcd.py) against the authors' JAX/numpyro classifier on the same input.

    python benchmarks/vb_cgcd_reference.py --reference-python /tmp/vbref/bin/python --reference-repo DIR
        [--lr 4e-6 1e-3] [--iters 1000] [--dim 8]

DIR is a checkout of github daihao42/VB-CGCD (its `classifier/mngmm.py` is imported from there, never copied);
the reference Python has its stack (jax, numpyro, optax). The script generates Gaussian blobs (a labelled step
of 3 classes, then a step of a few images of each known class and many of 2 new ones, with given pseudo-labels
so that neither side clusters), runs the reference's `MNGMMClassifier.train` for both steps in a subprocess and
bench's `VBCGCD.learn` here, both with PCA as the identity and full batches (so that no draw differs), and prints
the largest differences: means and covariances after each step, each round's losses and step count, which images
round 2 keeps, and the log-likelihoods and predictions on held-out images. The reference computes in float32,
the port in float64; the port's round 0 is also run in float32 (`fit_gaussians` on float32 features).

The reference imports tensorboard, prettytable and sklearn.decomposition, which play no part in its numbers:
the subprocess stubs them (its writer stub records the scalars, which hold each step's loss).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

BASE, NEW, FUTURE = 3, 2, 2  # classes of the labelled step, new classes of step 1, classes after it


def blobs(dim: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(BASE + NEW, dim))
    scales = [0.6, 0.8, 1.0, 0.7, 0.9]

    def draw(counts: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
        x = np.concatenate([centres[c] + scales[c] * rng.normal(size=(n, dim)) for c, n in counts.items()])
        y = np.concatenate([np.full(n, c) for c, n in counts.items()])
        order = rng.permutation(len(y))
        return x[order], y[order]

    x0, y0 = draw({c: 60 for c in range(BASE)})
    x1, y1 = draw({0: 15, 1: 15, 2: 15, 3: 60, 4: 60})
    pseudo1 = np.where(y1 >= BASE, y1, rng.integers(BASE, BASE + NEW, size=len(y1)))  # known images: a new id
    xt, yt = draw({c: 20 for c in range(BASE + NEW)})
    return dict(x0=x0, y0=y0, x1=x1, pseudo1=pseudo1, xt=xt, yt=yt)


# -- the reference side (run under the reference's Python) --

def reference(repo: str, data: dict[str, np.ndarray], lr: float, iters: int) -> dict[str, np.ndarray]:
    scalars: list[tuple[str, float, int]] = []

    class Writer:  # records what the reference logs (each step's loss among it)
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def add_scalar(self, tag: str, value: float, step: int) -> None:
            scalars.append((tag, float(value), int(step)))

    for name in ("torch", "torch.utils", "torch.utils.tensorboard", "prettytable", "sklearn", "sklearn.decomposition"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["torch.utils.tensorboard"].SummaryWriter = Writer
    sys.modules["prettytable"].PrettyTable = object
    sys.modules["sklearn.decomposition"].PCA = sys.modules["sklearn.decomposition"].FactorAnalysis = object
    sys.path.insert(0, repo)
    import jax.numpy as jnp
    from classifier.mngmm import MNGMMClassifier

    class Identity:  # the PCA left out: both sides fit on the features as given
        def transform(self, x: np.ndarray) -> np.ndarray:
            return x

    dim = data["x0"].shape[1]
    clf = MNGMMClassifier(num_dim=dim, num_classes=BASE + NEW + FUTURE, with_early_stop=True)
    clf.init_parameters(n_epochs=iters, lr=lr, log_dir="", save_dir="", batch_size=0, increment=NEW, base=BASE)
    clf.pca = Identity()
    rounds: list[dict[str, np.ndarray]] = []
    inference, predict = clf.run_inference, clf._predict

    def full_batch(X, y, *args, **kwargs):  # type: ignore[no-untyped-def]
        clf.batch_size = X.shape[0]  # the plate then takes every image, in order: no subsample to match
        params = inference(X, y, *args, **kwargs)
        rounds.append({k: np.asarray(v) for k, v in params.items()})
        return params

    clf.run_inference = full_batch
    clf.train(data["x0"], data["y0"], data["x0"], data["y0"], current_stage=0)
    after0 = {k: np.asarray(v) for k, v in clf.params.items()}
    clf._set_label_offset(BASE)
    clf.train(data["x1"], data["pseudo1"], data["x1"], data["pseudo1"], current_stage=1)
    kept = np.asarray(predict(jnp.array(data["x1"]), rounds[1])[0]) >= BASE  # what train() filtered with
    _, logp = predict(jnp.array(data["xt"]), clf.params)
    losses = [[v for tag, v, _ in scalars if tag == f"stage_{s}/Loss/train"] for s in ("0_Flearning", "1_Flearning",
                                                                                        "1_Slearning")]
    return dict(means0=after0["class_means"][:BASE], covs0=after0["class_covs"][:BASE],
                means1=np.asarray(clf.params["class_means"])[:BASE + NEW],
                covs1=np.asarray(clf.params["class_covs"])[:BASE + NEW],
                round1_means=rounds[1]["class_means"][BASE:BASE + NEW], kept=kept,
                logp=np.asarray(logp)[:, :BASE + NEW], **{f"loss{i}": np.array(v) for i, v in enumerate(losses)})


# -- bench's side --

def port(data: dict[str, np.ndarray], lr: float, iters: int) -> dict[str, np.ndarray]:
    import torch

    import bench.methods.vb_cgcd as vb
    from bench.config.presets import load_preset
    from bench.features.views import FeatureViews
    from bench.methods.base import Step

    dim = data["x0"].shape[1]
    fits: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[float]]] = []
    fit = vb.fit_gaussians

    def recording(z, labels, n_classes, **kwargs):  # type: ignore[no-untyped-def]
        means, covs, losses = fit(z, labels, n_classes, **kwargs)
        fits.append((z, means, covs, losses))
        return means, covs, losses

    params, _ = load_preset("VB-CGCD", "code")
    params.update(lr=lr, svi_iters=iters, batch_size=10**9)  # full batches
    vb.fit_gaussians = recording
    vb.pca_fit = lambda x, d: (x.new_zeros(x.shape[1]), torch.eye(x.shape[1], dtype=x.dtype))
    vb.cluster = lambda x, k, hp, seed: torch.as_tensor(data["pseudo1"] - BASE)
    method = vb.VBCGCD(dim, 0, **params)
    t = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in data.items() if k.startswith("x")}
    def views(x: torch.Tensor) -> FeatureViews:
        return FeatureViews(x, x.new_empty(len(x), 0, dim))

    method.learn(Step(0, BASE, 0, views(t["x0"]), labels=torch.as_tensor(data["y0"])))
    means0, covs0 = method.means.numpy().copy(), method.covs.numpy().copy()
    method.learn(Step(1, NEW, BASE, views(t["x1"]), last=False))
    z1 = method.reduce(t["x1"])
    kept = (z1[:, None, :] == fits[2][0][None]).all(2).any(1).numpy()  # the rows round 2 was given
    single = fit(t["x0"], torch.as_tensor(data["y0"]), BASE, iters=iters, lr=lr, batch_size=10**9,
                 gen=torch.Generator().manual_seed(0))  # round 0 again in float32
    return dict(means0=means0, covs0=covs0, means1=method.means.numpy(), covs1=method.covs.numpy(),
                round1_means=fits[1][1].numpy(), kept=kept, logp=method.logits(t["xt"]).numpy(),
                loss0=np.array(fits[0][3]), loss1=np.array(fits[1][3]), loss2=np.array(fits[2][3]),
                means0_f32=single[0].numpy(), covs0_f32=single[1].numpy())


def compare(ref: dict[str, np.ndarray], ours: dict[str, np.ndarray]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key in ("means0", "covs0", "round1_means", "means1", "covs1", "logp"):
        a, b = ref[key].astype(np.float64), ours[key].astype(np.float64)
        gap = np.abs(a - b)
        out[key] = dict(max_abs=float(gap.max()), max_rel=float((gap / np.abs(a).clip(1e-12)).max()),
                        scale=float(np.abs(a).max()))
    for key in ("means0", "covs0"):
        a, b = ref[key].astype(np.float64), ours[f"{key}_f32"].astype(np.float64)
        out[f"{key} (port in float32)"] = dict(max_abs=float(np.abs(a - b).max()))
    for i in range(3):
        a, b = ref[f"loss{i}"], ours[f"loss{i}"]
        n = min(len(a), len(b))
        out[f"round {i} losses"] = dict(steps_ref=len(a), steps_port=len(b),
                                        max_rel=float((np.abs(a[:n] - b[:n]) / np.abs(a[:n])).max()))
    out["kept"] = dict(ref=int(ref["kept"].sum()), port=int(ours["kept"].sum()),
                       same=bool((ref["kept"] == ours["kept"]).all()))
    out["predictions agree"] = float((ref["logp"].argmax(1) == ours["logp"].argmax(1)).mean())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-python", required=True)
    parser.add_argument("--reference-repo", required=True)
    parser.add_argument("--lr", type=float, nargs="+", default=[4e-6, 1e-3])
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--side", choices=["both", "reference"], default="both", help=argparse.SUPPRESS)
    parser.add_argument("--io", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "reference":  # the subprocess: read the blobs, write the reference's numbers
        data = dict(np.load(f"{args.io}/data.npz"))
        np.savez(f"{args.io}/reference.npz", **reference(args.reference_repo, data, args.lr[0], args.iters))
        return
    for lr in args.lr:
        data = blobs(args.dim)
        with tempfile.TemporaryDirectory() as io:
            np.savez(f"{io}/data.npz", **data)
            subprocess.run([args.reference_python, str(Path(__file__).resolve()), "--side", "reference", "--io", io,
                            "--reference-python", args.reference_python, "--reference-repo", args.reference_repo,
                            "--lr", str(lr), "--iters", str(args.iters)], check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "TQDM_DISABLE": "1"})  # the reference's progress bars
            ref = dict(np.load(f"{io}/reference.npz"))
        print(json.dumps({"lr": lr, "iters": args.iters, "dim": args.dim, **compare(ref, port(data, lr, args.iters))},
                         indent=1))


if __name__ == "__main__":
    main()

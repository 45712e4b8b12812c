"""MetaGCD: bench's pieces (methods/metagcd_parts.py, methods/gcd_losses.py, the losses of methods/metagcd.py)
against the authors' functions on the same tiny float64 inputs.

    python benchmarks/metagcd_reference.py --checkout DIR [--pin]

DIR is a checkout of github ynanwu/MetaGCD (bench read commit 7a0b1d1): its `models/utils.py` (`SupConLoss`,
`info_nce_logits`, `generate_pseudo_labels`, `meta_update_model`) and `models/vision_transformer.py` (`DINOHead`)
are imported from there, never copied (the repository has no licence file). Each piece is fed the same seeded
inputs on both sides and compared value for value, gradients included where the piece trains; the script prints
the largest absolute difference per piece and exits 1 when one exceeds 1e-10 of the reference's scale (the
neighbour masks must agree exactly). `--pin` also prints the reference's numbers on the inputs that
tests/test_metagcd.py pins.

Two of the code's expressions live inline in its training script (`methods/contrastive_training/
contrastive_learning_based_MAML.py`, all under `if __name__ == "__main__"`, so not importable): the λ-mix of the
contrastive and the (soft) SupCon terms, and the outer loop around `meta_update_model`. The script restates those
few lines around the imported functions. The outer loop as written does not run (`meta_update_model` is called
with five arguments and takes four; `named_parameters() + named_parameters()` adds two generators), so the
reference here is `meta_update_model` itself, called as its signature asks, with the gradient taken at the adapted
parameters: the evident first-order update docs/methods.md#metagcd describes.

Not compared: the pseudo sessions (`data/cifar.py` builds them from CIFAR's files with numpy's global generator;
bench draws its own with a torch one, so no two draws can be equal) and the evaluation (`test_kmeans`, scikit-learn
k-means over the test images, where bench predicts from anchored centroids: a documented difference).

The reference's `project_utils/cluster_and_log_utils.py` imports torch.utils.tensorboard, which needs the
`tensorboard` package; where that is not installed the script stubs `torch.utils.tensorboard` (its SummaryWriter
plays no part in the pieces).
"""
from __future__ import annotations

import argparse
import copy
import sys
import types
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from bench.methods.gcd_losses import NormedHead, Projector, info_nce, supcon
from bench.methods.metagcd import MetaGCD
from bench.methods.metagcd_parts import meta_step, soft_loss, soft_neighbours

TOLERANCE = 1e-10  # of the reference's scale (its largest absolute value), float64
LAMBDA, TAU_C, TAU_S, THRESHOLD = 0.5, 1.0, 0.07, 0.85  # the code's defaults (registries/presets/metagcd.py)


def clustered(gen: torch.Generator, n: int = 10, dim: int = 6, spread: float = 0.25) -> tuple[torch.Tensor, ...]:
    """Two views (n × dim each, unnormalised) of images drawn around three centres, and one image far from every
    other: the soft neighbourhood then has images with neighbours and one without. Labels: each image's centre."""
    centres = torch.randn(3, dim, generator=gen, dtype=torch.float64)
    labels = torch.arange(n) % 3
    base = centres[labels] + spread * torch.randn(n, dim, generator=gen, dtype=torch.float64)
    base[-1] = -4 * centres.sum(0) + torch.randn(dim, generator=gen, dtype=torch.float64)
    x1 = base + 0.1 * torch.randn(n, dim, generator=gen, dtype=torch.float64)
    x2 = base + 0.1 * torch.randn(n, dim, generator=gen, dtype=torch.float64)
    return x1.requires_grad_(), x2.requires_grad_(), labels


def pinned_inputs() -> tuple[torch.Tensor, ...]:
    """The inputs tests/test_metagcd.py pins the reference's numbers on (the test builds them itself)."""
    return clustered(torch.Generator().manual_seed(52))


def value_and_grads(loss: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """The loss followed by its gradient with respect to each input, flattened into one vector."""
    grads = torch.autograd.grad(loss, inputs)
    return torch.cat([loss.detach().reshape(1)] + [g.flatten() for g in grads])


def views(x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return F.normalize(x1, dim=-1), F.normalize(x2, dim=-1)


# -- the reference's side: its functions, and the two inline lines of its training script around them --

class Reference:
    def __init__(self, utils: types.ModuleType, vit: types.ModuleType) -> None:
        self.utils, self.vit = utils, vit
        self.args = types.SimpleNamespace(n_views=2, temperature=TAU_C)

    def info_nce(self, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
        logits, labels = self.utils.info_nce_logits(torch.cat([h1, h2]), self.args, "cpu")
        return F.cross_entropy(logits, labels)

    def supcon(self, h1: torch.Tensor, h2: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.utils.SupConLoss(temperature=TAU_S)(torch.stack([h1, h2], 1), labels=labels, device="cpu")

    def neighbours(self, h1: torch.Tensor, h2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mask, kept, weight = self.utils.generate_pseudo_labels(torch.cat([h1, h2]), k_threshold=THRESHOLD)
        return torch.nonzero(kept).flatten(), mask.bool(), weight

    def soft(self, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor | None:
        mask, kept, weight = self.utils.generate_pseudo_labels(torch.cat([h1, h2]), k_threshold=THRESHOLD)
        if not kept.any():
            return None
        feats = torch.stack([h1[kept], h2[kept]], 1)
        return self.utils.SupConLoss(temperature=TAU_S)(feats, mask=mask, weight=weight, device="cpu")

    def unsupervised(self, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
        """`train_one_epoch(generate_soft_label=True)`'s loss: the contrastive term alone when nobody is kept."""
        con, soft = self.info_nce(h1, h2), self.soft(h1, h2)
        return con if soft is None else (1 - LAMBDA) * con + LAMBDA * soft

    def supervised(self, h1: torch.Tensor, h2: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The outer loop's loss (every image labelled: `mask_lab[:, 0] + 1`)."""
        return (1 - LAMBDA) * self.info_nce(h1, h2) + LAMBDA * self.supcon(h1, h2, labels)


# -- the pieces --

def losses(ref: Reference, gen: torch.Generator) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each loss's value and its gradient with respect to the unnormalised views."""
    x1, x2, labels = clustered(gen)
    stand_in = types.SimpleNamespace(project=lambda v: views(*v), hparams=dict(
        sup_weight=LAMBDA, info_nce_temperature=TAU_C, supcon_temperature=TAU_S, soft_threshold=THRESHOLD))
    soft_ours = soft_loss(*views(x1, x2), THRESHOLD, TAU_S)
    soft_ref = ref.soft(*views(x1, x2))
    assert soft_ours is not None and soft_ref is not None, "the inputs leave no image a neighbour"
    return {
        "info-NCE (info_nce_logits + cross-entropy)": (value_and_grads(ref.info_nce(*views(x1, x2)), x1, x2),
                                                       value_and_grads(info_nce(*views(x1, x2), TAU_C), x1, x2)),
        "SupCon with labels (SupConLoss)": (value_and_grads(ref.supcon(*views(x1, x2), labels), x1, x2),
                                            value_and_grads(supcon(*views(x1, x2), labels, TAU_S), x1, x2)),
        "soft SupCon (SupConLoss with mask and weight)": (value_and_grads(soft_ref, x1, x2),
                                                          value_and_grads(soft_ours, x1, x2)),
        "L_unsup, (1−λ)·con + λ·soft": (value_and_grads(ref.unsupervised(*views(x1, x2)), x1, x2),
                                        value_and_grads(MetaGCD.unsupervised(stand_in, (x1, x2)), x1, x2)),
        "L_sup, (1−λ)·con + λ·SupCon": (value_and_grads(ref.supervised(*views(x1, x2), labels), x1, x2),
                                        value_and_grads(MetaGCD.supervised(stand_in, (x1, x2), labels), x1, x2)),
    }


def neighbourhood(ref: Reference, gen: torch.Generator) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """`generate_pseudo_labels` against `soft_neighbours`: who is kept, the neighbour mask, the attention weights."""
    x1, x2, _ = clustered(gen)
    with torch.no_grad():
        kept, same, weight = ref.neighbours(*views(x1, x2))
        ours = soft_neighbours(*views(x1, x2), THRESHOLD)
    return {"neighbours: kept images (exact)": (kept.double(), ours.kept.double()),
            "neighbours: mask (exact)": (same.double(), ours.same.double()),
            "neighbours: attention weights": (weight, ours.weight)}


def head(ref: Reference, gen: torch.Generator) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """`DINOHead` against `Projector` then `NormedHead` with the same weights: outputs, and the gradients of a
    random projection of them with respect to the input and to the last layer's direction."""
    in_dim, hidden, bottleneck, out = 5, 9, 6, 7
    torch.manual_seed(0)  # DINOHead draws its own initial weights; ours are overwritten by them
    theirs = ref.vit.DINOHead(in_dim, out, nlayers=3, hidden_dim=hidden, bottleneck_dim=bottleneck).double()
    ours = nn.Sequential(Projector(in_dim, hidden, bottleneck), NormedHead(bottleneck, out)).double()
    ours[0].mlp.load_state_dict(theirs.mlp.state_dict())
    with torch.no_grad():
        ours[1].weight.copy_(theirs.last_layer.weight_v)
    x = torch.randn(4, in_dim, generator=gen, dtype=torch.float64, requires_grad=True)
    probe = torch.randn(4, out, generator=gen, dtype=torch.float64)
    a, b = theirs(x), ours(x)
    ga = torch.autograd.grad((a * probe).sum(), [x, theirs.last_layer.weight_v])
    gb = torch.autograd.grad((b * probe).sum(), [x, ours[1].weight])
    return {"DINOHead: output": (a.detach(), b.detach()),
            "DINOHead: gradients (input, last layer)": (torch.cat([g.flatten() for g in ga]),
                                                        torch.cat([g.flatten() for g in gb]))}


def meta(ref: Reference, gen: torch.Generator, outer_steps: int = 3) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The first-order meta-update on a tiny two-layer net: adapt (plain SGD on an inner loss) on the first outer
    step only, as the code's outer loop (it never re-adapts), then `outer_steps` steps of an SGD with momentum and
    weight decay. Reference: the gradient of the outer loss at the adapted parameters, the parameters restored
    (`load_state_dict`, as the code), then `meta_update_model(model, optimizer, loss, gradients)`."""
    x_in, x_out = (torch.randn(8, 4, generator=gen, dtype=torch.float64) for _ in range(2))
    y_out = torch.randn(8, 3, generator=gen, dtype=torch.float64)
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    theirs, ours = net, copy.deepcopy(net)

    def inner(model: nn.Module) -> None:
        opt = torch.optim.SGD(model.parameters(), lr=0.3)
        for _ in range(3):
            opt.zero_grad()
            model(x_in).pow(2).mean().backward()
            opt.step()

    def outer_loss(model: nn.Module) -> torch.Tensor:
        return F.mse_loss(model(x_out), y_out)

    def sgd(model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-2)

    opt_theirs, opt_ours = sgd(theirs), sgd(ours)
    for k in range(outer_steps):
        saved = copy.deepcopy(theirs.state_dict())
        if k == 0:
            inner(theirs)
        names, params = zip(*theirs.named_parameters())
        grads = torch.autograd.grad(outer_loss(theirs), params)
        theirs.load_state_dict(saved)
        ref.utils.meta_update_model(theirs, opt_theirs, outer_loss(theirs), dict(zip(names, grads)))
        adapt: Callable[[], None] = (lambda: inner(ours)) if k == 0 else (lambda: None)
        meta_step(list(ours.parameters()), adapt, lambda: outer_loss(ours), opt_ours)
    flat = [torch.cat([p.detach().flatten() for p in m.parameters()]) for m in (theirs, ours)]
    return {f"meta-update: parameters after {outer_steps} outer steps": (flat[0], flat[1])}


def import_reference(checkout: Path) -> Reference:
    try:
        import torch.utils.tensorboard  # noqa: F401
    except ImportError:  # the tensorboard package is missing: the reference's logging module only needs the name
        stub = types.ModuleType("torch.utils.tensorboard")
        stub.SummaryWriter = object  # type: ignore[attr-defined]
        sys.modules["torch.utils.tensorboard"] = stub
    if not (checkout / "models" / "utils.py").is_file():
        sys.exit(f"{checkout} has no models/utils.py: pass a checkout of github ynanwu/MetaGCD")
    sys.path.insert(0, str(checkout))
    import models.utils as utils
    import models.vision_transformer as vit
    return Reference(utils, vit)


def pin(ref: Reference) -> None:
    """The reference's numbers on `pinned_inputs()`, for tests/test_metagcd.py."""
    x1, x2, labels = pinned_inputs()
    with torch.no_grad():
        h1, h2 = views(x1, x2)
        kept, _, weight = ref.neighbours(h1, h2)
        numbers: dict[str, Any] = {"info_nce": float(ref.info_nce(h1, h2)),
                                   "supcon": float(ref.supcon(h1, h2, labels)),
                                   "soft": float(ref.soft(h1, h2)),  # type: ignore[arg-type]
                                   "unsupervised": float(ref.unsupervised(h1, h2)),
                                   "kept": kept.tolist(), "weight_row0": weight[0].tolist()}
    soft = ref.soft(*views(x1, x2))
    assert soft is not None
    g1, g2 = torch.autograd.grad(soft, (x1, x2))
    numbers.update(soft_grad_x1_row1=g1[1].tolist(), soft_grad_norm=float(torch.cat([g1, g2]).norm()))
    for name, value in numbers.items():
        print(f"{name} = {value!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, required=True, help="a checkout of github ynanwu/MetaGCD")
    parser.add_argument("--pin", action="store_true", help="also print the numbers tests/test_metagcd.py pins")
    args = parser.parse_args()
    ref = import_reference(args.checkout)
    gen = torch.Generator().manual_seed(0)
    rows = {**losses(ref, gen), **neighbourhood(ref, gen), **head(ref, gen), **meta(ref, gen)}
    failed = []
    print(f"{'piece':<58} {'max |bench − reference|':>24} {'scale':>10}")
    for name, (expected, got) in rows.items():
        if expected.shape != got.shape:
            worst, scale = float("inf"), 1.0
        else:
            worst, scale = float((got - expected).abs().max()), float(expected.abs().max())
        limit = 0.0 if "(exact)" in name else TOLERANCE * max(scale, 1e-300)
        ok = worst <= limit
        failed += [] if ok else [name]
        print(f"{name:<58} {worst:>24.3e} {scale:>10.3g}  {'ok' if ok else 'DIFFERS'}")
    if args.pin:
        pin(ref)
    if failed:
        sys.exit(f"differ beyond {TOLERANCE:g} of the reference's scale: {', '.join(failed)}")


if __name__ == "__main__":
    main()

"""Building blocks shared by the methods (docs/methods.md#shared-parts): the cosine-normalised head,
Sinkhorn-Knopp pseudo-labels, the swapped-prediction loss, head training and prototype statistics.
The epoch loop is `methods.loop`'s, the trainable tails `methods.tails`'."""
from __future__ import annotations

from typing import Callable, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from bench.features.views import FeatureViews
from bench.methods.loop import train_epochs


class CosineHead(nn.Module):
    """Linear head without bias on L2-normalised features (docs/methods.md#heads).

    With `normalize_weights` the rows of W are L2-normalised in place before every training forward
    (the authors' `--apply_l2weights`) and at inference, so logits are cosines in [-1, 1]. Without
    it (the "w/o CosNorm" ablation) only the features are normalised.
    """

    def __init__(self, in_dim: int, n_out: int, normalize_weights: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, in_dim))
        nn.init.trunc_normal_(self.weight, std=0.02)
        self.normalize_weights = normalize_weights

    @classmethod
    def from_weight(cls, weight: torch.Tensor, normalize_weights: bool = True) -> "CosineHead":
        """A head holding a copy of `weight` (n_out × in_dim), on its device."""
        head = cls(weight.shape[1], weight.shape[0], normalize_weights).to(weight.device)
        head.weight.data.copy_(weight.detach())
        return head

    @torch.no_grad()
    def renormalize(self) -> None:
        if self.normalize_weights:
            self.weight.copy_(F.normalize(self.weight, dim=1, eps=1e-12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = F.normalize(self.weight, dim=1, eps=1e-12) if (self.normalize_weights and not self.training) else self.weight
        return F.normalize(x, dim=1, eps=1e-12) @ w.t()


@torch.no_grad()
def sinkhorn_knopp(logits: torch.Tensor, epsilon: float = 0.05, n_iters: int = 3) -> torch.Tensor:
    """Soft equal-partition assignments B×K from logits B×K (docs/methods.md#sinkhorn-knopp, the UNO/SwAV variant).

    Rows are first normalised to the uniform class marginal 1/K, then columns to 1/B; the returned
    rows (one per sample) sum to 1.
    """
    # One global max is subtracted, so every entry is exp(<=0) and no infinity can arise.
    q = torch.exp((logits - logits.max()) / epsilon).t()  # K×B
    q /= q.sum()
    k, b = q.shape
    for _ in range(n_iters):
        q /= q.sum(dim=1, keepdim=True)
        q /= k
        q /= q.sum(dim=0, keepdim=True)
        q /= b
    return (q / q.sum(dim=0, keepdim=True)).t()


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over rows of −Σ_k y_k log softmax(l/τ)_k, the log clamped at 1e-8 as in the authors' code."""
    probs = F.softmax(logits / temperature, dim=1)
    return -(targets * torch.log(probs.clamp_min(1e-8))).sum(1).mean()


SWAP_REDUCTIONS = ("sum", "mean")


def swapped_prediction_loss(logits1: torch.Tensor, logits2: torch.Tensor, temperature: float,
                            epsilon: float, n_iters: int, *, reduction: str) -> torch.Tensor:
    """docs/methods.md#swapped-loss: each view is trained towards the Sinkhorn assignment of the other view.

    `sum` is Algorithm 1's ℓ(z₂, y₁) + ℓ(z₁, y₂), each cross-entropy a mean over the B rows of its
    view; `mean` is the authors' code, one mean over the 2B concatenated rows: half the sum, which
    halves the effective learning rate against an unchanged weight decay."""
    if reduction not in SWAP_REDUCTIONS:
        raise ValueError(f"unknown swapped-loss reduction {reduction!r}; choose from {', '.join(SWAP_REDUCTIONS)}")
    t1 = sinkhorn_knopp(logits2.detach(), epsilon, n_iters)
    t2 = sinkhorn_knopp(logits1.detach(), epsilon, n_iters)
    mean = soft_cross_entropy(torch.cat([logits1, logits2]), torch.cat([t1, t2]), temperature)
    return 2 * mean if reduction == "sum" else mean  # both views hold B rows: the sum of their means


class TwoViews(Protocol):
    """Items with two views drawn per index: stored features (`FeatureViews`) or features of fresh views."""

    def __len__(self) -> int: ...

    def two_views(self, index: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]: ...


def train_head_swapped(head: CosineHead, data: FeatureViews | TwoViews, hp: dict, *, epochs: int, batch_size: int,
                       gen: torch.Generator, after_epoch: Callable[[int], None] | None = None) -> list[float]:
    """Train a cosine head with the swapped Sinkhorn loss on two views per item (Baseline's step):
    `hp` holds the optimiser keys (lr, momentum, weight_decay, eta_min) and the loss's (temperature,
    sk_epsilon, sk_iters, swap_reduction). `data` is anything with `two_views` (stored features,
    or features computed now). Returns the mean loss per epoch."""
    def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
        x1, x2 = data.two_views(index[0], gen)
        head.renormalize()
        return swapped_loss(head(x1), head(x2), hp)

    head.train()
    losses = train_epochs(head.parameters(), hp, epochs=epochs, sizes=[len(data)], batch_size=batch_size, gen=gen,
                          loss_of=loss_of, after_epoch=after_epoch)
    head.eval()
    return losses


def train_head_supervised(head: CosineHead, data: FeatureViews, labels: torch.Tensor, hp: dict, *, epochs: int,
                          batch_size: int, gen: torch.Generator,
                          after_epoch: Callable[[int], None] | None = None) -> list[float]:
    """Train a cosine head with the cross-entropy of the given labels (classes 0..C-1 of the head) on two
    views per item: a labelled step of the mixed setting, with the optimiser and temperature of the
    method's swapped-loss training (`train_head_swapped`). Returns the mean loss per epoch."""
    def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
        x1, x2 = data.two_views(index[0], gen)
        y = labels[index[0]].to(x1.device)
        head.renormalize()
        return hard_cross_entropy(head(torch.cat([x1, x2])), torch.cat([y, y]), hp["temperature"])

    head.train()
    losses = train_epochs(head.parameters(), hp, epochs=epochs, sizes=[len(data)], batch_size=batch_size, gen=gen,
                          loss_of=loss_of, after_epoch=after_epoch)
    head.eval()
    return losses


def clustering_scale(hp: dict, heads: int = 1) -> float:
    """How many times the authors' one mean a summed clustering loss is: 1 for `swap_reduction="mean"`;
    2 per head for `sum` (the two views' means added, Eq. 1), e.g. 4 for ResTune's mixed and residual
    heads. The regularisers' weights were tuned against the mean, so a method multiplies its
    not-forgetting terms by this: a weight and the loss it balances are never scaled apart."""
    if hp["swap_reduction"] not in SWAP_REDUCTIONS:
        raise ValueError(f"unknown swapped-loss reduction {hp['swap_reduction']!r}; choose from {', '.join(SWAP_REDUCTIONS)}")
    return 2.0 * heads if hp["swap_reduction"] == "sum" else 1.0


def swapped_loss(logits1: torch.Tensor, logits2: torch.Tensor, hp: dict) -> torch.Tensor:
    """`swapped_prediction_loss` with a method's preset keys."""
    return swapped_prediction_loss(logits1, logits2, hp["temperature"], hp["sk_epsilon"], hp["sk_iters"],
                                   reduction=hp["swap_reduction"])


def hard_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """The authors' "ZP" loss with one-hot targets: −log softmax(l/τ)[y], clamped at 1e-8, averaged."""
    probs = F.softmax(logits / temperature, dim=1)
    return -torch.log(probs.gather(1, targets.view(-1, 1)).clamp_min(1e-8)).mean()


def concatenated_head(heads: list[CosineHead], normalize_weights: bool) -> CosineHead:
    """A unified head whose rows are the given heads' rows in task order (docs/methods.md#heads)."""
    return CosineHead.from_weight(torch.cat([h.weight.detach() for h in heads]), normalize_weights)


class PrototypeStats:
    """Per pseudo-class mean and standard deviation of raw (un-normalised) features (docs/methods.md#prototypes).

    Computed at the end of each step from that step's images and its own frozen task head, then
    kept; old images are never read again. A class that received no sample has no entry; a class
    with one sample gets σ = sqrt(1e-5)."""

    def __init__(self) -> None:
        self.means: dict[int, torch.Tensor] = {}
        self.stds: dict[int, torch.Tensor] = {}
        self.n_classes = 0  # classes covered so far, including those that got no sample

    @torch.no_grad()
    def add_step(self, features: torch.Tensor, pseudo_labels: torch.Tensor, n_classes: int,
                 unbiased: bool = False) -> None:
        """The step's classes' statistics; `unbiased` divides the variance by n − 1 (the authors' code for
        Baseline++ and FRoST, `torch.var`),
        a one-sample class keeping variance 0 either way."""
        for k in pseudo_labels.unique().tolist():
            x = features[pseudo_labels == k].float()
            self.means[k] = x.mean(0).cpu()
            self.stds[k] = torch.sqrt(x.var(0, unbiased=unbiased and len(x) > 1) + 1e-5).cpu()
        self.n_classes += n_classes

    def shared_std(self) -> torch.Tensor:
        """The code's σ̄: the mean of σ over all previous classes, skipped classes counting as zeros."""
        total = torch.stack(list(self.stds.values())).sum(0)
        return total / self.n_classes

    def replay_counts(self, batch: int, per_class: int, gen: torch.Generator) -> dict[int, int]:
        """How many features to replay per stored class for one batch of `batch` images: `per_class`
        each (the code's table), or with 0 as many as the batch holds, spread uniformly over the
        classes (the paper)."""
        classes = sorted(self.means)
        if per_class:
            return {k: int(per_class) for k in classes}
        draws = torch.randint(0, len(classes), (batch,), generator=gen)
        return dict(zip(classes, torch.bincount(draws, minlength=len(classes)).tolist()))

    def sample(self, per_class: dict[int, int], shared_std: bool, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`per_class[k]` features of class k from N(μ_k, diag(σ²)), σ the class's own or the shared σ̄."""
        sigma_bar = self.shared_std() if shared_std else None
        xs, ys = [], []
        for k, n in per_class.items():
            if n == 0 or k not in self.means:
                continue
            sigma = sigma_bar if sigma_bar is not None else self.stds[k]
            noise = torch.randn(n, self.means[k].shape[0], generator=gen)
            xs.append(self.means[k] + noise * sigma)
            ys.append(torch.full((n,), k, dtype=torch.long))
        if not xs:
            dim = next(iter(self.means.values())).shape[0] if self.means else 0
            return torch.empty(0, dim), torch.empty(0, dtype=torch.long)
        return torch.cat(xs), torch.cat(ys)

    def state_dict(self) -> dict:
        return {"means": self.means, "stds": self.stds, "n_classes": self.n_classes}

    def load_state_dict(self, state: dict) -> None:
        self.means, self.stds, self.n_classes = dict(state["means"]), dict(state["stds"]), state["n_classes"]

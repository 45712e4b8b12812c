"""PromptCCD's evaluation and epoch selection in the mixed setting: `setting.evaluation=transductive` and
`setting.selection=promptccd` (Cendra et al., ECCV'24; read from its `models/sskmeans.py`, `tools/trainer.py`,
`data.py:create_dataloader`, `util/eval_util.py` and `models/promptccd_training_w_gmp.py`).

Both cluster the method's representation (its `embed`, `methods.base.Method.embed`), L2-normalised, not its head:

- **transductive evaluation**: step t > 0 is scored on its own (unlabelled) training images. Semi-supervised
  k-means at K = the classes seen so far (what the method was told) clusters the representation of the labelled
  step's images, with their labels, and of step t's images; the accuracy is on step t's images, under one
  Hungarian match over all of them, Old being the labelled classes (PromptCCD's `split_cluster_acc_v2` with its
  `discovered_K`; bench's `cgcd_hard`; `cgcd_soft` too).
- **PromptCCD's selection**: every 10th epoch of a training loop (epochs 0, 10, 20, … counted from 0: its
  `epoch % eval_every_n_epoch == 0`), k-means at K = every class of the protocol over the representation of all
  the protocol's test images, scored by the accuracy on the labelled classes' images under one match over all;
  the kept epoch moves only on a strictly higher score. It reads test labels: a leak, marked.

Semi-supervised k-means (`ss_kmeans`, GCD's, Vaze et al., CVPR'22, as PromptCCD ships it), for each of `n_init`
seedings:

    centres <- the labelled classes' means, then k-means++ over the unlabelled images for the rest (each drawn
               with probability ∝ its squared distance to the nearest centre so far)
    repeat at most max_iter times:
        every unlabelled image goes to its nearest centre; a labelled image stays with its class's centre
        inertia <- Σ squared distances to the assigned centres; the assignment of least inertia is kept
        every centre <- the mean of its images, labelled and unlabelled
                        (one left with no image stays where it was: PromptCCD's mean of nothing is NaN)
        stop once (Σ_k ‖centre_k moved‖)² < tol
    the seeding whose kept assignment has the least inertia wins (the first on a tie)

PromptCCD's constants: 100 seedings, 200 iterations, tol 1e-4. Computed in float64 on the run's device; the draws
come from a seeded CPU generator, so a run gives the same clusters again.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bench.core.distances import squared_distances
from bench.core.numerics import sklearn_seed
from bench.errors import BenchError
from bench.protocol.evaluate import old_new_accuracies
from bench.protocol.feeding import Feed
from bench.protocol.hooks import MethodHooks

SS_KMEANS = {"n_init": 100, "max_iter": 200, "tol": 1e-4}  # PromptCCD's config (`SSKmeans`) and K_Means' defaults
PROMPTCCD_EVERY = 10  # its `eval_every_n_epoch`


def embeds(method: MethodHooks) -> bool:
    """Whether `method` gives the representation PromptCCD's evaluation clusters: a method on frozen features does
    (the features themselves, by default); one on tokens must implement `embed`."""
    embed = getattr(method, "embed", None)
    if embed is None:
        return False
    if method.runs_on.inputs == "features":
        return True
    from_base = getattr(type(method).embed, "__qualname__", "").startswith("Method.")
    return not from_base


def embedding(method: MethodHooks, batches: Sequence[torch.Tensor] | Any) -> torch.Tensor:
    """The method's representation of the images of `batches`, L2-normalised (N × D, float32)."""
    outs = []
    with torch.no_grad():
        for x in batches:
            z = method.embed(x)
            if z.ndim != 2 or len(z) != len(x):
                raise BenchError(f"method {type(method).__name__}: embed of {len(x)} images has shape "
                                 f"{tuple(z.shape)}, not {len(x)} × D (one representation per image)")
            outs.append(z.float())
    if not outs:
        return torch.empty(0, 0)
    return F.normalize(torch.cat(outs), dim=1)


def _seed(unlabelled: torch.Tensor, centres: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """k-means++ from the given centres up to k: each new one an unlabelled image drawn ∝ its squared distance to
    the nearest centre so far (uniformly while there is none, or when every image sits on a centre)."""
    nearest = squared_distances(unlabelled, centres).min(1).values if len(centres) else None
    while len(centres) < k:
        weights = torch.ones(len(unlabelled), dtype=torch.float64) if nearest is None else nearest.double().cpu()
        if not weights.sum() > 0:
            weights = torch.ones_like(weights)
        i = int(torch.multinomial(weights, 1, generator=gen))
        new = unlabelled[i:i + 1]
        centres = torch.cat([centres, new])
        to_new = squared_distances(unlabelled, new)[:, 0]
        nearest = to_new if nearest is None else torch.minimum(nearest, to_new)
    return centres


class SemiSupervised(NamedTuple):
    """What `ss_kmeans` keeps: each unlabelled row's cluster, the centres after the kept run's last update, and
    the inertia of the kept assignment."""

    assign: torch.Tensor
    centres: torch.Tensor
    inertia: float


def ss_kmeans(unlabelled: torch.Tensor, labelled: torch.Tensor, labels: torch.Tensor, k: int, *,
              gen: torch.Generator, n_init: int = int(SS_KMEANS["n_init"]), max_iter: int = int(SS_KMEANS["max_iter"]),
              tol: float = SS_KMEANS["tol"]) -> SemiSupervised:
    """The cluster (0..k-1) of each row of `unlabelled` by semi-supervised k-means (module docstring) around the
    `labelled` rows of classes `labels`; the labelled classes, in sorted order, are clusters 0..L-1."""
    u = unlabelled.double()
    lab = labelled.to(device=u.device, dtype=torch.float64).reshape(-1, u.shape[1])
    classes, y = torch.unique(torch.as_tensor(labels, device=u.device).long(), return_inverse=True)
    if len(lab) != len(y):
        raise BenchError(f"semi-supervised k-means: {len(lab)} labelled rows but {len(y)} labels")
    if not len(classes) <= k or k < 1:
        raise BenchError(f"semi-supervised k-means: K = {k} must be at least 1 and at least the {len(classes)} "
                         "labelled classes")
    if n_init < 1 or max_iter < 1:
        raise BenchError(f"semi-supervised k-means: n_init={n_init} and max_iter={max_iter} must be at least 1")
    if not len(u):
        return SemiSupervised(torch.empty(0, dtype=torch.long), torch.empty(0, u.shape[1]), 0.0)
    counts = torch.bincount(y, minlength=len(classes)).to(u.dtype)
    means = torch.zeros(len(classes), u.shape[1], dtype=u.dtype, device=u.device).index_add_(0, y, lab) / counts[:, None]
    x = torch.cat([lab, u])
    best: SemiSupervised | None = None
    for _ in range(n_init):
        centres = _seed(u, means, k, gen)
        kept, kept_inertia = None, float("inf")
        for _ in range(max_iter):
            d2 = squared_distances(u, centres)
            u_d2, u_assign = d2.min(1)
            inertia = float(u_d2.sum() + ((lab - centres[y]) ** 2).sum())
            if inertia < kept_inertia:
                kept, kept_inertia = u_assign.clone(), inertia
            assign = torch.cat([y, u_assign])
            members = torch.bincount(assign, minlength=k).to(u.dtype)
            sums = torch.zeros_like(centres).index_add_(0, assign, x)
            moved = torch.where(members[:, None] > 0, sums / members.clamp_min(1)[:, None], centres)
            shift = float((moved - centres).norm(dim=1).sum())
            centres = moved
            if shift ** 2 < tol:
                break
        if kept is not None and (best is None or kept_inertia < best.inertia):  # None: no finite inertia (NaN)
            best = SemiSupervised(kept.cpu(), centres.cpu(), kept_inertia)
    assert best is not None
    return best


def transductive_predictions(method: MethodHooks, feed: Feed, labelled_rows: np.ndarray, labelled_labels: np.ndarray,
                             rows: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The clusters of the training images `rows` (a step's) by semi-supervised k-means at K = `k` over the
    method's representation of them and of the labelled step's images `labelled_rows` (classes `labelled_labels`)."""
    labelled = embedding(method, feed.batches("train", labelled_rows))
    unlabelled = embedding(method, feed.batches("train", rows))
    gen = torch.Generator().manual_seed(seed)
    return ss_kmeans(unlabelled, labelled, torch.as_tensor(np.asarray(labelled_labels)), k, gen=gen).assign.numpy()


def promptccd_score(method: MethodHooks, feed: Feed, index: np.ndarray, labels: np.ndarray, old_classes: np.ndarray,
                    k: int, seed: int) -> Callable[[Any], float]:
    """PromptCCD's selection score (module docstring) over the test images `index` of classes `labels`: the
    accuracy of k-means at K = `k` on the `old_classes`' images, under one match over all. The training loop's own
    prediction function, which the rule does not read, is the argument the selection passes."""
    from sklearn.cluster import KMeans

    def score(_logits: Any) -> float:
        z = embedding(method, feed.batches("test", index)).double().cpu().numpy()
        assign = KMeans(n_clusters=min(k, len(z)), random_state=sklearn_seed(seed)).fit_predict(z)
        return old_new_accuracies(labels, assign, old_classes)[0]["old"]

    return score

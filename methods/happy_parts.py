"""Happy's debiasing parts (Ma et al., NeurIPS'24; docs/methods.md#happy), as its code computes them
(Happy-CGCD's `train_happy.py`, `models/utils_proto_aug.py`, `models/utils_simgcd_pro.py`), on the L2-normalised
tail feature z and the cosine logits s of the 2B views of a batch, with O the K_seen classes known before the
step and N its K_new new ones:

    soft entropy regularisation (`soft_entropy`), on p̄ = mean softmax(s/τ_s):
        P_o = Σ_O p̄, P_n = Σ_N p̄
        L_on = P_o log P_o + P_n log P_n + log 2            # KL of (P_o, P_n) from (½, ½)
        L_oi = Σ_O q log q + log|O|,  q = p̄_O / P_o         # evenness within the old classes
        L_ni = Σ_N r log r + log|N|,  r = p̄_N / P_n         # within the new ones (0 when |N| = 1)
        L_ser = w_on·L_on + w_oi·L_oi + w_ni·L_ni
    hardness-aware prototype sampling (`Prototypes`): one unit prototype μ_c per class and ONE radius
        r = √(mean_c tr(Σ_c)/D), from the labelled step (never updated); a class's hardness h_c is its mean cosine
        to the other prototypes, π = softmax(h/τ_h); each batch draws M labels y ~ π and features μ_y + r·ε,
        ε ~ N(0, I), and L_hap = CE(s(x)/τ_s, y) over every class's row
    feature distillation (`feature_distillation`): L_kd = mean_i ‖z_i − z_i^prev‖², z^prev the previous step's tail
    clustering-guided initialisation (`clustered_rows`): k-means (K = K_seen + K_new) on the previous model's z over
        the step's images; the K_new unit centroids least like any old row (smallest max cosine) become the new rows
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.core.numerics import sklearn_seed
from bench.methods.gcd_losses import evenness


def soft_entropy(logits: torch.Tensor, known: int, temperature: float,
                 weights: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> torch.Tensor:
    """L_ser of the rows of `logits` (every class's column), the first `known` columns the old classes."""
    mean = F.softmax(logits / temperature, dim=1).mean(0)
    old, new = mean[:known], mean[known:]
    p_old, p_new = old.sum(), new.sum()
    w_on, w_oi, w_ni = weights
    loss = w_on * evenness(torch.stack([p_old, p_new]))
    if known > 1:
        loss = loss + w_oi * evenness(old / p_old)
    if len(new) > 1:
        loss = loss + w_ni * evenness(new / p_new)
    return loss


def feature_distillation(z: torch.Tensor, z_previous: torch.Tensor) -> torch.Tensor:
    """The mean over rows of the squared distance between the L2-normalised features and the previous model's."""
    return (F.normalize(z, dim=1) - F.normalize(z_previous, dim=1).detach()).square().sum(1).mean()


def shared_radius(z: torch.Tensor, labels: torch.Tensor) -> float:
    """√(mean over classes of tr(Σ_c)/D) of the L2-normalised features `z` of labelled images (Σ_c the class's
    covariance, divided by its count)."""
    z = F.normalize(z.double(), dim=1)
    traces = []
    for c in torch.unique(labels):
        members = z[labels == c]
        traces.append(float((members - members.mean(0)).square().sum(1).mean()) / z.shape[1])
    return math.sqrt(float(np.mean(traces)))


def class_means(z: torch.Tensor, assigned: torch.Tensor, classes: range, fallback: torch.Tensor) -> torch.Tensor:
    """The unit mean of the L2-normalised `z` of the rows assigned to each class of `classes`; a class no row is
    assigned to takes its `fallback` row (indexed from the first of `classes`)."""
    z = F.normalize(z.float(), dim=1)
    rows = []
    for i, c in enumerate(classes):
        members = z[assigned == c]
        rows.append(members.mean(0) if len(members) else fallback[i].float().to(z.device))
    return F.normalize(torch.stack(rows), dim=1)


def hardness(prototypes: torch.Tensor) -> torch.Tensor:
    """Each prototype's mean cosine to the others (higher: nearer the rest, harder to keep apart)."""
    sim = prototypes @ prototypes.t()
    k = len(prototypes)
    return (sim.sum(1) - sim.diagonal()) / max(k - 1, 1)


class Prototypes:
    """The old classes' unit prototypes and the one shared radius, and what Happy draws from them."""

    def __init__(self) -> None:
        self.means = torch.empty(0, 0)
        self.radius = 0.0

    def add(self, means: torch.Tensor) -> None:
        self.means = F.normalize(torch.cat([self.means.to(means), means]) if len(self.means) else means, dim=1)

    def probabilities(self, temperature: float) -> torch.Tensor:
        """π = softmax(hardness / τ_h) over the stored classes."""
        return F.softmax(hardness(self.means.float()) / temperature, dim=0)

    def sample(self, m: int, temperature: float, radius_scale: float,
               gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """M features μ_y + r·ε and their labels y ~ π (drawn on the CPU from `gen`, then moved to the means' device)."""
        means = self.means.float().cpu()
        labels = torch.multinomial(self.probabilities(temperature).cpu(), m, replacement=True, generator=gen)
        noise = torch.randn(m, means.shape[1], generator=gen)
        device = self.means.device
        return (means[labels] + self.radius * radius_scale * noise).to(device), labels.to(device)

    def loss(self, head: nn.Module, m: int, temperature: float, radius_scale: float, student_temperature: float,
             gen: torch.Generator) -> torch.Tensor:
        """L_hap: CE(head(x)/τ_s, y) of M features x and labels y drawn by `sample` (hard classes more often)."""
        x, y = self.sample(m, temperature, radius_scale, gen)
        return F.cross_entropy(head(x) / student_temperature, y)

    def state_dict(self) -> dict:
        return {"means": self.means.detach().cpu().clone(), "radius": self.radius}

    def load_state_dict(self, state: dict) -> None:
        self.means, self.radius = state["means"], float(state["radius"])


def clustered_rows(z: torch.Tensor, old_rows: torch.Tensor, n_new: int,
                   random_state: int | np.random.RandomState) -> torch.Tensor:
    """Clustering-guided initialisation: k-means with K = old + new over the L2-normalised `z` of the step's
    images (sklearn, k-means++, one init, seeded by `random_state`: a step's `Draws.kmeans`, or a seed); of its
    unit centroids, the `n_new` whose largest cosine to the old rows `old_rows` is smallest (least like any known
    class), in that order."""
    from sklearn.cluster import KMeans

    x = F.normalize(z.double(), dim=1).cpu().numpy()
    k = min(len(old_rows) + n_new, len(x))
    seed = sklearn_seed(random_state) if isinstance(random_state, int) else random_state
    centres = torch.from_numpy(KMeans(n_clusters=k, random_state=seed, n_init=1).fit(x).cluster_centers_)
    centres = F.normalize(centres.float(), dim=1)
    likeness = (centres @ F.normalize(old_rows.float().cpu(), dim=1).t()).max(1).values
    chosen = torch.topk(likeness, min(n_new, k), largest=False).indices
    return centres[chosen]

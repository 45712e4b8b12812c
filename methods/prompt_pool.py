"""PromptCCD's Gaussian mixture prompt pool (Cendra et al., ECCV'24; docs/methods.md#promptccd), written from the
paper's description and what its code computes (read, not copied: its code is CC BY-NC-SA):

    fit      a Gaussian mixture of K components (scikit-learn's EM, k-means init, one init, `covariance` type,
             reg 1e-3, tol 1e-7, at most 100 iterations) on the L2-normalised CLS features of the step's images,
             with the samples the previous step's mixture left (`replay`)
    select   for each image, the top-k components by posterior responsibility r_c(q) ∝ π_c N(q; μ_c, Σ_c) of
             its L2-normalised query feature q; its prompts are those components' means μ_c, in that order
    insert   the k prompts enter the ViT at the input of block 0, after its prefix tokens (CLS), each with the
             CLS token's position embedding; no prompt is learned
    keep     after a step, `n_samples` draws from its mixture (Multinomial(n, π) per component) feed the next fit
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.core.numerics import sklearn_seed
from bench.errors import BenchError
from bench.features.tokens import run_block, vit_of


class PromptPool:
    """The mixture of one step and what it keeps for the next."""

    def __init__(self, covariance: str = "spherical", seed: int = 0) -> None:
        self.covariance, self.seed = covariance, seed
        self.mixture: Any = None
        self.replay = torch.empty(0, 0)  # the previous step's samples (normalised feature space)

    def fit(self, features: torch.Tensor, k: int) -> None:
        """EM on the L2-normalised `features` and the replayed samples, `k` components (at most the points)."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.mixture import GaussianMixture

        x = F.normalize(features.double(), dim=1).cpu().numpy()
        if len(self.replay):
            x = np.concatenate([x, self.replay.double().numpy()])
        mixture = GaussianMixture(n_components=min(k, len(x)), covariance_type=self.covariance, reg_covar=1e-3,
                                  tol=1e-7, max_iter=100, init_params="kmeans", n_init=1, random_state=sklearn_seed(self.seed))
        with warnings.catch_warnings():  # EM stopped at max_iter before tol 1e-7, as the code's own fit may: as intended
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.mixture = mixture.fit(x)

    def responsibilities(self, query: torch.Tensor) -> torch.Tensor:
        """N × K posterior responsibilities of the L2-normalised queries."""
        q = F.normalize(query.double(), dim=1).cpu().numpy()
        return torch.from_numpy(self.mixture.predict_proba(q))

    def prompts(self, query: torch.Tensor, top_k: int) -> torch.Tensor:
        """N × k × D: the means of each query's k most responsible components, most responsible first."""
        order = torch.topk(self.responsibilities(query), min(top_k, self.mixture.n_components), dim=1).indices
        means = torch.from_numpy(self.mixture.means_).to(query)
        return means[order]

    def keep_samples(self, n: int) -> None:
        """The draws the next step's fit replays (the mixture's own generator: the run's seed)."""
        if self.mixture is not None and n > 0:
            self.replay = torch.from_numpy(self.mixture.sample(n)[0]).float()

    def state_dict(self) -> dict[str, Any]:
        return {"replay": self.replay.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.replay = state["replay"]


def with_prompts(backbone: nn.Module, tokens: torch.Tensor, prompts: torch.Tensor) -> torch.Tensor:
    """The tokens entering block 0 with the prompts (N × k × D) inserted after the prefix tokens (CLS, registers),
    each plus the CLS token's position embedding (zero for a ViT whose position embedding has no class slot)."""
    model = vit_of(backbone)
    if getattr(model, "rope", None) is not None:
        raise BenchError("PromptCCD inserts prompt tokens; a backbone with rotary position embeddings (Eva) has no "
                         "position for them: use a ViT with absolute position embeddings (DINO, CLIP, DINOv2)")
    prefix = model.num_prefix_tokens
    has_class_slot = not getattr(model, "no_embed_class", False) and model.pos_embed is not None
    position = model.pos_embed[:, :1] if has_class_slot else torch.zeros_like(tokens[:, :1])
    return torch.cat([tokens[:, :prefix], prompts.to(tokens) + position.to(tokens), tokens[:, prefix:]], dim=1)


def frozen_blocks(backbone: nn.Module, tokens: torch.Tensor, last: int) -> torch.Tensor:
    """The backbone's own frozen blocks[:last] on `tokens`, without a gradient."""
    model = vit_of(backbone)
    with torch.no_grad():
        x = tokens
        for index, block in enumerate(model.blocks[:last]):
            x = run_block(model, index, block, x, None)
    return x

"""PromptCCD (Cendra, Zhao and Han, "PromptCCD: Learning Gaussian Mixture Prompt Pool for Continual Category
Discovery", ECCV'24; docs/methods.md#promptccd): GCD's contrastive learner whose images are prompted by a Gaussian
mixture prompt pool (`methods.prompt_pool`). The mixed setting only. Written from the paper's description and what
its code computes (read to understand it, never copied: the code is CC BY-NC-SA).

f(x; P) is the ViT with the prompts P inserted at block 0's input, its frozen blocks then its last
`trainable_blocks` (a tail) and final norm, giving the CLS feature; φ the projection head (MLP to 256, then a
weight-normalised layer to `head_dim`, L2-normalised). Per step, with K the classes so far (halved after the
labelled step where `half_k`):

    every `refit_every` epochs from `prompt_from`: fit the pool on f(x; ∅) of the step's images + the replay
    each batch (two views):  q = f(v; ∅) (no gradient); P(v) = the means of q's top-k components (from `prompt_from`)
                             h = φ(f(v; P(v)));  L = (1 − λ_t)·L_con(h) + λ_t·L_supcon(h, y)   (λ_t = λ labelled, else 0)
    after the step:         keep `n_samples` draws of the pool; centroids over f(x; ∅): the labelled classes' means,
                             then anchored k-means (`methods.anchored_kmeans`) with the known centroids fixed
    predict (bench's inductive rows): the nearest centroid of f(x; ∅); PromptCCD's own metric is
                             `setting.evaluation=transductive` (semi-supervised k-means over `embed` = f(x; ∅))
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.distances import squared_distances
from bench.errors import BenchError
from bench.features.tokens import vit_of
from bench.methods.anchored_kmeans import step_centroids
from bench.methods.base import RunsOn, Step, built
from bench.methods.gcd_losses import NormedHead, Projector, info_nce, supcon
from bench.methods.loop import cosine_after_epoch, train_epochs
from bench.methods.prompt_pool import PromptPool, frozen_blocks, with_prompts
from bench.methods.tails import OneTail
from bench.registries import METHODS

SELECTIONS = ("last", "promptccd")  # what scores its epochs: its centroids are made only after a step


@METHODS.register_module(name="PromptCCD")
class PromptCCD(OneTail):
    preset_file = "promptccd"
    runs_on = RunsOn(inputs="tokens", settings=("mixed",))
    hparam_choices = {"covariance": ("spherical", "diag", "full", "tied")}

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.pool = PromptPool(hparams["covariance"], seed)
        self.centroids = torch.empty(0, feature_dim)
        self.head: nn.Sequential | None = None

    @property
    def tail_first(self) -> int:
        """The first trained block: prompts enter at block 0, so the prefix is the embedding alone."""
        return len(vit_of(built(self.backbone, "the backbone (bind)")).blocks) - int(self.hparams["trainable_blocks"])

    def features(self, tokens: torch.Tensor, prompts: torch.Tensor | None = None) -> torch.Tensor:
        """f(x; P): the CLS feature of the block-0 tokens, prompted when `prompts` are given."""
        backbone = built(self.backbone, "the backbone (bind)")
        x = tokens if prompts is None else with_prompts(backbone, tokens, prompts)
        return self.tail(frozen_blocks(backbone, x, self.tail_first))

    def _plain(self, step: Step) -> torch.Tensor:
        with torch.no_grad():
            return torch.cat([self.features(x) for x in step.tokens.batches(self.hparams["batch_size"])])

    def learn(self, step: Step) -> None:
        hp, tail = self.hparams, self.tail
        if step.selection.rule not in SELECTIONS:
            raise BenchError(f"PromptCCD predicts from centroids made after a step, so its epochs cannot be scored "
                             f"by setting.selection={step.selection.rule}; use {' or '.join(SELECTIONS)}")
        labelled = step.labels is not None
        if self.head is None:
            self.head = nn.Sequential(Projector(self.feature_dim, hp["proj_hidden_dim"], hp["proj_dim"]),
                                      NormedHead(hp["proj_dim"], hp["head_dim"])).to(self.device)
        head, lam = self.head, hp["sup_weight"] if labelled else 0.0
        k = step.offset + step.n_classes
        k = k if labelled or not hp["half_k"] else max(1, k // 2)
        gen = torch.Generator().manual_seed(self.seed * 1000 + 500 + step.index)
        labels = step.labels.to(self.device) if step.labels is not None else None
        prompting = [False]

        def on_epoch(epoch: int) -> None:
            start, every = hp["prompt_from"], hp["refit_every"]
            if epoch >= start and (epoch - start) % every == 0:
                was = tail.training
                tail.eval()
                self.pool.fit(self._plain(step), k)
                tail.train(was)
            prompting[0] = epoch >= start and self.pool.mixture is not None

        def view(tokens: torch.Tensor) -> torch.Tensor:
            prompts = None
            if prompting[0]:
                with torch.no_grad():
                    prompts = self.pool.prompts(self.features(tokens), hp["top_k"])
            return F.normalize(head(self.features(tokens, prompts)), dim=-1)

        def loss_of(index: list[torch.Tensor]) -> torch.Tensor:
            t1, t2 = step.tokens.two_views(index[0], gen)
            h1, h2 = view(t1), view(t2)
            loss = (1 - lam) * info_nce(h1, h2, hp["info_nce_temperature"])
            if labels is not None and lam:
                loss = loss + lam * supcon(h1, h2, labels[index[0].to(labels.device)], hp["supcon_temperature"])
            return loss

        epochs, lr = hp["epochs"], hp["lr"]
        tail.train(), head.train()
        trained = [p for m in (tail, head) for p in m.parameters() if p.requires_grad]
        with step.selection.over(trained, self.logits, [tail, head]) as after_epoch:
            train_epochs(trained, hp, epochs=epochs, sizes=[len(step.tokens)], batch_size=hp["batch_size"], gen=gen,
                         loss_of=loss_of, drop_last=True, on_epoch=on_epoch, after_epoch=after_epoch,
                         lr_at=lambda e: cosine_after_epoch(e, epochs, lr, lr * hp["eta_min_ratio"]),
                         read_ahead=[step.tokens])
        tail.eval(), head.eval()
        self.pool.keep_samples(hp["n_samples"])
        self._centroids(step)

    def _centroids(self, step: Step) -> None:
        z = F.normalize(self._plain(step).double(), dim=1)
        gen = torch.Generator().manual_seed(self.seed * 1000 + 600 + step.index)
        self.centroids = step_centroids(z, step.labels, self.centroids, step.n_classes,
                                        max_iter=self.hparams["kmeans_iters"], n_init=self.hparams["kmeans_inits"], gen=gen)

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        z = F.normalize(self.features(x), dim=1)
        return -squared_distances(z, self.centroids.to(z))

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)

    def state_dict(self) -> dict[str, Any]:
        head = {k: v.detach().cpu().clone() for k, v in built(self.head, "the head").state_dict().items()}
        return {"tail": self.tail.trainable_state(), "head": head, "pool": self.pool.state_dict(),
                "centroids": self.centroids.detach().cpu().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        hp = self.hparams
        self.restore_tail(state["tail"])
        self.head = nn.Sequential(Projector(self.feature_dim, hp["proj_hidden_dim"], hp["proj_dim"]),
                                  NormedHead(hp["proj_dim"], hp["head_dim"])).to(self.device)
        self.head.load_state_dict(state["head"])
        self.head.eval()
        self.pool.load_state_dict(state["pool"])
        self.centroids = state["centroids"]

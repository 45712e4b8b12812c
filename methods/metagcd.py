"""MetaGCD (Wu, Chi, Wang and Feng, "MetaGCD: Learning to Continually Learn in Generalized Category Discovery",
ICCV'23; docs/methods.md#metagcd): GCD's contrastive learner, taught on the labelled step to learn from unlabelled
steps by meta-learning over simulated ones. The mixed setting only. Ported from what its code computes
(ynanwu/MetaGCD; no licence file: read to learn, never copied); its pieces are `methods.metagcd_parts`.

f is the ViT whose last block trains (a tail), φ GCD's DINO head (MLP to 256, then a weight-normalised layer),
h = φ(f(v)) L2-normalised, on two views of each image of a batch; λ = `sup_weight`:

    L_sup(θ)   = (1 − λ)·L_con(h) + λ·L_supcon(h, y)                     (GCD's loss, with labels)
    L_unsup(θ) = (1 − λ)·L_con(h) + λ·L_soft(h)                          (L_con alone when no image has a neighbour)

    labelled step:  offline: `offline_epochs` of L_sup on its images
                    meta-train, `meta_tasks` times: cut the images into `pseudo_sessions` simulated steps; for each
                        θ' ← θ after `inner_epochs` of L_unsup on the session (inner loop, SGD at `inner_lr`)
                        θ  ← θ − β·∇_θ' L_sup(θ'; a batch of the session)        (outer step, first order)
                        then `outer_steps` − 1 more outer steps of L_sup at θ (the code never re-adapts)
    step t > 0:     `epochs` of L_unsup on the step's images at `lr`
    after a step:   centroids over f(x): the labelled classes' means, then anchored k-means (the new classes);
                    predict the nearest (MetaGCD's own score is k-means over the test images: docs)
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.distances import squared_distances
from bench.errors import BenchError
from bench.methods.anchored_kmeans import step_centroids
from bench.methods.base import RunsOn, Step, built
from bench.methods.gcd_losses import NormedHead, Projector, info_nce, supcon
from bench.methods.loop import sgd, train_epochs
from bench.methods.metagcd_parts import meta_step, pseudo_sessions, soft_loss
from bench.methods.promptccd import SELECTIONS
from bench.methods.tails import OneTail
from bench.registries import METHODS

Views = tuple[torch.Tensor, torch.Tensor]


@METHODS.register_module(name="MetaGCD")
class MetaGCD(OneTail):
    preset_file = "metagcd"
    runs_on = RunsOn(inputs="tokens", settings=("mixed",))

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        super().__init__(feature_dim, seed, **hparams)
        self.centroids = torch.empty(0, feature_dim)
        self.head: nn.Sequential | None = None

    # --- the losses --------------------------------------------------------------------------------------
    def project(self, views: Views) -> Views:
        head = built(self.head, "the head")
        h = F.normalize(head(torch.cat([self.tail(v) for v in views])), dim=-1)
        return h[:len(views[0])], h[len(views[0]):]

    def supervised(self, views: Views, y: torch.Tensor) -> torch.Tensor:
        hp, (h1, h2) = self.hparams, self.project(views)
        lam = hp["sup_weight"]
        return (1 - lam) * info_nce(h1, h2, hp["info_nce_temperature"]) + lam * supcon(h1, h2, y, hp["supcon_temperature"])

    def unsupervised(self, views: Views) -> torch.Tensor:
        hp, (h1, h2) = self.hparams, self.project(views)
        con = info_nce(h1, h2, hp["info_nce_temperature"])
        soft = soft_loss(h1, h2, hp["soft_threshold"], hp["supcon_temperature"]) if hp["sup_weight"] else None
        return con if soft is None else (1 - hp["sup_weight"]) * con + hp["sup_weight"] * soft

    # --- the procedure -----------------------------------------------------------------------------------
    def trained(self) -> list[nn.Parameter]:
        return [p for m in (self.tail, built(self.head, "the head")) for p in m.parameters() if p.requires_grad]

    def _train(self, step: Step, rows: torch.Tensor | None, loss: Callable[[torch.Tensor], torch.Tensor], *,
               epochs: int, lr: float, batch_size: int, gen: torch.Generator,
               after_epoch: Callable[[int], None] | None = None) -> None:
        """`epochs` of `loss` (of a batch's indices into the step's images) over `rows` (None: all of them), SGD at a
        constant `lr` as the code (no schedule), last partial batch dropped."""
        hp = self.hparams
        sizes = [len(step.tokens) if rows is None else len(rows)]
        train_epochs(self.trained(), {"lr": lr, "momentum": hp["momentum"], "weight_decay": hp["weight_decay"]},
                     epochs=epochs, sizes=sizes, batch_size=batch_size, gen=gen, drop_last=True, lr_at=lambda e: lr,
                     loss_of=lambda index: loss(index[0] if rows is None else rows[index[0]]),
                     read_ahead=[step.tokens] if rows is None else (), after_epoch=after_epoch)

    def _meta_train(self, step: Step, labels: torch.Tensor, gen: torch.Generator) -> None:
        hp = self.hparams
        params = self.trained()
        for _ in range(hp["meta_tasks"]):
            sessions = pseudo_sessions(labels, step.n_classes, sessions=hp["pseudo_sessions"],
                                       old_ratio=hp["pseudo_old_ratio"], old_held=hp["pseudo_old_held"],
                                       novel_share=hp["pseudo_novel_share"], gen=gen)
            for rows in sessions:
                outer = sgd(params, {"lr": hp["outer_lr"], "momentum": hp["momentum"],
                                     "weight_decay": hp["weight_decay"]})
                for k in range(hp["outer_steps"]):
                    def adapt(first: bool = k == 0, rows: torch.Tensor = rows) -> None:
                        if first:
                            self._train(step, rows, lambda i: self.unsupervised(step.tokens.two_views(i, gen)),
                                        epochs=hp["inner_epochs"], lr=hp["inner_lr"],
                                        batch_size=hp["meta_batch_size"], gen=gen)

                    def outer_loss(rows: torch.Tensor = rows) -> torch.Tensor:
                        batch = rows[torch.randperm(len(rows), generator=gen)[:hp["meta_batch_size"]]]
                        return self.supervised(step.tokens.two_views(batch, gen), labels[batch.to(labels.device)])

                    meta_step(params, adapt, outer_loss, outer)

    def learn(self, step: Step) -> None:
        hp = self.hparams
        if step.selection.rule not in SELECTIONS:
            raise BenchError(f"MetaGCD predicts from centroids made after a step, so its epochs cannot be scored by "
                             f"setting.selection={step.selection.rule}; use {' or '.join(SELECTIONS)}")
        if self.head is None:
            self.head = nn.Sequential(Projector(self.feature_dim, hp["proj_hidden_dim"], hp["proj_dim"]),
                                      NormedHead(hp["proj_dim"], hp["head_dim"])).to(self.device)
        gen = torch.Generator().manual_seed(self.seed * 1000 + 700 + step.index)
        self.tail.train(), self.head.train()
        with step.selection.over(self.trained(), self.logits, [self.tail, self.head]) as after_epoch:
            if step.labels is not None:
                labels = step.labels.to(self.device)
                self._train(step, None, lambda i: self.supervised(step.tokens.two_views(i, gen), labels[i.to(labels.device)]),
                            epochs=hp["offline_epochs"], lr=hp["offline_lr"], batch_size=hp["offline_batch_size"],
                            gen=gen, after_epoch=after_epoch)
            else:
                self._train(step, None, lambda i: self.unsupervised(step.tokens.two_views(i, gen)), epochs=hp["epochs"],
                            lr=hp["lr"], batch_size=hp["batch_size"], gen=gen, after_epoch=after_epoch)
        if step.labels is not None and hp["meta_tasks"]:
            self._meta_train(step, step.labels.to(self.device), gen)
        self.tail.eval(), self.head.eval()
        self._centroids(step)

    def _centroids(self, step: Step) -> None:
        with torch.no_grad():
            z = torch.cat([self.tail(x) for x in step.tokens.batches(self.hparams["batch_size"])])
        gen = torch.Generator().manual_seed(self.seed * 1000 + 800 + step.index)
        self.centroids = step_centroids(F.normalize(z.double(), dim=1), step.labels, self.centroids, step.n_classes,
                                        max_iter=self.hparams["kmeans_iters"], n_init=self.hparams["kmeans_inits"], gen=gen)

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        z = F.normalize(self.tail(x), dim=1)
        return -squared_distances(z, self.centroids.to(z))

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(x)

    def state_dict(self) -> dict[str, Any]:
        head = {k: v.detach().cpu().clone() for k, v in built(self.head, "the head").state_dict().items()}
        return {"tail": self.tail.trainable_state(), "head": head, "centroids": self.centroids.detach().cpu().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        hp = self.hparams
        self.restore_tail(state["tail"])
        self.head = nn.Sequential(Projector(self.feature_dim, hp["proj_hidden_dim"], hp["proj_dim"]),
                                  NormedHead(hp["proj_dim"], hp["head_dim"])).to(self.device)
        self.head.load_state_dict(state["head"])
        self.head.eval()
        self.centroids = state["centroids"]

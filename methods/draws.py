"""One step's random draws, from one seeded source a method makes at the start of the step and hands down to each
piece that draws (docs/methods.md#happy), so that no piece reads torch's or numpy's global generators and each can
be called alone with a generator of its own (the mixed setting's trained methods: continual SimGCD, Happy, Happy++).

The source is (the run's seed, the step's index); it is split into three streams so that what one piece draws
never shifts another's (a wider projector does not change the loader's orders, nor the k-means init the head's):

    init    torch   the weights a step draws afresh, in this order: the head's rows (all of them at the labelled
                    step, the new classes' after it), then the projector φ
    train   torch   the loader's order each epoch, the views of each batch, Happy's prototype samples
    kmeans  numpy   the k-means++ seeding of Happy's clustering-guided initialisation (a `RandomState`: what
                    scikit-learn's `random_state` takes)

Their seeds are those each stream had before it was injected, so a run's numbers did not change: `init` is
seeded `seed·1000 + t`, the value the step loop seeds torch's global generator with before step t
(`bench.protocol.runner.seed_everything`), which those weights were drawn from first; `train` is `seed·1000 +
300 + t`, the loader's generator's; `kmeans` is `seed·1000 + t` as scikit-learn takes it. Happy++'s LoRA terms
draw their A from a generator of their own, `seed·1000 + 600 + t` (`methods.happy_pp`): drawn from `init` before the
projector, they would shift the projector's weights whenever the switch is on.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bench.core.numerics import sklearn_seed


@dataclass(frozen=True)
class Draws:
    """The three generators of one step (module docstring): `init`, `train` (torch, CPU) and `kmeans` (numpy)."""

    init: torch.Generator
    train: torch.Generator
    kmeans: np.random.RandomState

    @classmethod
    def of(cls, seed: int, step: int) -> "Draws":
        """The draws of step `step` of a run seeded `seed`: the same pair, the same draws."""
        base = seed * 1000 + step
        return cls(torch.Generator().manual_seed(base), torch.Generator().manual_seed(base + 300),
                   np.random.RandomState(sklearn_seed(base)))

"""Which epoch of a training loop a mixed-setting step keeps (`setting.selection`).

- `last`: the model as its last epoch left it (what the paper's methods report; the continual category
  discovery peers select on their test set instead: `happy`).
- `val`: the epoch whose model scored best on a held-out part of the labelled step (`setting.val_fraction`
  of each labelled class's images, never trained on; the manifest's `validation`), as the GCD papers
  select on their labelled validation images. In an unlabelled step those images are all of old
  classes: the score then measures what the step's training costs the labelled classes.
- `oracle`: the epoch whose model scored best on the test images of the classes seen so far. It reads
  the test labels, so it is a leak: runs only when a user asks, and every result of such a run is
  marked "oracle on test".
- `happy`: Happy's rule (Happy-CGCD's `train_happy.py`: a session's checkpoint is saved when its All accuracy on
  the seen classes' test images is strictly higher, and the next session loads it): `oracle` with a tie
  keeping the earlier epoch. A leak too, marked the same way.
- `promptccd`: PromptCCD's rule (its `promptccd_training_w_gmp.py`): every 10th epoch, the old-class accuracy of
  k-means over the method's representation of the test images (`bench.protocol.transductive.promptccd_score`); the
  kept epoch moves only on a strictly higher score. A leak, marked.

A score is the clustering accuracy (one Hungarian match, `bench.protocol.evaluate.old_new_accuracy`) of the
model's argmax (PromptCCD's: of k-means over its representation). A method opts in per training loop: it hands the parameters the loop trains and the
function that predicts with them (`EpochSelection.over`); a method without epochs has nothing to select.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

import torch

from bench.splits.settings import SELECTIONS

Logits = Callable[[torch.Tensor], torch.Tensor]
Score = Callable[[Logits], float]
STRICT = ("happy", "promptccd")  # the peers' rules: a checkpoint moves only on a strictly higher score


class EpochSelection:
    """One step's selection: `rule` and, unless it is `last`, the `score` of a prediction function
    (higher is better). `chosen` lists, per training loop of the step, (epoch kept, epochs run), 0-based. A tie
    keeps the later epoch (a flat score keeps the last), except under `happy`, whose checkpoint moves only on a
    strictly higher score (and under `promptccd`). With `every` = n, only the epochs 0, n, 2n, … are scored."""

    def __init__(self, rule: str = "last", score: Score | None = None, every: int = 1) -> None:
        if rule not in SELECTIONS:
            raise ValueError(f"unknown selection {rule!r}; choose from {', '.join(SELECTIONS)}")
        if rule != "last" and score is None:
            raise ValueError(f"selection {rule!r} needs a score")
        if every < 1:
            raise ValueError(f"selection every={every}: score every n >= 1 epochs")
        self.rule, self.score, self.every = rule, score, every
        self.chosen: list[tuple[int, int]] = []
        self.scores: list[list[tuple[int, float]]] = []  # per training loop: (epoch, score) of each epoch scored

    @contextmanager
    def over(self, parameters: Iterable[torch.nn.Parameter], logits: Logits,
             modules: Sequence[torch.nn.Module] = ()) -> Iterator[Callable[[int], None] | None]:
        """Yields the `after_epoch(epoch)` callback a training loop calls after each epoch (None for
        `last`); on exit the parameters hold the values of the best-scoring epoch (the later one on a
        tie, so that a flat score keeps the last epoch; the earlier under `happy` and `promptccd`). `modules` are scored in eval mode, as they
        will predict, and put back in the mode they were in."""
        if self.rule == "last":
            yield None
            return
        params = list(parameters)
        best_score, best_epoch, best_values, epochs = float("-inf"), -1, None, 0
        scored: list[tuple[int, float]] = []
        self.scores.append(scored)

        @torch.no_grad()
        def after_epoch(epoch: int) -> None:
            nonlocal best_score, best_epoch, best_values, epochs
            epochs = epoch + 1
            if epoch % self.every:
                return
            modes = [m.training for m in modules]
            for m in modules:
                m.eval()
            score = float(self.score(logits))  # type: ignore[misc]
            scored.append((epoch, score))
            for m, mode in zip(modules, modes):
                m.train(mode)
            if score > best_score or (score == best_score and self.rule not in STRICT):
                best_score, best_epoch, best_values = score, epoch, [p.detach().clone() for p in params]

        yield after_epoch
        if best_values is not None:
            with torch.no_grad():
                for p, value in zip(params, best_values):
                    p.copy_(value)
            self.chosen.append((best_epoch, epochs))

LAST = EpochSelection()  # what every step of class-iNCD, and a mixed run by default, uses

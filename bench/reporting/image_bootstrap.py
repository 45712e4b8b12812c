"""The test set is a sample too: a paired bootstrap over test images and seeds, from the predictions every run
stores (`bench.runs.predictions`), with no rerun. Each resample draws the test images with replacement (the same
draw for every run that scored the same images, so that two methods are compared on the very same images) and the
seeds with replacement, and recomputes each run's reported A with the evaluator's own code: the frozen (`wo`) or
re-fitted (`wo_refit`) maps decide once which image is correct; flavour `w` fits its Hungarian match again on every
resample (its contingency counts weighted by how often each image was drawn), as the metric does. The differences
of two methods over the resamples give a percentile interval and a probability of improvement.

Vectorised: a resample is a row of image counts, a chunk of them one matrix; the `wo` flavours' per-task hits are
one matrix product per run, the `w` flavour one assignment per resample over the (cluster, class) pairs present.

A run of the mixed setting reports All, the mean over its unlabelled steps of each step's accuracy under one match
fitted on that step's images (`bench.protocol.mixed`): `MixedScorer` refits each step's match on every resample, as
the `w` flavour does. Its steps' test images are nested (step t scores the test images of the classes seen by t, a
subsequence of the last step's), so a resample draws the last step's images once and each step reads its own; a
transductive run's steps score their own unlabelled images, disjoint, drawn together."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from bench.protocol.evaluate import Evaluator
from bench.runs.predictions import PREDICTIONS, Keys, NewerSchema, is_mixed, layout_of, opened

CHUNK = 128  # resamples per matrix: 128 × 10,000 images of float64 is 10 MB
BOOTSTRAPPED = {"A": "class", "A_sample": "sample"}  # the reported metrics a resample recomputes, and their weighting


class NotBootstrapped(ValueError):
    """A run whose stored predictions cannot give its reported metric per resample (said in one line)."""


@dataclass(frozen=True)
class Scorer:
    """One run's reported A as a function of weights on its last step's test images (`score`)."""

    labels: np.ndarray
    tasks: np.ndarray  # the task of each image
    sizes: np.ndarray  # classes per task: the class-weighted A weighs task k's accuracy by them
    weighting: str  # "class" (A) or "sample" (A_sample)
    correct: np.ndarray | None = None  # per image, where the maps are fitted on val images (`wo`, `wo_refit`)
    pred: np.ndarray | None = None  # the unified head's clusters, where the match is fitted on the test images (`w`)

    @property
    def images(self) -> int:
        return len(self.labels)

    @property
    def key(self) -> str:
        """What tells which runs scored the same images, in the same order."""
        return hashlib.sha256(np.ascontiguousarray(self.labels, dtype=np.int64).tobytes()).hexdigest()

    def score(self, weights: np.ndarray) -> np.ndarray:
        """The metric (%) under each row of `weights` (resamples × images, how often each image is drawn)."""
        weights = np.atleast_2d(np.asarray(weights, dtype=float))
        n_tasks = len(self.sizes)
        if self.correct is not None:
            onehot = np.zeros((self.images, n_tasks))
            onehot[np.arange(self.images), self.tasks] = 1.0
            totals, hits = weights @ onehot, weights @ (onehot * self.correct[:, None])
        else:
            hits, totals = self._matched(weights, n_tasks)
        if self.weighting == "sample":
            return 100.0 * hits.sum(axis=1) / totals.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):  # a task no image of which was drawn: left out
            acc = hits / totals
        present = totals > 0
        return 100.0 * np.where(present, acc, 0.0) @ self.sizes / (present @ self.sizes)

    def _matched(self, weights: np.ndarray, n_tasks: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-task hits and totals under the Hungarian match of each resample's weighted contingency matrix,
        built as `evaluate.hungarian_mapping` builds it (so that the unweighted resample is the stored value)."""
        from scipy.optimize import linear_sum_assignment

        assert self.pred is not None
        d = int(max(self.pred.max(), self.labels.max())) + 1
        pairs, inverse = np.unique(self.pred * d + self.labels, return_inverse=True)
        p, y = pairs // d, pairs % d
        pair_task = _task_of_class(self.labels, self.tasks, y)
        from scipy.sparse import csr_matrix

        # image → its (cluster, class) pair: the weights summed per pair in one sparse product
        onehot = csr_matrix((np.ones(self.images), (np.arange(self.images), inverse)), shape=(self.images, len(pairs)))
        counts = np.asarray((onehot.T @ weights.T).T)
        hits, totals = np.zeros((len(weights), n_tasks)), np.zeros((len(weights), n_tasks))
        matrix = np.zeros((d, d))
        for b, row in enumerate(counts):
            matrix[p, y] = row
            clusters, classes = linear_sum_assignment(matrix.max() - matrix)
            lookup = np.full(d, -1)
            lookup[clusters] = classes
            totals[b] = np.bincount(pair_task, row, n_tasks)
            hits[b] = np.bincount(pair_task, row * (lookup[p] == y), n_tasks)
            matrix[p, y] = 0.0
        return hits, totals


def _task_of_class(labels: np.ndarray, tasks: np.ndarray, classes: np.ndarray) -> np.ndarray:
    of = np.zeros(int(labels.max()) + 1, dtype=np.int64)
    of[labels] = tasks
    return of[classes]


@dataclass(frozen=True)
class MixedScorer:
    """A mixed run's All as a function of weights on its images (`score`): per unlabelled step, the images it scored
    (`columns` of the weights), their labels and the method's clusters, each step's accuracy under its own match
    refitted on the weighted images, averaged over the steps."""

    labels: np.ndarray  # of every image a resample draws
    steps: tuple[tuple[np.ndarray, Scorer], ...]  # (columns, the step's scorer: one match over its images)

    @property
    def images(self) -> int:
        return len(self.labels)

    @property
    def key(self) -> str:
        """What tells which runs scored the same images in the same steps."""
        digest = hashlib.sha256(np.ascontiguousarray(self.labels, dtype=np.int64).tobytes())
        for columns, _ in self.steps:
            digest.update(np.ascontiguousarray(columns, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def score(self, weights: np.ndarray) -> np.ndarray:
        weights = np.atleast_2d(np.asarray(weights, dtype=float))
        return np.mean([step.score(weights[:, columns]) for columns, step in self.steps], axis=0)


def mixed_scorer(stored: Mapping[str, np.ndarray]) -> MixedScorer:
    """The `MixedScorer` of a mixed run's stored predictions: its All (`cgcd/A`), inductive or transductive."""
    n_steps = layout_of(stored).n_steps
    if n_steps < 2:
        raise NotBootstrapped("a run of the mixed setting without an unlabelled step: no All to resample")

    def one_match(labels: np.ndarray, pred: np.ndarray) -> Scorer:
        return Scorer(labels=labels, tasks=np.zeros(len(labels), dtype=np.int64), sizes=np.ones(1),
                      weighting="sample", pred=pred)

    def array(key: str) -> np.ndarray:
        return np.asarray(stored[key], dtype=np.int64)

    steps = range(1, n_steps)
    if all(Keys.trans_pred(t) in stored for t in steps):  # transductive: each step's own images, disjoint
        parts = [(array(Keys.trans_labels(t)), array(Keys.trans_pred(t))) for t in steps]
        ends = np.cumsum([0] + [len(labels) for labels, _ in parts])
        return MixedScorer(np.concatenate([labels for labels, _ in parts]),
                           tuple((np.arange(ends[i], ends[i + 1]), one_match(*part)) for i, part in enumerate(parts)))
    last = array(Keys.test_labels(n_steps - 1))
    out = []
    for t in steps:
        labels = array(Keys.test_labels(t))
        columns = np.flatnonzero(np.isin(last, labels))  # the classes seen by step t, in the test set's order
        if not np.array_equal(last[columns], labels):
            raise NotBootstrapped(f"a run of the mixed setting whose step {t} scored other test images than the "
                                  f"last step's of its classes")
        out.append((columns, one_match(labels, array(Keys.unified(t)))))
    return MixedScorer(last, tuple(out))


def scorer(stored: Mapping[str, np.ndarray], source: str) -> Scorer | MixedScorer:
    """The `Scorer` of a run's stored predictions for its reported A (`source`, e.g. `wo/A`, `w/A_sample`; `cgcd/A`,
    the mixed setting's All: a `MixedScorer`)."""
    flavour, metric = source.split("/")
    if metric not in BOOTSTRAPPED:
        raise NotBootstrapped(f"{source}: only A and A_sample are recomputed per resample")
    if is_mixed(stored):
        if flavour != "cgcd" or metric != "A":
            raise NotBootstrapped(f"{source}: a run of the mixed setting's reported A is cgcd/A (All)")
        return mixed_scorer(stored)
    layout = layout_of(stored)
    last = layout.n_steps - 1
    labels = np.asarray(stored[Keys.test_labels(last)], dtype=np.int64)
    unified = np.asarray(stored[Keys.unified(last)], dtype=np.int64)
    common: dict[str, Any] = dict(labels=labels, tasks=layout.task_of(labels), sizes=np.asarray(layout.sizes, dtype=float),
                  weighting=BOOTSTRAPPED[metric])
    if flavour == "w":
        return Scorer(**common, pred=unified)
    if flavour not in ("wo", "wo_refit"):
        raise NotBootstrapped(f"{source}: flavour {flavour} is not recomputed per resample")
    evaluator = Evaluator(layout)
    for t in range(layout.n_steps):
        evaluator.freeze_mapping(t, stored[Keys.val_labels(t)], stored[Keys.val_pred(t)])
    maps = None
    if flavour == "wo_refit":
        if Keys.refit(last) not in stored:
            raise NotBootstrapped("its predictions predate the re-fitted maps (flavour wo_refit)")
        maps = {s: evaluator.fit_mapping(s, stored[Keys.val_labels(s)], stored[Keys.refit_pred(last, s)])
                for s in range(last)} | {last: evaluator.mappings[last]}
    return Scorer(**common, correct=evaluator.task_agnostic_correct(labels, unified, maps).astype(float))


def load_scorer(run: Path, source: str) -> Scorer | MixedScorer:
    """`scorer` of the run directory's predictions.npz; NotBootstrapped (one line) without them."""
    try:
        with opened(Path(run) / PREDICTIONS) as stored:
            return scorer({k: stored[k] for k in stored}, source)
    except NewerSchema as err:
        raise NotBootstrapped(str(err)) from None
    except NotBootstrapped:
        raise
    except Exception as err:  # missing or damaged: numpy and zipfile raise many types (BadZipFile, EOFError, ...)
        raise NotBootstrapped(f"no readable {PREDICTIONS} ({type(err).__name__})") from None


def resample_counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """`resamples` rows of how often each of `n` images is drawn, n draws with replacement per row."""
    draws = rng.integers(0, n, size=(resamples, n)) + (np.arange(resamples) * n)[:, None]
    return np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)


def bootstrap_scores(scorers: Mapping[tuple[str, int], Scorer | MixedScorer], resamples: int = 1000,
                     seed: int = 0) -> dict[tuple[str, int], np.ndarray]:
    """Every run's metric (keyed (label, seed)) on each of `resamples` image resamples: runs that scored the same
    images share each draw, so their differences are paired image by image."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for run, s in scorers.items():
        groups.setdefault(s.key, []).append(run)
    out = {run: np.empty(resamples) for run in scorers}
    rng = np.random.default_rng(seed)
    for key in sorted(groups):  # in a fixed order: the same draws whatever order the runs came in
        n = scorers[groups[key][0]].images
        for start in range(0, resamples, CHUNK):
            weights = resample_counts(rng, n, min(CHUNK, resamples - start))
            for run in groups[key]:
                out[run][start:start + len(weights)] = scorers[run].score(weights)
    return out


@dataclass(frozen=True)
class Paired:
    """`first` − `second` over the seeds both ran: the observed difference (mean over seeds), the bootstrap's
    95% percentile interval, the probability that `first` is better (ties count half), and what it rests on."""

    diff: float
    low: float
    high: float
    p_improvement: float
    seeds: int
    images: int
    resamples: int


def paired(scorers: Mapping[tuple[str, int], Scorer | MixedScorer], scores: Mapping[tuple[str, int], np.ndarray],
           first: str, second: str, seed: int = 0, lower_is_better: bool = False) -> Paired | None:
    """The `Paired` comparison of two labels from `bootstrap_scores`; None without a seed both ran on the same
    images. Seeds are resampled too (hierarchically: seeds, then the images drawn for each resample)."""
    shared = sorted(s for (label, s) in scorers if label == first and (second, s) in scorers
                    and scorers[(first, s)].key == scorers[(second, s)].key)
    if not shared:
        return None
    delta = np.stack([scores[(first, s)] - scores[(second, s)] for s in shared])  # seeds × resamples
    observed = float(np.mean([scorers[(first, s)].score(np.ones(scorers[(first, s)].images))[0]
                              - scorers[(second, s)].score(np.ones(scorers[(second, s)].images))[0] for s in shared]))
    rng = np.random.default_rng([seed, len(shared)])
    picks = rng.multinomial(len(shared), np.full(len(shared), 1.0 / len(shared)), size=delta.shape[1])
    diffs = np.einsum("bs,sb->b", picks, delta) / len(shared)
    better = diffs < 0 if lower_is_better else diffs > 0
    return Paired(observed, float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5)),
                  float(better.mean() + 0.5 * (diffs == 0).mean()), len(shared), scorers[(first, shared[0])].images,
                  delta.shape[1])

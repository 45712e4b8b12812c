"""The steps of the `mixed` setting (continual category discovery, `bench.splits.settings`) for the one step
loop (`bench.protocol.runner`): the split is drawn once into a manifest (`split.json`, written with the run and
read back on resume); step t hands the method the step's images (with their labels in the labelled step
only), and is evaluated on the test images of every class seen so far.

Metric rows (percent), all computed from what is stored in `predictions.npz`, so that
`bench metrics recompute` gives them again:

- per step t: `all` (flavour `cgcd`): ONE Hungarian match of the method's predictions on the test images
  of the classes of steps 0..t; `old` / `new` under that match in two senses, flavour `cgcd_hard` (old:
  the labelled step's classes) and `cgcd_soft` (old: the classes of steps before t). Step 0 has `all` only.
  With `setting.evaluation=transductive` (PromptCCD's, `bench.protocol.transductive`), a step t > 0's rows
  score instead the semi-supervised k-means clusters of its own training images, and the test images' rows
  are kept under the flavours `inductive`, `inductive_hard`, `inductive_soft` (step 0 is scored on the test
  images either way: the labelled step has no unlabelled image to cluster).
- with a domain-shifted stream (`setting.domains`): the rows above score the test images of the domains of steps
  0..t, and a `domain` row per domain of the stream (metric: its name) scores that domain's images alone, under a
  match of its own (the stream's accuracy matrix, future domains included).
- per unlabelled step: `k` rows, `true` (new classes the step brings) and `given` (what the method was
  told: the true count, or the estimate of `setting.k`).
- summary (flavour `cgcd`): `All`, `Old_hard`, `New_hard`, `Old_soft`, `New_soft`, the means over the
  unlabelled steps, as the continual category discovery papers average them; `A` = `All`; `F`, the
  forgetting of the labelled classes, their accuracy after the labelled step minus after the last step
  (under each step's own match; NaN where the last step has no Old row: nothing to measure; always on the
  test images, whose images, unlike a step's own, are the same after the labelled step and after the last);
  `D`, discovery, = `New_soft`; `K_error`, the mean |given − true|.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from bench.splits.manifests import Manifest, MixedProtocol, StageDomains, draw, hold_out
from bench.splits.settings import TEST_SELECTIONS
from bench.errors import BenchError
from bench.core.storage import write_atomic
from bench.splits.layout import TaskLayout
from bench.protocol.epoch_selection import LAST, EpochSelection
from bench.protocol.evaluate import clustering_accuracy, old_new_accuracies
from bench.protocol.feeding import Feed
from bench.protocol.outputs import checked
from bench.protocol.step import Step, step_of, step_order
from bench.protocol.transductive import (PROMPTCCD_EVERY, embedding, embeds, promptccd_score,
                                         transductive_predictions)
from bench.runs.predictions import Keys, compact
from bench.runs.rows import MetricRow
from bench.config.spec import RunSpec
from bench.protocol.hooks import MethodHooks

Log = Callable[[str], None]
SPLIT_FILE = "split.json"
# what a mixed run reports as its A and F (its metrics file's reported_A/F), whatever its method declares for class-iNCD
REPORTED: Mapping[str, tuple[str, str]] = {"A": ("cgcd", "A"), "F": ("cgcd", "F")}


def manifest_of(out: Path, protocol: MixedProtocol, train_labels: np.ndarray, seed: int, log: Log,
                validation: float | None = None, given: Manifest | None = None,
                happy: bool | None = None, domains: tuple[StageDomains, list[str]] | None = None) -> Manifest:
    """The run's split: read back from its `split.json` (a resumed run), else the `given` one
    (`setting.manifest_file`), or Happy's draw replayed (`happy`: whether its classes arrive shuffled;
    `bench.splits.happy_draw`), or one drawn with `seed` (each stage from its domain's images, with `domains`: where
    the stages draw and the domains' names), and written; with `validation`, that fraction of
    each labelled class's step-0 images is held out (`bench.splits.manifests.hold_out`)."""
    path = out / SPLIT_FILE
    if path.exists():
        return Manifest.from_json(path.read_text())
    if given is not None:
        manifest = given
    elif happy is not None:
        from bench.splits.happy_draw import happy_draw

        manifest = happy_draw(protocol, train_labels, shuffled=happy)
    elif domains is not None:
        where, names = domains
        manifest = replace(draw(protocol, train_labels, seed, where), domains=tuple(names[k] for k in where.stages))
    else:
        manifest = draw(protocol, train_labels, seed)
    if validation:
        manifest = hold_out(manifest, train_labels, validation, seed)
    write_atomic(path, manifest.to_json())
    sizes = ", ".join(str(len(s)) for s in manifest.steps)
    held = f", {len(manifest.validation)} labelled images held out for validation" if validation else ""
    how = "given" if given is not None else "drawn as Happy's code draws" if happy is not None else f"drawn with seed {seed}"
    stream = f", from the domains {' > '.join(manifest.domains)}" if manifest.domains else ""
    log(f"split {how} into {SPLIT_FILE}: "
        f"{len(manifest.steps)} steps of {sizes} images "
        f"(step 0 labelled){held}{stream}")
    return manifest


def selection_for(rule: str, feed: Feed, source: str, index: np.ndarray, labels: np.ndarray) -> EpochSelection:
    """A step's epoch selection (`bench.protocol.epoch_selection`): for `val`, `oracle` and `happy`, scored by the clustering
    accuracy of a prediction function on the `source` images `index` of classes `labels` (`promptccd`:
    `MixedSteps.step`)."""
    if rule == "last":
        return LAST

    def score(logits: Callable[[torch.Tensor], torch.Tensor]) -> float:
        pred = [logits(x).argmax(1).cpu() for x in feed.batches(source, index)]
        return clustering_accuracy(labels, torch.cat(pred).numpy())

    return EpochSelection(rule, score)


def estimate_new_classes(features: torch.Tensor, known: int, k_max_new: int, seed: int,
                         labelled: tuple[torch.Tensor, np.ndarray] | None = None) -> int:
    """The new classes of an unlabelled step (`bench.protocol.estimate_k`): the step holds every known class
    and some new ones, so K runs over known+1 .. known+k_max_new and the estimate is K − known. Without
    `labelled`, by k-means silhouette over the step's images; with it (the labelled step's features and
    classes), by GCD's Brent search over k-means of both, scored on the labelled images."""
    from bench.protocol.estimate_k import brent_k, estimate_k

    def unit(x: torch.Tensor) -> np.ndarray:
        return torch.nn.functional.normalize(x.float(), dim=1).cpu().numpy()

    if labelled is None:
        x = unit(features)
        return estimate_k(x, max(2, known + 1), min(known + k_max_new, len(x) - 1), seed) - known
    x = np.concatenate([unit(labelled[0]), unit(features)])
    rows = np.arange(len(labelled[0]))
    return brent_k(x, rows, labelled[1], known + 1, min(known + k_max_new, len(x)), seed) - known


class MixedSteps:
    """The mixed setting's steps for the step loop (`bench.protocol.steps.Steps`): step 0 hands the
    labelled images of the labelled classes with their labels; step t > 0 the unlabelled images of step t
    (old and new classes mixed), with the count of new classes given or estimated (`setting.k`); each step
    is evaluated on the test images of every class seen so far, from what it stores (`step_rows`)."""

    def __init__(self, spec: RunSpec, parts: Any, feed: Feed, out: Path, log: Log) -> None:
        self.spec, self.method, self.feed, self.log = spec, parts.method, feed, log
        self.data, self.layout = parts.data, parts.layout
        self.setting = spec.config["setting"]
        self.rule = self.setting.get("selection", "last")
        happy = (self.setting.get("arrival", "canonical") != "canonical"
                 if self.setting.get("draw", "bench") == "happy" else None)
        stream = self.data.extra.get("stream")
        domains = (parts.domains, stream["names"]) if parts.domains is not None else None
        self.manifest = manifest_of(out, parts.protocol, self.data.train.labels, int(self.setting["manifest_seed"]),
                                    log, self.setting["val_fraction"] if self.rule == "val" else None, parts.manifest,
                                    happy, domains)
        self.test_labels = np.asarray(self.data.test.labels)
        self.test_step = arrival_step(self.test_labels, self.layout)
        # a domain-shifted stream: each test image's domain, and each stage's (`bench.splits.domains`)
        self.test_domain = np.asarray(stream["test"]) if domains is not None else None
        self.stage_domain = np.asarray(parts.domains.stages) if domains is not None else None
        self.domain_names = list(stream["names"]) if domains is not None else []
        self.evaluation = self.setting.get("evaluation", "inductive")
        if (self.evaluation == "transductive" or self.rule == "promptccd") and not embeds(self.method):
            raise BenchError(f"method {spec.method!r} reads tokens and gives no representation (its embed()): "
                             "setting.evaluation=transductive and setting.selection=promptccd cluster it; use "
                             "setting.evaluation=inductive with another selection, or implement embed()")
        if self.setting["k"] != "known" and not embeds(self.method):
            raise BenchError(f"method {spec.method!r} reads tokens and gives no representation (its embed()): "
                             f"setting.k={self.setting['k']} estimates K on it; use setting.k=known, or implement embed()")

    def state_dict(self) -> dict[str, Any]:
        return {}  # its rows come from the stored predictions alone

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass

    def step(self, t: int, stored: Mapping[str, np.ndarray]) -> Step:
        """Step t's images (labelled in a labelled step only), told of the classes of the earlier steps (the K
        each was given, from `stored`) and of its new ones (given or estimated), with the epoch selection its
        rule scores. `evaluate` reads all of that back from the `Step` it returns."""
        spec, manifest, layout = self.spec, self.manifest, self.layout
        known = int(sum(stored[Keys.k_given(s)][0] for s in range(t)))
        n_new = layout.sizes[t]
        if t > 0 and self.setting["k"] != "known":
            # GCD's search scores k-means on the labelled step's images: the protocol holds their labels
            first = manifest.steps[0]
            given = ((self._represented(first), self.data.train.labels[first]) if self.setting["k"] == "brent"
                     else None)
            rows = step_order(manifest.steps[t], spec.seed, t)  # in the order the method gets them
            n_new = max(1, estimate_new_classes(self._represented(rows), known,
                                                self.setting["k_max_new"] or layout.sizes[0], spec.seed * 1000 + t,
                                                given))
        # labels reach the method only in a labelled step, and only that step's (`step_of`)
        labels = self.data.train.labels if manifest.labelled[t] else None
        return step_of(self.feed, t, manifest.steps, n_classes=n_new, offset=known, labels=labels,
                       selection=self._selection(t))

    def _selection(self, t: int) -> EpochSelection:
        """Step t's epoch selection (`setting.selection`), scored on the images its rule reads."""
        feed, layout, manifest = self.feed, self.layout, self.manifest
        if self.rule == "promptccd":  # k-means at every class of the protocol over every test image of them
            every = np.flatnonzero(self.test_step < layout.n_steps)
            score = promptccd_score(self.method, feed, every, self.test_labels[every],
                                    np.unique(self.test_labels[self.test_step == 0]), layout.num_classes,
                                    self.spec.seed * 1000 + t)
            return EpochSelection("promptccd", score, every=PROMPTCCD_EVERY)
        if self.rule in TEST_SELECTIONS:
            seen = self._seen(t, every_domain=False)
            return selection_for(self.rule, feed, "test", seen, self.test_labels[seen])
        return selection_for(self.rule, feed, "train", manifest.validation, self.data.train.labels[manifest.validation])

    def _seen(self, t: int, every_domain: bool) -> np.ndarray:
        """The test images of the classes of steps 0..t: in a domain-shifted stream, in the domains of stages 0..t
        (or, `every_domain`, in every domain of the stream: what its per-domain rows score)."""
        seen = self.test_step <= t
        if self.test_domain is not None and self.stage_domain is not None and not every_domain:
            seen &= np.isin(self.test_domain, self.stage_domain[:t + 1])
        return np.flatnonzero(seen)

    def _represented(self, rows: np.ndarray) -> torch.Tensor:
        """What K is estimated on for the training images `rows`: their frozen features for a method on features;
        for one on tokens, the method's representation of them so far (its `embed`), as GCD estimates K on its
        own model's features."""
        if self.feed.train is not None and self.method.runs_on.inputs == "features":
            return self.feed.train.subset(rows).plain
        return embedding(self.method, self.feed.batches("train", rows))

    def evaluate(self, t: int, step: Step, method: MethodHooks, stored: dict[str, np.ndarray]) -> list[MetricRow]:
        """Step t's rows, from what it stores: the method's predictions at the classes `step` told it of
        (`offset` known + `n_classes` new), the K it was given, and the epochs `step.selection` kept."""
        stored[Keys.mixed] = np.asarray([1], dtype=np.int8)  # `replay` reads it
        selection, classes = step.selection, step.offset + step.n_classes
        if self.rule != "last":
            stored[Keys.selected(t)] = compact(np.asarray([e for e, _ in selection.chosen], dtype=np.int64))
            for i, scored in enumerate(selection.scores):  # (epoch, score) of every epoch scored: the page's curve
                stored[Keys.epoch_score(t, i)] = np.asarray(scored, dtype=np.float32).reshape(-1, 2)
            if not selection.chosen:  # K-means and its kin train no epochs: nothing was chosen, nothing read the test
                self.log(f"stage {t}: no epochs to select (the method trains none); {self.rule} selection not used")
            else:
                self.log(f"stage {t}: kept epochs {', '.join(f'{e + 1}/{n}' for e, n in selection.chosen)} "
                         f"by {self.rule}{' (ORACLE ON TEST)' if self.rule in TEST_SELECTIONS else ''}")
        seen = self._seen(t, every_domain=True)
        if self.test_domain is not None and self.stage_domain is not None:
            stored[Keys.domain_names] = np.asarray(self.domain_names)
            stored[Keys.stage_domains] = compact(self.stage_domain)
            stored[Keys.test_domain(t)] = compact(self.test_domain[seen])
        stored[Keys.test_labels(t)] = compact(self.test_labels[seen])
        stored[Keys.unified(t)] = compact(_predict(method, self.feed, seen, classes, t))
        stored[Keys.k_given(t)] = compact(np.asarray([step.n_classes]))
        if self.evaluation == "transductive" and t > 0:
            first, rows = self.manifest.steps[0], self.manifest.steps[t]
            stored[Keys.trans_labels(t)] = compact(self.data.train.labels[rows])
            stored[Keys.trans_pred(t)] = compact(transductive_predictions(
                self.method, self.feed, first, self.data.train.labels[first], rows, classes, self.spec.seed * 1000 + t))
        return step_rows(t, stored, self.layout)

    def summary(self, rows: list[MetricRow]) -> list[MetricRow]:
        return summary(rows, self.spec.n_steps)

    def describe(self, t: int, rows: list[MetricRow]) -> str:
        return _step_line(t, self.spec.n_steps, rows)


@torch.no_grad()
def _predict(method: MethodHooks, feed: Feed, index: np.ndarray, classes: int, t: int) -> np.ndarray:
    preds = [checked(method, "logits", method.logits(x), len(x), classes, t).argmax(1).cpu()
             for x in feed.batches("test", index)]
    return torch.cat(preds).numpy() if preds else np.empty(0, dtype=np.int64)


def arrival_step(labels: np.ndarray, layout: TaskLayout) -> np.ndarray:
    """The step that brings each class; a class the protocol leaves out gets n_steps (never seen)."""
    labels = np.asarray(labels, dtype=np.int64)
    inside = labels < layout.num_classes
    return np.where(inside, layout.task_of(np.where(inside, labels, 0)), layout.n_steps)


def step_rows(t: int, stored: Mapping[str, np.ndarray], layout: TaskLayout) -> list[MetricRow]:
    """Step t's rows from what it stored: its test labels, the method's predictions, the K it was given (and,
    evaluated transductively, its own images' labels and clusters: those are its `cgcd` rows then). In a
    domain-shifted stream its rows score the images of the domains of stages 0..t, and a `domain` row per domain of
    the stream (`domain_rows`)."""
    labels, pred = np.asarray(stored[Keys.test_labels(t)]), np.asarray(stored[Keys.unified(t)])
    by_domain: list[MetricRow] = []
    if Keys.test_domain(t) in stored:
        domain = np.asarray(stored[Keys.test_domain(t)])
        by_domain = domain_rows(t, labels, pred, domain, [str(n) for n in np.asarray(stored[Keys.domain_names])])
        kept = np.isin(domain, np.asarray(stored[Keys.stage_domains])[:t + 1])
        labels, pred = labels[kept], pred[kept]
    inductive = accuracy_rows(t, labels, pred, layout) + by_domain
    if t == 0:
        return inductive + selected_rows(t, stored)
    rows = inductive
    if Keys.trans_pred(t) in stored:
        rows = accuracy_rows(t, np.asarray(stored[Keys.trans_labels(t)]), np.asarray(stored[Keys.trans_pred(t)]), layout)
        rows += [MetricRow(r.step, r.group, r.flavour.replace("cgcd", "inductive"), r.metric, r.value)
                 for r in inductive]
    rows += [MetricRow(t, "k", "cgcd", "true", float(layout.sizes[t])),
             MetricRow(t, "k", "cgcd", "given", float(stored[Keys.k_given(t)][0]))]
    return rows + selected_rows(t, stored)


def accuracy_rows(t: int, labels: np.ndarray, pred: np.ndarray, layout: TaskLayout) -> list[MetricRow]:
    """`all` under one match of `pred` to `labels`; after step 0, `old`/`new` under it, hard and soft."""
    arrived = arrival_step(labels, layout)
    hard, soft = old_new_accuracies(labels, pred, np.unique(labels[arrived == 0]), np.unique(labels[arrived < t]))
    rows = [MetricRow(t, "all", "cgcd", "acc", hard["all"])]
    if t == 0:
        return rows
    for flavour, acc in (("cgcd_hard", hard), ("cgcd_soft", soft)):
        rows += [MetricRow(t, group, flavour, "acc", acc[group]) for group in ("old", "new") if not np.isnan(acc[group])]
    return rows


def domain_rows(t: int, labels: np.ndarray, pred: np.ndarray, domain: np.ndarray, names: list[str]) -> list[MetricRow]:
    """Per domain of the stream, the accuracy (its own Hungarian match) on its test images of the classes seen by
    step t: group `domain`, metric the domain's name; domains a later stage brings too (a row of the stream's
    accuracy matrix, docs/settings.md#domain-shifted-streams)."""
    return [MetricRow(t, "domain", "cgcd", name, clustering_accuracy(labels[domain == k], pred[domain == k]))
            for k, name in enumerate(names) if (domain == k).any()]


def selected_rows(t: int, stored: Mapping[str, np.ndarray]) -> list[MetricRow]:
    """The epoch (1-based) each training loop of step t kept, where the run selected among epochs."""
    chosen = np.asarray(stored.get(Keys.selected(t), []))
    return [MetricRow(t, "selected_epoch", "cgcd", f"loop_{i}", float(e + 1)) for i, e in enumerate(chosen)]


def summary(rows: list[MetricRow], n_steps: int) -> list[MetricRow]:
    """The run's summary rows (module docstring) from its per-step rows."""
    at = {(r.step, r.group, r.flavour, r.metric): r.value for r in rows}
    steps = range(1, n_steps)

    def mean(group: str, flavour: str, metric: str = "acc") -> float:
        values = [at[(t, group, flavour, metric)] for t in steps if (t, group, flavour, metric) in at]
        return float(np.mean(values)) if values else float("nan")

    out = {"All": mean("all", "cgcd"), "Old_hard": mean("old", "cgcd_hard"), "New_hard": mean("new", "cgcd_hard"),
           "Old_soft": mean("old", "cgcd_soft"), "New_soft": mean("new", "cgcd_soft")}
    last = n_steps - 1
    # no Old row at the last step (none of its test images is of a labelled class, or no later step): no
    # forgetting can be measured, and NaN says so (0 would claim none)
    labelled_last = at.get((last, "old", "inductive_hard", "acc"), at.get((last, "old", "cgcd_hard", "acc"), float("nan")))
    out.update(A=out["All"], F=at[(0, "all", "cgcd", "acc")] - labelled_last, D=out["New_soft"],
               K_error=float(np.mean([abs(at[(t, "k", "cgcd", "given")] - at[(t, "k", "cgcd", "true")])
                                      for t in steps])) if n_steps > 1 else 0.0)
    return [MetricRow(last, "summary", "cgcd", metric, value) for metric, value in out.items()]


def replay(stored: Mapping[str, np.ndarray], layout: TaskLayout) -> list[MetricRow]:
    """A finished mixed run's rows from its `predictions.npz` alone (`bench metrics recompute`)."""
    rows = [row for t in range(layout.n_steps) for row in step_rows(t, stored, layout)]
    return rows + summary(rows, layout.n_steps)


def _step_line(t: int, n_steps: int, rows: list[MetricRow]) -> str:
    acc = {(r.group, r.flavour): r.value for r in rows if r.metric == "acc"}
    said = f"stage {t}/{n_steps - 1}{' (labelled)' if t == 0 else ''}: all {acc[('all', 'cgcd')]:.1f}"
    if t > 0:
        said += (f", old/new hard {acc.get(('old', 'cgcd_hard'), float('nan')):.1f}/"
                 f"{acc.get(('new', 'cgcd_hard'), float('nan')):.1f}, soft {acc.get(('old', 'cgcd_soft'), float('nan')):.1f}/"
                 f"{acc.get(('new', 'cgcd_soft'), float('nan')):.1f}")
        k = {r.metric: r.value for r in rows if r.group == "k"}
        said += f", K {k['given']:.0f} (true {k['true']:.0f})"
    by_domain = [f"{r.metric} {r.value:.1f}" for r in rows if r.group == "domain"]
    if by_domain:
        said += f"; by domain: {', '.join(by_domain)}"
    return said

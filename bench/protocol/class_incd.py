"""The steps of class-iNCD, the paper's protocol, for the one step loop (`bench.protocol.runner`): step t hands
the method the unlabelled training images of task t's classes (and earlier tasks' to a reference method that
declares `sees_past_steps`), and evaluates it on the test images of tasks 0..t: task t's map frozen on its val
images, the earlier tasks' re-fitted on theirs (`bench.protocol.evaluate`), each earlier head read again unless
the method declares that its task heads stay as they were (`RunsOn.frozen_task_heads`). What the evaluator was
given is stored (`bench.runs.predictions`), so `bench metrics recompute` gives the same rows again (`replay`).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np
import torch

from bench.splits.layout import TaskLayout
from bench.protocol.evaluate import Evaluator
from bench.protocol.feeding import Feed
from bench.protocol.outputs import checked
from bench.protocol.step import Step, step_of
from bench.runs import predictions
from bench.runs.predictions import Keys
from bench.runs.rows import MetricRow
from bench.config.spec import RunSpec
from bench.protocol.hooks import MethodHooks

Labelled = tuple[np.ndarray, np.ndarray]  # the labels of a split's images, and the task of each


class ClassIncrementalSteps:
    """Class-iNCD's steps (`bench.protocol.steps.Steps`): one per task of the run's layout."""

    def __init__(self, spec: RunSpec, parts: Any, feed: Feed) -> None:
        self.n_steps, self.layout, self.feed = spec.n_steps, parts.layout, feed
        self.evaluator = Evaluator(parts.layout)
        val, test = parts.val_images.labels, parts.data.test.labels
        self.val: Labelled = (val, parts.layout.task_of(val))
        self.test: Labelled = (test, parts.layout.task_of(test))

    def state_dict(self) -> dict[str, Any]:
        return self.evaluator.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.evaluator.load_state_dict(dict(state))

    def step(self, t: int, stored: Mapping[str, np.ndarray]) -> Step:
        """Task t's unlabelled training images (and earlier tasks' for a method that sees them)."""
        tasks = [np.flatnonzero(self.feed.train_task == s) for s in range(t + 1)]
        return step_of(self.feed, t, tasks, n_classes=self.layout.sizes[t], offset=self.layout.offsets[t])

    def evaluate(self, t: int, step: Step, method: MethodHooks, stored: dict[str, np.ndarray]) -> list[MetricRow]:
        """Step `t`'s metric rows (the classes it evaluates are the layout's, not the `step`'s to say); what the
        evaluator was given for them goes into `stored`."""
        (val_labels_all, val_task), (test_labels, test_task) = self.val, self.test
        feed, evaluator = self.feed, self.evaluator
        val_pred = {s: self._earlier_head(method, s, t, stored) for s in range(t)}  # what re-fits task s's map
        val_pred[t] = _task_predictions(method, feed, t, np.flatnonzero(val_task == t), self.layout, t)
        val_labels = {s: val_labels_all[val_task == s] for s in range(t + 1)}
        evaluator.freeze_mapping(t, val_labels[t], val_pred[t])
        refit = {s: evaluator.fit_mapping(s, val_labels[s], val_pred[s]) for s in range(t)}
        seen = np.flatnonzero(test_task <= t)
        unified, task_pred = _predict(method, feed.batches("test", seen), t, test_task[seen] == t, self.layout, t)
        rows = evaluator.evaluate(t, test_labels[seen], unified, task_pred, refit=refit)
        predictions.record(stored, t, val_labels=val_labels[t], val_pred=val_pred[t], test_labels=test_labels[seen],
                           unified=unified, task_pred=task_pred, mapping=evaluator.mappings[t],
                           refit_pred=[val_pred[s] for s in range(t)])
        return rows

    def _earlier_head(self, method: MethodHooks, task: int, step: int, stored: Mapping[str, np.ndarray]) -> np.ndarray:
        """Task `task`'s head on its val images as it answers after step `step` (> task). A method that declares
        `runs_on.frozen_task_heads` answers as it did at step `task`, which stored that answer (`val_pred_{task}`,
        kept in the checkpoint): reusing it saves a pass over the task's mapping images (on CIFAR and
        TinyImageNet its whole training set) at every later step, and stores the same `refit_pred`."""
        if method.runs_on.frozen_task_heads:
            return stored[Keys.val_pred(task)]
        index = np.flatnonzero(self.val[1] == task)
        return _task_predictions(method, self.feed, task, index, self.layout, step)

    def summary(self, rows: list[MetricRow]) -> list[MetricRow]:
        return self.evaluator.summary(rows, self.n_steps)

    def describe(self, t: int, rows: list[MetricRow]) -> str:
        acc = {(r.group, r.flavour): r.value for r in rows if r.metric == "acc"}
        return (f"step {t + 1}/{self.n_steps}: task-specific {acc[(f'task_{t}', 'task')]:.1f}, "
                f"all wo {acc[('all', 'wo')]:.1f}, all w {acc[('all', 'w')]:.1f}")


def replay(stored: Mapping[str, np.ndarray], layout: TaskLayout) -> list[MetricRow]:
    """A finished class-iNCD run's rows, summary included, from its `predictions.npz` alone."""
    evaluator, rows = Evaluator(layout), []
    # runs recorded before the re-fitted maps were kept have no `wo_refit` flavour
    refits = all(Keys.refit(t) in stored for t in range(layout.n_steps))
    for t in range(layout.n_steps):
        evaluator.freeze_mapping(t, stored[Keys.val_labels(t)], stored[Keys.val_pred(t)])
        refit = {s: evaluator.fit_mapping(s, stored[Keys.val_labels(s)], stored[Keys.refit_pred(t, s)])
                 for s in range(t)} if refits else None
        rows += evaluator.evaluate(t, stored[Keys.test_labels(t)], stored[Keys.unified(t)], stored[Keys.task_pred(t)],
                                   refit=refit)
    return rows + evaluator.summary(rows, layout.n_steps)


@torch.no_grad()
def _predict(method: MethodHooks, batches: Iterator[torch.Tensor], task: int, current: np.ndarray, layout: TaskLayout,
             step: int, unified: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Argmax of the unified head on every batch (unless `unified` is False), and of task `task`'s
    head on the rows where `current` holds: both read the same batch, so each image's prefix runs once.
    Each answer is checked to be of the shape `layout` gives after step `step` (`bench.protocol.outputs`)."""
    unified_pred, task_pred, start = [], [], 0
    seen = layout.offsets[step] + layout.sizes[step]
    for x in batches:
        rows = torch.as_tensor(current[start: start + len(x)], device=x.device)
        if unified:
            unified_pred.append(checked(method, "logits", method.logits(x), len(x), seen, step).argmax(1).cpu())
        if rows.any():
            answer = checked(method, f"task_logits(task {task + 1})", method.task_logits(x[rows], task),
                             int(rows.sum()), layout.sizes[task], step)
            task_pred.append(answer.argmax(1).cpu())
        start += len(x)
    empty = torch.empty(0, dtype=torch.long)
    return torch.cat(unified_pred or [empty]).numpy(), torch.cat(task_pred or [empty]).numpy()


def _task_predictions(method: MethodHooks, feed: Feed, task: int, index: np.ndarray, layout: TaskLayout,
                      step: int) -> np.ndarray:
    """Task `task`'s head, read through the encoder as it is after step `step`, on the val images `index` (the
    same head and images that froze its map at its own step: at a later step they re-fit it)."""
    return _predict(method, feed.batches("val", index), task, np.ones(len(index), dtype=bool), layout, step,
                    unified=False)[1]

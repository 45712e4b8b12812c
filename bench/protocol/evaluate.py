"""Evaluation of class-iNCD after every step (docs/methods.md#evaluation). All formulas live here.

Notation: T tasks; task k owns the classes [o_k, o_k + C_k). After step t the test set holds the
images of tasks 0..t. `u(x)` is the argmax of the unified head (a cluster id over all Σ_{k<=t} C_k
clusters seen so far), `h_k(x)` the argmax of task k's own head (a local cluster id in 0..C_k-1).

Hungarian accuracy (the authors' `cluster_acc`): for labels y and predictions p build the D×D
contingency matrix w[p, y], D = max(max p, max y) + 1, find the one-to-one map m: cluster → class
maximising Σ w[p, m(p)] (scipy's linear_sum_assignment) and return Σ_i [m(p_i) = y_i] / N.

Per step t the evaluator reports, in percent:

- task-specific accuracy (`task_t`, flavour `task`): Hungarian accuracy of h_t on task t's images,
  labels made local (y − o_t).
- task-agnostic accuracy of task k <= t (`task_k`, flavour `wo`, the FRoST protocol): at the end of
  step k a map π_k: local class → local cluster is frozen by a Hungarian match of h_k on task k's
  val images. A test image of task k with class c is correct iff u(x) = o_k + π_k(c − o_k). The
  unified head must therefore route the image into task k's segment; this map is never re-fitted.
  A class with no val image gets no π_k, so its test images are never counted correct.
- the same with the map re-fitted at every evaluation (`task_k`, flavour `wo_refit`): after step t,
  π_k^t is the Hungarian match of h_k, read through the encoder as it is after step t, on task k's
  val images; the authors' testers for EwC, LwF, DER, CaSSLe and ResTune do this
  (`utils/*_testers.py::test_ind_cluster`, its `ind_gen_loader`), so the paper's A and F of those
  methods are in this flavour. π_t^t = π_t: the two flavours differ only on earlier tasks, and only
  for a method whose encoder or old heads move after their step. A method that declares they do not
  (`RunsOn.frozen_task_heads`) is not read again: h_k's answer at step k re-fits π_k^t, which is π_k.
  Computed when the step's re-fitted maps are given (every run since they were added; `bench metrics
  recompute` cannot add them to older runs, whose stored predictions lack the old tasks' heads on their
  val images).
- accuracy with clustering of task k (`task_k`, flavour `w`): Hungarian accuracy of u on task k's
  images alone.
- group accuracies for `old` (tasks < t; absent at t = 0), `new` (task t) and `all` (tasks <= t):
  `acc` is class-weighted, Σ_k C_k·acc_k / Σ_k C_k (the authors' `calculate_weighted_avg`), and
  `acc_sample` is sample-weighted, correct / images. For `wo` the acc_k are the per-task `wo`
  accuracies; for `w` ONE Hungarian match is fitted on the whole group and acc_k, acc_sample are
  measured under that single match (acc_sample is then the authors' `Acc_all_W_cluster`).
- NMI and ARI of u against the labels for each group (flavour `w`, in 0..1).
- the category-discovery accuracies that generalised and continual category discovery papers report
  (GCD, PromptCCD, Happy: "All / Old / New"), sample-weighted, for the groups `all`, `old`, `new`:
  flavour `gcd` fits ONE Hungarian match of u on all images of tasks <= t and splits its accuracy
  into old (tasks < t) and new (task t) images; flavour `gcd_sep` fits separate matches on the old
  and on the new images (its `all` is the single match's). The two differ where the single match
  gives an old class a new cluster, or the reverse.

Summary after the last step T−1 (group `summary`, for each flavour f in {wo, w} and `wo_refit`
where the run has it):

- A = acc of `all` at T−1 (class-weighted); A_sample likewise with acc_sample.
- F = a_0 − a_{T−1}, the paper's forgetting: a_0 is the task-specific accuracy on task 0 after
  step 0, a_k (k >= 1) the flavour-f accuracy on task 0 after step k.
- F_max = max_{k < T−1} a_k − a_{T−1}, the usual "max over steps" forgetting.
With T = 1 both are 0.
- For `gcd` and `gcd_sep`: All, Old and New = the mean over steps of the per-step `all`, `old` and
  `new` accuracy, as continual category discovery papers average their steps (Old over steps 1..T−1;
  absent with T = 1).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from bench.splits.layout import TaskLayout
from bench.runs.rows import MetricRow

__all__ = ["Evaluator", "MetricRow", "TaskLayout"]  # the last two live below the protocol; imported from here too

FLAVOURS = ("wo", "w")
REFIT = "wo_refit"  # W/O with every task's map re-fitted at each evaluation (the authors' IL testers)
CD_FLAVOURS = ("gcd", "gcd_sep")  # the category-discovery papers' All / Old / New


def hungarian_mapping(y_true: np.ndarray, y_pred: np.ndarray) -> dict[int, int]:
    """Predicted cluster → true class maximising the number of matches."""
    y_true, y_pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    if len(y_true) == 0:
        return {}
    d = int(max(y_pred.max(), y_true.max())) + 1
    w = np.zeros((d, d), dtype=np.int64)
    np.add.at(w, (y_pred, y_true), 1)
    from scipy.optimize import linear_sum_assignment  # imported where used: TaskLayout alone needs neither

    rows, cols = linear_sum_assignment(w.max() - w)
    return dict(zip(rows.tolist(), cols.tolist()))


def category_discovery_rows(step: int, labels: np.ndarray, unified: np.ndarray,
                            groups: dict[str, np.ndarray]) -> list[MetricRow]:
    """`gcd` and `gcd_sep` accuracies of the groups present (see the module docstring)."""
    single = _matched(labels, unified)  # one match over every seen class
    rows = []
    for group, sel in groups.items():
        if not sel.any():
            continue
        separate = single[sel] if group == "all" else _matched(labels[sel], unified[sel])
        rows.append(MetricRow(step, group, "gcd", "acc", 100.0 * float(single[sel].mean())))
        rows.append(MetricRow(step, group, "gcd_sep", "acc", 100.0 * float(separate.mean())))
    return rows


def _matched(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Per-sample correctness under the best one-to-one map of the given predictions."""
    y_true, y_pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    mapping = hungarian_mapping(y_true, y_pred)
    lookup = np.full(len(mapping), -1, dtype=np.int64)  # the map is total over 0..D-1
    lookup[list(mapping)] = list(mapping.values())
    return lookup[y_pred] == y_true


def old_new_accuracy(labels: np.ndarray, pred: np.ndarray, old_classes: np.ndarray) -> dict[str, float]:
    """All / Old / New accuracy (%) of one step's predictions as the continual category discovery papers
    report it: ONE Hungarian match of `pred` on every image, its correctness split by whether an image's
    class is in `old_classes`. Which classes are old is the caller's: the labelled step's classes
    ("hard"), or every class seen before this step ("soft"); the two differ from the second unlabelled
    step on. A group without images is NaN."""
    return old_new_accuracies(labels, pred, old_classes)[0]


def old_new_accuracies(labels: np.ndarray, pred: np.ndarray, *old_classes: np.ndarray) -> list[dict[str, float]]:
    """`old_new_accuracy` for each set of old classes, all under the one match (fitted once)."""
    labels = np.asarray(labels, dtype=np.int64)
    correct = _matched(labels, pred)

    def percent(sel: np.ndarray) -> float:
        return 100.0 * float(correct[sel].mean()) if sel.any() else float("nan")

    every = percent(np.ones(len(labels), dtype=bool))
    out = []
    for classes in old_classes:
        old = np.isin(labels, np.asarray(classes, dtype=np.int64))
        out.append({"all": every, "old": percent(old), "new": percent(~old)})
    return out


def clustering_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return 100.0 * float(_matched(y_true, y_pred).mean()) if len(y_true) else 0.0


class Evaluator:
    """Holds the frozen maps π_k and turns predictions into metric rows."""

    def __init__(self, layout: TaskLayout) -> None:
        self.layout = layout
        self.mappings: dict[int, np.ndarray] = {}

    def fit_mapping(self, task: int, val_labels: np.ndarray, val_task_pred: np.ndarray) -> np.ndarray:
        """A map local class → local cluster of task `task` from its head's predictions on the task's val
        images (absolute labels); −1 for a class absent from them."""
        if not 0 <= task < self.layout.n_steps:
            raise ValueError(f"task {task} is not in 0..{self.layout.n_steps - 1}")
        offset, size = self.layout.offsets[task], self.layout.sizes[task]
        local = np.asarray(val_labels, dtype=np.int64) - offset
        pred = np.asarray(val_task_pred, dtype=np.int64)
        if local.shape != pred.shape:
            raise ValueError(f"task {task}: {len(local)} val labels but {len(pred)} predictions")
        # Out-of-range ids would silently widen the Hungarian matrix (the authors' quirk 2,
        # docs/methods.md#hungarian-maps).
        if local.size and (local.min() < 0 or local.max() >= size):
            raise ValueError(f"task {task}: val labels must be classes {offset}..{offset + size - 1}")
        if pred.size and (pred.min() < 0 or pred.max() >= size):
            raise ValueError(f"task {task}: task-head predictions must be local clusters 0..{size - 1}")
        pi = np.full(size, -1, dtype=np.int64)  # a class absent from val is never counted correct
        present = set(local.tolist())
        for cluster, cls in hungarian_mapping(local, pred).items():
            if cls in present:
                pi[cls] = cluster
        return pi

    def freeze_mapping(self, task: int, val_labels: np.ndarray, val_task_pred: np.ndarray) -> None:
        """π_task, frozen from now on (flavour `wo`)."""
        self.mappings[task] = self.fit_mapping(task, val_labels, val_task_pred)

    def _wo_correct(self, labels: np.ndarray, unified: np.ndarray, tasks: np.ndarray,
                    mappings: dict[int, np.ndarray]) -> np.ndarray:
        correct = np.zeros(len(labels), dtype=bool)
        for k in np.unique(tasks):
            sel = tasks == k
            offset = self.layout.offsets[k]
            target = mappings[int(k)][labels[sel] - offset]
            correct[sel] = (target >= 0) & (unified[sel] == offset + target)
        return correct

    def task_agnostic_correct(self, labels: np.ndarray, unified: np.ndarray,
                              mappings: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """Whether each test image is correct task-agnostically (flavour `wo`, or `wo_refit` with its re-fitted
        `mappings`): what the group accuracies average, per image, for a bootstrap over the test images."""
        labels, unified = np.asarray(labels, dtype=np.int64), np.asarray(unified, dtype=np.int64)
        return self._wo_correct(labels, unified, self.layout.task_of(labels), mappings or self.mappings)

    def _check(self, step: int, labels: np.ndarray, unified: np.ndarray, task_pred: np.ndarray) -> np.ndarray:
        """Refuse inputs that would silently give wrong numbers; returns the task of each test image."""
        if not 0 <= step < self.layout.n_steps:
            raise ValueError(f"step {step} is not in 0..{self.layout.n_steps - 1}")
        missing = [k for k in range(step + 1) if k not in self.mappings]
        if missing:
            raise RuntimeError(f"freeze_mapping() was not called for task(s) {missing} before evaluating step {step}")
        if labels.shape != unified.shape:
            raise ValueError(f"{len(labels)} labels but {len(unified)} unified-head predictions")
        tasks = self.layout.task_of(labels)
        counts = np.bincount(tasks, minlength=self.layout.n_steps)
        if counts[step + 1:].any():
            raise ValueError(f"step {step}: the test labels include classes of tasks after this step")
        if not counts[: step + 1].all():
            # a task without test images has no accuracy: a data bug upstream, better than a 0 or a NaN
            raise ValueError(f"step {step}: no test images for task(s) {np.flatnonzero(counts[: step + 1] == 0).tolist()}")
        seen, size = self.layout.offsets[step] + self.layout.sizes[step], self.layout.sizes[step]
        if unified.size and (unified.min() < 0 or unified.max() >= seen):
            raise ValueError(f"step {step}: unified-head predictions must be clusters 0..{seen - 1}")
        if len(task_pred) != counts[step]:
            raise ValueError(f"step {step}: {len(task_pred)} task-head predictions for {counts[step]} images of task {step}")
        if task_pred.size and (task_pred.min() < 0 or task_pred.max() >= size):
            raise ValueError(f"step {step}: task-head predictions must be local clusters 0..{size - 1}")
        return tasks

    def evaluate(self, step: int, labels: np.ndarray, unified_pred: np.ndarray,
                 task_pred: np.ndarray, refit: dict[int, np.ndarray] | None = None) -> list[MetricRow]:
        """The rows of step `step` (see the module docstring). `labels`/`unified_pred` cover the test
        images of tasks 0..step; `task_pred` is h_step on task step's images, in the same order.
        `refit`, when given, holds the maps of the earlier tasks re-fitted now (`fit_mapping` on their
        val images through the current encoder): the `wo_refit` rows."""
        labels = np.asarray(labels, dtype=np.int64)
        unified = np.asarray(unified_pred, dtype=np.int64)
        task_pred = np.asarray(task_pred, dtype=np.int64)
        tasks = self._check(step, labels, unified, task_pred)
        flavours = {"wo": self._wo_correct(labels, unified, tasks, self.mappings)}
        if refit is not None:
            missing = [k for k in range(step) if k not in refit]
            if missing:
                raise ValueError(f"step {step}: no re-fitted map for task(s) {missing}")
            # the current task's map was fitted just now: the frozen one is the re-fitted one
            flavours[REFIT] = self._wo_correct(labels, unified, tasks, {**refit, step: self.mappings[step]})
        current = tasks == step
        rows = []
        local = labels[current] - self.layout.offsets[step]
        rows.append(MetricRow(step, f"task_{step}", "task", "acc", clustering_accuracy(local, task_pred)))

        for k in range(step + 1):
            sel = tasks == k
            for flavour, correct in flavours.items():
                rows.append(MetricRow(step, f"task_{k}", flavour, "acc", 100.0 * float(correct[sel].mean())))
            rows.append(MetricRow(step, f"task_{k}", "w", "acc", clustering_accuracy(labels[sel], unified[sel])))

        groups = {"old": tasks < step, "new": tasks == step, "all": tasks <= step}
        for group, sel in groups.items():
            if not sel.any():
                continue
            members = sorted(set(tasks[sel].tolist()))
            weights = np.array([self.layout.sizes[k] for k in members], dtype=float)
            w_correct = _matched(labels[sel], unified[sel])
            for flavour, correct in [*((f, c[sel]) for f, c in flavours.items()), ("w", w_correct)]:
                per_task = np.array([correct[tasks[sel] == k].mean() for k in members])
                rows.append(MetricRow(step, group, flavour, "acc", 100.0 * float(per_task @ weights / weights.sum())))
                rows.append(MetricRow(step, group, flavour, "acc_sample", 100.0 * float(correct.mean())))
            from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

            rows.append(MetricRow(step, group, "w", "nmi", float(normalized_mutual_info_score(labels[sel], unified[sel]))))
            rows.append(MetricRow(step, group, "w", "ari", float(adjusted_rand_score(labels[sel], unified[sel]))))
        rows += category_discovery_rows(step, labels, unified, groups)
        return rows

    def summary(self, rows: list[MetricRow], n_steps: int) -> list[MetricRow]:
        """A, A_sample, F and F_max (see the module docstring) from the rows of steps 0..n_steps-1."""
        last = n_steps - 1
        value = {(r.step, r.group, r.flavour, r.metric): r.value for r in rows}
        needed = [(0, "task_0", "task", "acc")] + [(k, "task_0", f, "acc") for k in range(1, n_steps) for f in FLAVOURS]
        needed += [(last, "all", f, m) for f in FLAVOURS for m in ("acc", "acc_sample")]
        missing = [key for key in needed if key not in value]
        if missing:
            raise ValueError(f"cannot summarise {n_steps} steps: missing rows (step, group, flavour, metric) {missing}")
        out = []
        for flavour in CD_FLAVOURS:  # step averages, as continual category discovery papers report
            for group, metric in (("all", "All"), ("old", "Old"), ("new", "New")):
                per_step = [value[(k, group, flavour, "acc")] for k in range(n_steps) if (k, group, flavour, "acc") in value]
                if per_step:
                    out.append(MetricRow(last, "summary", flavour, metric, float(np.mean(per_step))))
        has_refit = (last, "all", REFIT, "acc") in value
        for flavour in FLAVOURS + ((REFIT,) if has_refit else ()):
            curve = [value[(0, "task_0", "task", "acc")]] + [value[(k, "task_0", flavour, "acc")] for k in range(1, n_steps)]
            final = curve[-1]
            out += [
                MetricRow(last, "summary", flavour, "A", value[(last, "all", flavour, "acc")]),
                MetricRow(last, "summary", flavour, "A_sample", value[(last, "all", flavour, "acc_sample")]),
                MetricRow(last, "summary", flavour, "F", curve[0] - final if n_steps > 1 else 0.0),
                MetricRow(last, "summary", flavour, "F_max", max(curve[:-1]) - final if n_steps > 1 else 0.0),
            ]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"mappings": {k: v.tolist() for k, v in self.mappings.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mappings = {int(k): np.asarray(v, dtype=np.int64) for k, v in state["mappings"].items()}
        for k, pi in mappings.items():
            if not 0 <= k < self.layout.n_steps or len(pi) != self.layout.sizes[k]:
                raise ValueError(f"saved mapping of task {k} ({len(pi)} classes) does not fit this task layout")
        self.mappings = mappings

"""Evaluation of class-iNCD after every step (methods-spec §1.3-1.4). All formulas live here.

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
- accuracy with clustering of task k (`task_k`, flavour `w`): Hungarian accuracy of u on task k's
  images alone.
- group accuracies for `old` (tasks < t; absent at t = 0), `new` (task t) and `all` (tasks <= t):
  `acc` is class-weighted, Σ_k C_k·acc_k / Σ_k C_k (the authors' `calculate_weighted_avg`), and
  `acc_sample` is sample-weighted, correct / images. For `wo` the acc_k are the per-task `wo`
  accuracies; for `w` ONE Hungarian match is fitted on the whole group and acc_k, acc_sample are
  measured under that single match (acc_sample is then the authors' `Acc_all_W_cluster`).
- NMI and ARI of u against the labels for each group (flavour `w`, in 0..1).

Summary after the last step T−1 (group `summary`, for each flavour f in {wo, w}):

- A = acc of `all` at T−1 (class-weighted); A_sample likewise with acc_sample.
- F = a_0 − a_{T−1}, the paper's forgetting: a_0 is the task-specific accuracy on task 0 after
  step 0, a_k (k >= 1) the flavour-f accuracy on task 0 after step k.
- F_max = max_{k < T−1} a_k − a_{T−1}, the usual "max over steps" forgetting.
With T = 1 both are 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

FLAVOURS = ("wo", "w")


@dataclass(frozen=True)
class TaskLayout:
    """Task k owns the classes [offsets[k], offsets[k] + sizes[k])."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]

    @classmethod
    def contiguous(cls, num_classes: int, n_steps: int) -> "TaskLayout":
        """The authors' split: interval = ceil(K/T); task t = [t·interval, min((t+1)·interval, K))."""
        if n_steps < 1:
            raise ValueError(f"a split needs at least 1 task, got {n_steps}")
        if n_steps > num_classes:
            raise ValueError(f"{n_steps} tasks need at least {n_steps} classes, the dataset has {num_classes}")
        interval = math.ceil(num_classes / n_steps)
        offsets = tuple(t * interval for t in range(n_steps))
        sizes = tuple(min(o + interval, num_classes) - o for o in offsets)
        if min(sizes) < 1:
            raise ValueError(f"with ceil({num_classes}/{n_steps}) = {interval} classes per task the last task "
                             f"would be empty; choose another number of tasks")
        return cls(offsets, sizes)

    @property
    def n_steps(self) -> int:
        return len(self.offsets)

    def task_of(self, labels: np.ndarray) -> np.ndarray:
        bounds = np.asarray(self.offsets[1:])
        return np.searchsorted(bounds, np.asarray(labels), side="right").astype(np.int64)


@dataclass(frozen=True)
class MetricRow:
    step: int
    group: str
    flavour: str
    metric: str
    value: float


def hungarian_mapping(y_true: np.ndarray, y_pred: np.ndarray) -> dict[int, int]:
    """Predicted cluster → true class maximising the number of matches."""
    y_true, y_pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    if len(y_true) == 0:
        return {}
    d = int(max(y_pred.max(), y_true.max())) + 1
    w = np.zeros((d, d), dtype=np.int64)
    np.add.at(w, (y_pred, y_true), 1)
    rows, cols = linear_sum_assignment(w.max() - w)
    return dict(zip(rows.tolist(), cols.tolist()))


def _matched(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Per-sample correctness under the best one-to-one map of the given predictions."""
    mapping = hungarian_mapping(y_true, y_pred)
    mapped = np.array([mapping.get(int(p), -1) for p in y_pred], dtype=np.int64)
    return mapped == np.asarray(y_true)


def clustering_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return 100.0 * float(_matched(y_true, y_pred).mean()) if len(y_true) else 0.0


class Evaluator:
    """Holds the frozen maps π_k and turns predictions into metric rows."""

    def __init__(self, layout: TaskLayout) -> None:
        self.layout = layout
        self.mappings: dict[int, np.ndarray] = {}

    def freeze_mapping(self, task: int, val_labels: np.ndarray, val_task_pred: np.ndarray) -> None:
        """π_task from the task head's predictions on the task's val images (absolute labels)."""
        offset, size = self.layout.offsets[task], self.layout.sizes[task]
        local = np.asarray(val_labels, dtype=np.int64) - offset
        pred = np.asarray(val_task_pred, dtype=np.int64)
        pi = np.full(size, -1, dtype=np.int64)  # a class absent from val is never counted correct
        present = set(local.tolist())
        for cluster, cls in hungarian_mapping(local, pred).items():
            if cls in present:
                pi[cls] = cluster
        self.mappings[task] = pi

    def _wo_correct(self, labels: np.ndarray, unified: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        correct = np.zeros(len(labels), dtype=bool)
        for k in np.unique(tasks):
            sel = tasks == k
            offset = self.layout.offsets[k]
            target = self.mappings[int(k)][labels[sel] - offset]
            correct[sel] = (target >= 0) & (unified[sel] == offset + target)
        return correct

    def evaluate(self, step: int, labels: np.ndarray, unified_pred: np.ndarray,
                 task_pred: np.ndarray) -> list[MetricRow]:
        missing = [k for k in range(step + 1) if k not in self.mappings]
        if missing:
            raise RuntimeError(f"freeze_mapping() was not called for task(s) {missing} before evaluating step {step}")
        labels = np.asarray(labels, dtype=np.int64)
        unified = np.asarray(unified_pred, dtype=np.int64)
        tasks = self.layout.task_of(labels)
        rows = []
        current = tasks == step
        local = labels[current] - self.layout.offsets[step]
        rows.append(MetricRow(step, f"task_{step}", "task", "acc", clustering_accuracy(local, task_pred)))

        wo_correct = self._wo_correct(labels, unified, tasks)
        for k in range(step + 1):
            sel = tasks == k
            rows.append(MetricRow(step, f"task_{k}", "wo", "acc", 100.0 * float(wo_correct[sel].mean())))
            rows.append(MetricRow(step, f"task_{k}", "w", "acc", clustering_accuracy(labels[sel], unified[sel])))

        groups = {"old": tasks < step, "new": tasks == step, "all": tasks <= step}
        for group, sel in groups.items():
            if not sel.any():
                continue
            members = sorted(set(tasks[sel].tolist()))
            weights = np.array([self.layout.sizes[k] for k in members], dtype=float)
            w_correct = _matched(labels[sel], unified[sel])
            for flavour, correct in (("wo", wo_correct[sel]), ("w", w_correct)):
                per_task = np.array([correct[tasks[sel] == k].mean() for k in members])
                rows.append(MetricRow(step, group, flavour, "acc", 100.0 * float(per_task @ weights / weights.sum())))
                rows.append(MetricRow(step, group, flavour, "acc_sample", 100.0 * float(correct.mean())))
            rows.append(MetricRow(step, group, "w", "nmi", float(normalized_mutual_info_score(labels[sel], unified[sel]))))
            rows.append(MetricRow(step, group, "w", "ari", float(adjusted_rand_score(labels[sel], unified[sel]))))
        return rows

    def summary(self, rows: list[MetricRow], n_steps: int) -> list[MetricRow]:
        last = n_steps - 1
        value = {(r.step, r.group, r.flavour, r.metric): r.value for r in rows}
        out = []
        for flavour in FLAVOURS:
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
        self.mappings = {int(k): np.asarray(v, dtype=np.int64) for k, v in state["mappings"].items()}

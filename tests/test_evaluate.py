"""The evaluator's formulas on hand-computed cases (expected numbers worked out by hand)."""
import pickle

import numpy as np
import pytest

from bench.protocol.evaluate import Evaluator, MetricRow, TaskLayout, clustering_accuracy, hungarian_mapping


def value(rows, step, group, flavour, metric):
    (hit,) = [r.value for r in rows if (r.step, r.group, r.flavour, r.metric) == (step, group, flavour, metric)]
    return hit


@pytest.mark.parametrize("k, t, sizes", [(10, 5, (2, 2, 2, 2, 2)), (683, 5, (137, 137, 137, 137, 135)),
                                         (683, 2, (342, 341)), (100, 2, (50, 50)), (7, 7, (1,) * 7)])
def test_contiguous_layout(k, t, sizes):
    layout = TaskLayout.contiguous(k, t)
    assert layout.sizes == sizes
    assert layout.offsets == tuple(int(sum(sizes[:i])) for i in range(t))


def test_contiguous_layout_errors():
    with pytest.raises(ValueError, match="need at least 5 classes"):
        TaskLayout.contiguous(3, 5)
    with pytest.raises(ValueError, match="last task\\s+would be empty|would be empty"):
        TaskLayout.contiguous(6, 5)  # ceil(6/5)=2 → 0-2, 2-4, 4-6, then nothing
    with pytest.raises(ValueError, match="at least 1 task"):
        TaskLayout.contiguous(10, 0)


def test_task_of():
    assert TaskLayout((0, 3, 5), (3, 2, 2)).task_of(np.array([0, 2, 3, 4, 5, 6])).tolist() == [0, 0, 1, 1, 2, 2]


def test_hungarian_on_a_permuted_clustering():
    y = np.array([0, 0, 1, 1, 2, 2])
    p = np.array([2, 2, 0, 0, 1, 1])
    assert hungarian_mapping(y, p) == {2: 0, 0: 1, 1: 2}
    assert clustering_accuracy(y, p) == 100.0
    # one sample of class 2 lands in class 0's cluster: 5 of 6 right.
    assert clustering_accuracy(y, np.array([2, 2, 0, 0, 1, 2])) == pytest.approx(500 / 6)


def two_task_evaluator():
    layout = TaskLayout((0, 2), (2, 2))
    ev = Evaluator(layout)
    # Task 0's head calls class 0 "cluster 1" and class 1 "cluster 0" on its val images.
    ev.freeze_mapping(0, np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0]))
    return ev


def test_perfect_permuted_clustering_end_to_end():
    # Tasks of 2 and 3 classes. Each task head names its classes with a permutation; the unified head
    # puts every image into its own task's segment under that same permutation.
    ev = Evaluator(TaskLayout.contiguous(5, 2))  # interval 3: task 0 = {0,1,2}, task 1 = {3,4}
    assert ev.layout.sizes == (3, 2)
    ev.freeze_mapping(0, np.array([0, 1, 2, 2]), np.array([2, 0, 1, 1]))  # π_0 = (0→2, 1→0, 2→1)
    step0 = ev.evaluate(0, np.array([0, 1, 1, 2]), np.array([2, 0, 0, 1]), task_pred=np.array([1, 2, 2, 0]))
    assert {r.group for r in step0} == {"task_0", "new", "all"}  # no "old" group at step 0
    ev.freeze_mapping(1, np.array([3, 4]), np.array([1, 0]))  # π_1 = (0→1, 1→0), i.e. class 3 → cluster 4
    labels = np.array([0, 1, 2, 3, 3, 4])
    unified = np.array([2, 0, 1, 4, 4, 3])
    rows = ev.evaluate(1, labels, unified, task_pred=np.array([1, 1, 0]))
    for r in rows:
        assert r.value == pytest.approx(1.0 if r.metric in ("nmi", "ari") else 100.0), r
    assert {r.group for r in rows} == {"task_0", "task_1", "old", "new", "all"}
    summary = ev.summary(step0 + rows, 2)
    assert {(r.flavour, r.metric): r.value for r in summary} == {
        **{(f, m): (0.0 if m.startswith("F") else 100.0) for f in ("wo", "w") for m in ("A", "A_sample", "F", "F_max")},
        **{(f, m): 100.0 for f in ("gcd", "gcd_sep") for m in ("All", "Old", "New")}}
    assert all(r.step == 1 and r.group == "summary" for r in summary)


def test_wrong_routing_is_right_with_clustering_but_wrong_task_agnostically():
    ev = two_task_evaluator()
    ev.freeze_mapping(1, np.array([2, 3]), np.array([0, 1]))
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    # The unified head separates all four classes perfectly, but puts task 0's images into task 1's
    # segment (clusters 2, 3) and task 1's into task 0's (clusters 0, 1).
    unified = np.array([3, 3, 2, 2, 0, 0, 1, 1])
    rows = ev.evaluate(1, labels, unified, task_pred=np.array([0, 0, 1, 1]))
    assert value(rows, 1, "task_0", "w", "acc") == 100.0
    assert value(rows, 1, "task_1", "wo", "acc") == 0.0
    assert value(rows, 1, "all", "w", "acc") == 100.0
    assert value(rows, 1, "task_0", "wo", "acc") == 0.0
    assert value(rows, 1, "all", "w", "acc_sample") == 100.0
    assert value(rows, 1, "all", "wo", "acc") == 0.0
    assert value(rows, 1, "task_1", "task", "acc") == 100.0
    assert value(rows, 1, "all", "w", "nmi") == pytest.approx(1.0)
    assert value(rows, 1, "all", "w", "ari") == pytest.approx(1.0)


def test_imbalanced_class_and_sample_weighted_accuracy():
    # Task 0: 3 classes (0,1,2); task 1: 1 class (3). Mapping of task 0 is the identity.
    ev = Evaluator(TaskLayout((0, 3), (3, 1)))
    ev.freeze_mapping(0, np.array([0, 1, 2]), np.array([0, 1, 2]))
    ev.freeze_mapping(1, np.array([3]), np.array([0]))
    # 4 test images of task 0, all right; 6 of task 1 (class 3 → cluster 3), only 1 right.
    labels = np.array([0, 1, 2, 2, 3, 3, 3, 3, 3, 3])
    unified = np.array([0, 1, 2, 2, 3, 0, 0, 0, 0, 0])
    rows = ev.evaluate(1, labels, unified, task_pred=np.zeros(6, dtype=int))
    # wo: acc_0 = 4/4, acc_1 = 1/6. Class-weighted: (3·1 + 1·1/6)/4 = 19/24. Sample-weighted: 5/10.
    assert value(rows, 1, "all", "wo", "acc") == pytest.approx(100 * 19 / 24)
    assert value(rows, 1, "all", "wo", "acc_sample") == pytest.approx(50.0)
    assert value(rows, 1, "old", "wo", "acc") == pytest.approx(100.0)
    assert value(rows, 1, "new", "wo", "acc") == pytest.approx(100 / 6)
    # w over all: one Hungarian on the union. Cluster 0 holds {0, 3×5} → class 3 (5 matches beats 1);
    # clusters 1, 2 → classes 1, 2; cluster 3 holds {3} but class 3 is taken, so it maps to class 0.
    # Correct: class 1, both class 2, five class 3 = 8 of 10; per task: 3/4 and 5/6.
    assert value(rows, 1, "all", "w", "acc_sample") == pytest.approx(80.0)
    assert value(rows, 1, "all", "w", "acc") == pytest.approx(100 * (3 * 3 / 4 + 1 * 5 / 6) / 4)
    assert value(rows, 1, "task_1", "task", "acc") == 100.0  # one class, one cluster


def test_a_class_absent_from_val_is_never_counted_correct():
    ev = Evaluator(TaskLayout((0,), (3,)))
    ev.freeze_mapping(0, np.array([0, 0, 1]), np.array([2, 2, 0]))  # class 2 never seen on val
    assert ev.mappings[0].tolist() == [2, 0, -1]
    rows = ev.evaluate(0, np.array([0, 1, 2]), np.array([2, 0, 1]), task_pred=np.array([2, 0, 1]))
    assert value(rows, 0, "task_0", "wo", "acc") == pytest.approx(200 / 3)


def test_evaluating_before_freezing_a_mapping_is_an_error():
    ev = two_task_evaluator()
    with pytest.raises(RuntimeError, match=r"task\(s\) \[1\]"):
        ev.evaluate(1, np.array([0, 2]), np.array([0, 2]), task_pred=np.array([0]))
    with pytest.raises(RuntimeError, match=r"task\(s\) \[0\]"):
        Evaluator(TaskLayout((0,), (2,))).evaluate(0, np.array([0, 1]), np.array([0, 1]), np.array([0, 1]))


@pytest.mark.parametrize("labels, unified, task_pred, message", [
    ([0, 1, 2], [0, 1, 2], [0], "tasks after this step"),             # class 2 belongs to task 1
    ([1, 1], [0, 1, 0], [0, 0], "labels but 3"),                       # length mismatch
    ([0, 1], [0, 2], [0, 1], "clusters 0..1"),                         # unified id beyond the seen classes
    ([0, 1], [0, 1], [0], "1 task-head predictions for 2 images"),
    ([0, 1], [0, 1], [0, 2], "local clusters 0..1"),
])
def test_evaluate_refuses_inconsistent_inputs(labels, unified, task_pred, message):
    ev = two_task_evaluator()
    with pytest.raises(ValueError, match=message):
        ev.evaluate(0, np.array(labels), np.array(unified), np.array(task_pred))


def test_a_task_without_test_images_is_an_error():
    ev = two_task_evaluator()
    ev.freeze_mapping(1, np.array([2, 3]), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"no test images for task\(s\) \[0\]"):
        ev.evaluate(1, np.array([2, 3]), np.array([2, 3]), np.array([0, 1]))


def test_freeze_mapping_refuses_labels_of_another_task_and_foreign_clusters():
    ev = two_task_evaluator()
    with pytest.raises(ValueError, match="val labels must be classes 2..3"):
        ev.freeze_mapping(1, np.array([1, 2]), np.array([0, 1]))
    with pytest.raises(ValueError, match="local clusters 0..1"):
        ev.freeze_mapping(1, np.array([2, 3]), np.array([2, 3]))  # absolute ids where local ones are due


def test_forgetting_paper_and_max_over_steps():
    # 3 steps. a_0 (task-specific on task 0 after step 0) = 80; wo on task 0: 90 after step 1, 50 after step 2.
    rows = [MetricRow(0, "task_0", "task", "acc", 80.0), MetricRow(1, "task_0", "wo", "acc", 90.0),
            MetricRow(2, "task_0", "wo", "acc", 50.0), MetricRow(1, "task_0", "w", "acc", 70.0),
            MetricRow(2, "task_0", "w", "acc", 75.0), MetricRow(2, "all", "wo", "acc", 60.0),
            MetricRow(2, "all", "wo", "acc_sample", 61.0), MetricRow(2, "all", "w", "acc", 70.0),
            MetricRow(2, "all", "w", "acc_sample", 71.0)]
    summary = Evaluator(TaskLayout.contiguous(6, 3)).summary(rows, 3)
    assert value(summary, 2, "summary", "wo", "F") == 30.0  # 80 − 50
    assert value(summary, 2, "summary", "wo", "F_max") == 40.0  # max(80, 90) − 50
    assert value(summary, 2, "summary", "w", "F") == 5.0  # 80 − 75
    assert value(summary, 2, "summary", "w", "F_max") == 5.0  # max(80, 70) − 75
    assert value(summary, 2, "summary", "wo", "A") == 60.0
    assert value(summary, 2, "summary", "w", "A_sample") == 71.0


def test_forgetting_is_zero_with_one_step():
    rows = [MetricRow(0, "task_0", "task", "acc", 80.0)] + [
        MetricRow(0, "all", f, m, 70.0) for f in ("wo", "w") for m in ("acc", "acc_sample")]
    summary = Evaluator(TaskLayout.contiguous(4, 1)).summary(rows, 1)
    assert [(r.step, r.metric, r.value) for r in summary if r.metric.startswith("F")] == [(0, "F", 0.0), (0, "F_max", 0.0)] * 2


def test_summary_names_missing_rows():
    with pytest.raises(ValueError, match="missing rows"):
        Evaluator(TaskLayout.contiguous(4, 2)).summary([MetricRow(0, "task_0", "task", "acc", 80.0)], 2)


def test_state_round_trip():
    ev = two_task_evaluator()
    other = Evaluator(ev.layout)
    other.load_state_dict(pickle.loads(pickle.dumps(ev.state_dict())))
    assert other.mappings[0].tolist() == [1, 0]
    with pytest.raises(ValueError, match="does not fit"):
        Evaluator(TaskLayout((0,), (3,))).load_state_dict(ev.state_dict())


def test_category_discovery_accuracies_one_match_and_separate_matches_by_hand():
    """Old class 0 and new class 2 share cluster 0. One match over every seen class gives cluster 0
    to class 0 (3 images against 2): old 5/5, new 2/4, all 7/9. Separate matches give cluster 0 to
    class 0 among the old images and to class 2 among the new ones: old 5/5, new 4/4."""
    ev = Evaluator(TaskLayout((0, 2), (2, 2)))
    ev.freeze_mapping(0, np.array([0, 1]), np.array([0, 1]))
    step0 = ev.evaluate(0, np.array([0, 0, 0, 1, 1]), np.array([0, 0, 0, 1, 1]), task_pred=np.array([0, 0, 0, 1, 1]))
    ev.freeze_mapping(1, np.array([2, 3]), np.array([0, 1]))
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3])
    unified = np.array([0, 0, 0, 1, 1, 0, 0, 3, 3])
    step1 = ev.evaluate(1, labels, unified, task_pred=np.array([0, 0, 1, 1]))
    cd = {(r.group, r.flavour): r.value for r in step1 if r.flavour.startswith("gcd")}
    assert cd[("all", "gcd")] == pytest.approx(700 / 9) and cd[("all", "gcd_sep")] == pytest.approx(700 / 9)
    assert cd[("old", "gcd")] == cd[("old", "gcd_sep")] == 100.0
    assert cd[("new", "gcd")] == 50.0 and cd[("new", "gcd_sep")] == 100.0
    # gcd_sep's old and new are the `w` flavour's sample-weighted group accuracies (separate matches)
    w = {r.group: r.value for r in step1 if r.flavour == "w" and r.metric == "acc_sample"}
    assert (w["old"], w["new"]) == (cd[("old", "gcd_sep")], cd[("new", "gcd_sep")])
    summary = {(r.flavour, r.metric): r.value for r in ev.summary(step0 + step1, 2) if r.flavour.startswith("gcd")}
    assert summary[("gcd", "All")] == pytest.approx((100 + 700 / 9) / 2)
    assert summary[("gcd", "Old")] == 100.0 and summary[("gcd", "New")] == pytest.approx(75.0)  # Old: step 2 only
    assert summary[("gcd_sep", "New")] == 100.0


def test_a_map_refitted_on_the_moved_encoder_follows_it_where_the_frozen_map_does_not():
    """The authors' IL testers re-fit task 0's map at every evaluation from the current encoder
    (`test_ind_cluster`'s `ind_gen_loader`): after step 1 the fine-tuned encoder makes task 0's head
    swap its clusters, and the unified head follows the swap. By hand: the frozen π_0 (0→1, 1→0)
    finds none of task 0's images; the re-fitted π_0^1 (0→0, 1→1) finds all four; task 1 (π_1 fitted
    at step 1 in both) is right in both."""
    ev = two_task_evaluator()  # π_0 frozen at step 0: class 0 → cluster 1, class 1 → cluster 0
    ev.freeze_mapping(1, np.array([2, 3]), np.array([0, 1]))  # π_1: class 2 → 0, class 3 → 1
    refit = {0: ev.fit_mapping(0, np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1]))}
    assert refit[0].tolist() == [0, 1] and ev.mappings[0].tolist() == [1, 0]
    labels = np.array([0, 0, 1, 1, 2, 3])
    unified = np.array([0, 0, 1, 1, 2, 3])  # task 0's images in clusters 0/1 as the moved head names them
    rows = ev.evaluate(1, labels, unified, task_pred=np.array([0, 1]), refit=refit)
    assert value(rows, 1, "task_0", "wo", "acc") == 0.0
    assert value(rows, 1, "task_0", "wo_refit", "acc") == 100.0
    assert value(rows, 1, "task_1", "wo", "acc") == value(rows, 1, "task_1", "wo_refit", "acc") == 100.0
    assert value(rows, 1, "all", "wo", "acc") == 50.0 and value(rows, 1, "all", "wo_refit", "acc") == 100.0
    step0 = ev.evaluate(0, np.array([0, 1]), np.array([1, 0]), task_pred=np.array([1, 0]), refit={})
    summary = {(r.flavour, r.metric): r.value for r in ev.summary(step0 + rows, 2)}
    # F: the task-specific 100 at step 0 minus task 0's accuracy after step 1, in each flavour
    assert summary[("wo", "F")] == 100.0 and summary[("wo_refit", "F")] == 0.0
    assert summary[("wo_refit", "A")] == 100.0 and summary[("wo", "A")] == 50.0


def test_without_refitted_maps_there_is_no_refit_flavour_and_a_missing_one_is_an_error():
    ev = two_task_evaluator()
    ev.freeze_mapping(1, np.array([2, 3]), np.array([0, 1]))
    rows = ev.evaluate(1, np.array([0, 2, 3]), np.array([1, 2, 3]), task_pred=np.array([0, 1]))
    assert "wo_refit" not in {r.flavour for r in rows}
    with pytest.raises(ValueError, match="no re-fitted map for task"):
        ev.evaluate(1, np.array([0, 2, 3]), np.array([1, 2, 3]), task_pred=np.array([0, 1]), refit={})


def test_old_new_in_the_hard_and_the_soft_sense():
    """A second unlabelled step: class 0 was labelled, class 1 discovered at step 1, class 2 is new.
    One match over all images (5→0, 6→1, 7→2) gets 5 of 6 right; only the class-1 image predicted 7 is
    wrong. Hard (old = labelled classes {0}): old 2/2, new 3/4. Soft (old = seen before, {0, 1}):
    old 3/4, new 2/2."""
    from bench.protocol.evaluate import old_new_accuracies, old_new_accuracy

    labels, pred = np.array([0, 0, 1, 1, 2, 2]), np.array([5, 5, 6, 7, 7, 7])
    hard = old_new_accuracy(labels, pred, old_classes=[0])
    soft = old_new_accuracy(labels, pred, old_classes=[0, 1])
    assert hard == pytest.approx({"all": 500 / 6, "old": 100.0, "new": 75.0})
    assert soft == pytest.approx({"all": 500 / 6, "old": 75.0, "new": 100.0})
    assert np.isnan(old_new_accuracy(labels, pred, old_classes=[])["old"])  # the first step: nothing old
    assert old_new_accuracies(labels, pred, [0], [0, 1]) == [hard, soft]  # both senses under the one match

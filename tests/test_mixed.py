"""The mixed setting's pieces (bench.splits.manifests): a protocol read from Happy's split file has exactly that
file's counts, a drawn manifest has exactly the protocol's, and a manifest reads back as written."""
from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.splits.manifests import Manifest, draw, labelled_count, protocol_counts, read_happy


def happy_file(path, order, steps=5, unseen=400, old=25, seen=25):
    """A split file as Happy's logger writes it (`logs/cifar_continual_dataset_dict.txt`): the counts as a
    Python dict, the new classes' order as numpy prints an array (wrapped), the classes per step."""
    counts = {"continual_session_num": steps, "online_novel_unseen_num": unseen, "online_old_seen_num": old,
              "online_novel_seen_num": seen}
    path.write_text(f"online_dataset_split_dict: \n{counts}\nnovel_targets_shuffle: \n"
                    f"{np.array2string(np.asarray(order), max_line_width=75)}\n"
                    f"num_novel_class_per_session: \n{len(order) // steps}")
    return path


@pytest.fixture
def order():
    return np.random.default_rng(0).permutation(np.arange(50, 100)).tolist()


def test_a_happy_file_gives_exactly_its_counts(tmp_path, order):
    protocol = read_happy(happy_file(tmp_path / "cifar_continual_dataset_dict.txt", order), num_classes=100)
    assert protocol.labelled_classes == tuple(range(50)) and protocol.labelled_fraction == 0.8
    counts = protocol_counts(protocol)
    assert len(counts) == 5
    for s, step in enumerate(counts):
        new = order[10 * s:10 * (s + 1)]
        assert {c: step[c] for c in new} == {c: 400 for c in new}  # arriving now: online_novel_unseen_num
        assert all(step[c] == 25 for c in order[:10 * s])  # arrived earlier: online_novel_seen_num
        assert all(step[c] == 25 for c in range(50))  # labelled classes: online_old_seen_num
        assert set(step) == set(range(50)) | set(order[:10 * (s + 1)])
        assert sum(step.values()) == 50 * 25 + 10 * s * 25 + 10 * 400
    assert protocol.seen_before(1) == set(range(50))  # hard and soft "old" agree on the first step only
    assert protocol.seen_before(3) == set(range(50)) | set(order[:20])


def test_a_drawn_manifest_has_exactly_the_protocols_counts(tmp_path, order):
    protocol = read_happy(happy_file(tmp_path / "split.txt", order), num_classes=100)
    labels = np.repeat(np.arange(100), 500)  # CIFAR-100's training set: 500 images a class
    manifest = draw(protocol, labels, seed=1)
    counts = manifest.counts(labels)
    assert counts[0] == labelled_count(protocol, labels) == {c: 400 for c in range(50)}
    assert counts[1:] == protocol_counts(protocol)
    assert manifest.labelled == (True, False, False, False, False, False)
    labelled = set(manifest.steps[0].tolist())
    for step in manifest.steps[1:]:  # a labelled class's unlabelled images come from what step 0 left
        old = step[labels[step] < 50]
        assert not labelled & set(old.tolist()) and len(set(step.tolist())) == len(step)
    again = draw(protocol, labels, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(manifest.steps, again.steps))
    assert not np.array_equal(manifest.steps[1], draw(protocol, labels, seed=2).steps[1])


def test_a_manifest_reads_back_as_written(tmp_path, order):
    protocol = read_happy(happy_file(tmp_path / "split.txt", order), num_classes=100)
    labels = np.repeat(np.arange(100), 500)
    manifest = draw(protocol, labels, seed=0)
    back = Manifest.from_json(manifest.to_json())
    assert back.labelled == manifest.labelled
    assert all(np.array_equal(a, b) for a, b in zip(back.steps, manifest.steps))
    with pytest.raises(BenchError, match="split manifest version 9: this bench reads version 1"):
        Manifest.from_json(manifest.to_json().replace('"version": 1', '"version": 9'))


def test_a_file_that_is_not_happys_is_one_line_and_runs_no_code(tmp_path, order):
    bad = happy_file(tmp_path / "split.txt", order)
    bad.write_text(bad.read_text().replace("{'continual_session_num'", "__import__('os').system('false') or {'x'"))
    with pytest.raises(BenchError, match="not a Happy split file") as caught:
        read_happy(bad, num_classes=100)
    assert "\n" not in str(caught.value)
    with pytest.raises(BenchError, match="45 new classes do not make 4 steps of 11"):
        read_happy(happy_file(tmp_path / "short.txt", order[:45], steps=4), num_classes=100)
    (tmp_path / "empty.txt").write_text("nothing here\n")
    with pytest.raises(BenchError, match="no `name:` sections"):
        read_happy(tmp_path / "empty.txt", num_classes=100)


def test_a_step_asking_for_more_images_than_a_class_has_is_refused(tmp_path, order):
    protocol = read_happy(happy_file(tmp_path / "split.txt", order, unseen=600), num_classes=100)
    with pytest.raises(BenchError, match="asks for 600 images of class"):
        draw(protocol, np.repeat(np.arange(100), 500), seed=0)


@pytest.mark.parametrize("edit, said", [
    (("'continual_session_num': 5", "'continual_session_num': 0"), "0 sessions of .* each must be at least 1"),
    (("'online_novel_unseen_num': 400", "'online_novel_unseen_num': -5"), "-5/25/25 images per class .* at least 1"),
    (("'online_old_seen_num': 25", "'online_old_seen_num': 0"), "400/0/25 images per class"),
])
def test_a_happy_file_with_no_step_or_a_count_below_one_is_refused(tmp_path, order, edit, said):
    path = happy_file(tmp_path / "split.txt", order)
    path.write_text(path.read_text().replace(*edit))
    with pytest.raises(BenchError, match=said):
        read_happy(path, num_classes=100)


def test_a_happy_file_naming_classes_beyond_the_dataset_is_refused(tmp_path, order):
    with pytest.raises(BenchError, match="new class [89][0-9] is not a class of the dataset \\(0..79\\)"):
        read_happy(happy_file(tmp_path / "split.txt", order), num_classes=80)

"""Happy's images (bench/splits/happy_draw.py, `setting.draw=happy`): bench's replay of Happy-CGCD's draw gives the
very images Happy's code gives, on a training set of CIFAR-100's shape (500 images of each of 100 classes, in the
mixed order of its files) and of ImageNet-100's (classes of fewer images than a session asks for)."""
from __future__ import annotations

import numpy as np
import pytest

from bench.splits.happy_draw import happy_draw
from bench.splits.settings import arrival_order, mixed_setting, protocol_for
from bench.errors import BenchError


def happys_code(targets, train_classes, prop, sessions, old_seen, novel_seen, novel_unseen, shuffle, seed=0):
    """Happy-CGCD's data/cifar.py (`get_cifar_100_datasets`; its imagenet.py caps `novel_unseen` at a class's
    images) transliterated onto the images' positions, with numpy's global generator as it uses it."""
    targets = np.asarray(targets)
    uq_idxs = np.arange(len(targets))
    old_all = uq_idxs[np.isin(targets, list(train_classes))]
    each_old = [old_all[targets[old_all] == c] for c in train_classes]
    labelled_slices = []
    for samples in each_old:  # data_utils.subsample_instances
        np.random.seed(0)
        labelled_slices.append(np.random.choice(range(len(samples)), replace=False, size=(int(prop * len(samples)),)))
    unlabelled_slices = [np.array(list(set(list(range(len(samples)))) - set(labelled_slices[i])))
                         for i, samples in enumerate(each_old)]
    offline = np.concatenate([samples[cut] for samples, cut in zip(each_old, labelled_slices)])
    each_old_unlabelled = [samples[cut] for samples, cut in zip(each_old, unlabelled_slices)]
    old_sessions = []
    for _ in range(sessions):
        slices = [np.random.choice(np.array(list(range(len(samples)))), old_seen, replace=False)
                  for samples in each_old_unlabelled]
        old_sessions.append(np.concatenate([samples[cut] for samples, cut in zip(each_old_unlabelled, slices)]))
    novel = np.array(list(set(uq_idxs) - set(old_all)))
    novel_targets_shuffle = np.array(list(set(targets[novel].tolist())))
    if shuffle:
        np.random.seed(seed)
        np.random.shuffle(novel_targets_shuffle)
    per_session = len(novel_targets_shuffle) // sessions
    novel_sessions = []
    for s in range(sessions):
        session_targets = novel_targets_shuffle[0: s * per_session + per_session]
        each = [novel[targets[novel] == t] for t in session_targets]
        slices = []
        for i in range(len(session_targets)):
            n = len(each[i])
            if s >= 1 and i < s * per_session:
                slices.append(np.random.choice(np.array(list(range(n))), novel_seen, replace=False))
            else:
                slices.append(np.random.choice(np.array(list(range(n))), min(novel_unseen, n), replace=False))
        novel_sessions.append(np.concatenate([samples[cut] for samples, cut in zip(each, slices)]))
    return offline, old_sessions, novel_sessions, novel_targets_shuffle


def bench_draw(split, targets, arrival):
    setting = {**mixed_setting(split), "arrival": arrival, "draw": "happy"}
    order = arrival_order(setting, 100)
    relabelled = (np.argsort(order)[targets] if order is not None else targets)  # as planning relabels the data
    return happy_draw(protocol_for(setting, 100, relabelled), relabelled, shuffled=order is not None), order


def assert_happys_images(manifest, offline, old, novel):
    """The manifest holds Happy's very images: its labelled step the offline ones, each session its old and novel."""
    assert np.array_equal(np.sort(manifest.steps[0]), np.sort(offline))
    assert len(manifest.steps) == len(old) + 1
    for s in range(len(old)):
        assert np.array_equal(np.sort(manifest.steps[s + 1]), np.sort(np.concatenate([old[s], novel[s]])))


@pytest.mark.parametrize("arrival", ["happy", "canonical"])
def test_happys_cifar100_draw_is_replayed_image_for_image(arrival):
    targets = np.random.default_rng(5).permutation(np.repeat(np.arange(100), 500))  # the files mix the classes
    manifest, order = bench_draw("happy-5-stage", targets, arrival)
    offline, old, novel, shuffled = happys_code(targets, range(50), 0.8, 5, 25, 25, 400, shuffle=arrival == "happy")
    if order is not None:
        assert order[50:].tolist() == shuffled.tolist()
    assert_happys_images(manifest, offline, old, novel)
    assert len(offline) == 50 * 400
    assert [len(step) for step in manifest.steps[1:]] == [5250, 5500, 5750, 6000, 6250]
    # sessions draw afresh: an old class's images recur across sessions, as in Happy's runs
    assert len(np.intersect1d(manifest.steps[1], manifest.steps[2])) > 0


def test_happys_imagenet100_draw_takes_every_image_of_a_small_class():
    sizes = np.full(100, 1300)
    sizes[[3, 60, 77]] = [732, 880, 1000]
    targets = np.random.default_rng(1).permutation(np.repeat(np.arange(100), sizes))
    manifest, order = bench_draw("happy-in100-5-stage", targets, "happy")
    offline, old, novel, _ = happys_code(targets, range(50), 0.8, 5, 60, 60, 1000, shuffle=True)
    assert_happys_images(manifest, offline, old, novel)


@pytest.mark.parametrize("split, classes, sizes, counts, labelled", [
    ("happy-10-stage", 100, 500, (25, 25, 400), 50),       # CIFAR-100: 5 new classes a session
    ("happy-10-stage", 200, 500, (25, 25, 400), 100),      # TinyImageNet: 10 a session
    ("happy-in100-10-stage", 100, 1300, (60, 60, 1000), 50),
])
def test_happys_ten_session_draw_is_replayed_image_for_image(split, classes, sizes, counts, labelled):
    """Happy's code with `--continual_session_num 10` and its README's other arguments (issue 55): the same counts
    per class and session, the new classes cut into 10 equal groups, its very images at every session."""
    targets = np.random.default_rng(7).permutation(np.repeat(np.arange(classes), sizes))
    setting = {**mixed_setting(split), "arrival": "happy", "draw": "happy"}
    order = arrival_order(setting, classes)
    relabelled = np.argsort(order)[targets]
    manifest = happy_draw(protocol_for(setting, classes, relabelled), relabelled, shuffled=True)
    offline, old, novel, shuffled = happys_code(targets, range(labelled), 0.8, 10, *counts, shuffle=True)
    assert order[labelled:].tolist() == shuffled.tolist() and len(manifest.steps) == 11
    assert_happys_images(manifest, offline, old, novel)
    per_session = (classes - labelled) // 10
    assert [len(np.unique(relabelled[step])) for step in manifest.steps[1:]] == \
        [labelled + per_session * (s + 1) for s in range(10)]


def test_happys_draw_is_refused_where_it_cannot_be_happys(tmp_path):
    from bench.splits.settings import check_setting
    from tests.helpers import tiny_specs

    with pytest.raises(BenchError, match="bad setting.draw='happy': Happy's draw replays Happy's code: it takes a "
                                         "happy-\\*-stage split"):
        check_setting({**mixed_setting("promptccd-3-stage"), "draw": "happy"})
    with pytest.raises(BenchError, match="bad setting.draw='guess': choose from bench"):
        check_setting({**mixed_setting("happy-5-stage"), "draw": "guess"})
    with pytest.raises(BenchError, match="in the order its code reads it: cifar10, cifar100, tinyimagenet, "
                                         "imagenet100, cub200; bench orders synthetic's otherwise"):
        tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **{"setting.draw": "happy"})


@pytest.mark.parametrize("split, sessions, session_sizes", [
    ("happy-cub-5-stage", 5, [1000, 1100, 1200, 1300, 1400]),
    ("happy-cub-10-stage", 10, [500 + 250 + 50 * s for s in range(10)]),  # 10 new classes a session
])
def test_happys_cub_draw_over_the_whole_training_set_in_official_order(split, sessions, session_sizes):
    """Happy's data/cub.py: the SSB known classes labelled, in their file's order, absolute counts 5/5/25, classes
    of 29 or 30 images grouped as CUB's images.txt lists them; at 5 sessions and at 10 (issue 55)."""
    from bench.splits.peer_splits import SSB_KNOWN

    sizes = np.where(np.arange(200) % 7 == 0, 29, 30)
    targets = np.repeat(np.arange(200), sizes)
    setting = {**mixed_setting(split), "draw": "happy"}
    order = arrival_order(setting, 200, "cub200")
    relabelled = np.argsort(order)[targets]
    manifest = happy_draw(protocol_for(setting, 200, relabelled), relabelled, shuffled=True)
    offline, old, novel, shuffled = happys_code(targets, SSB_KNOWN["cub200"], 0.8, sessions, 5, 5, 25, shuffle=True)
    assert order[100:].tolist() == shuffled.tolist()
    assert_happys_images(manifest, offline, old, novel)
    assert [len(step) for step in manifest.steps[1:]] == session_sizes


def test_the_whole_training_set_is_back_in_the_official_order():
    from bench.data.base import ImageSet, LoadedDataset

    # official order a0 a1 b0 a2 b1; the partition held out a1 and b1
    data = LoadedDataset(name="x", class_names=["a", "b"], train=ImageSet(["a0", "b0", "a2"], [0, 1, 0]),
                         val=ImageSet(["a1", "b1"], [0, 1]), test=ImageSet(["t"], [0]),
                         extra={"partition_positions": (np.array([0, 2, 3]), np.array([1, 4]))})
    whole = data.with_whole_train()
    assert list(whole.train.images) == ["a0", "a1", "b0", "a2", "b1"] and whole.train.labels.tolist() == [0, 0, 1, 0, 1]
    assert "partition_positions" not in whole.extra and whole.val is None


def test_happys_draw_on_cub_needs_its_whole_training_set():
    from bench.config.grids import expand, load_grid

    with pytest.raises(BenchError, match="leave setting.whole_train=True with it"):
        expand(load_grid("smoke"), methods=["K-means"], datasets=["cub200"], splits=["happy-cub-5-stage"], seeds=[0],
               backbones=["pixels"], options={"setting.draw": "happy", "setting.whole_train": False})
    (spec,) = expand(load_grid("smoke"), methods=["K-means"], datasets=["cub200"], splits=["happy-cub-5-stage"],
                     seeds=[0], backbones=["pixels"], options={"setting.draw": "happy"})
    assert spec.split_label == "happy-cub-5-stage · Happy's draw · arrival happy-ssb"

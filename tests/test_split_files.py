"""Other codebases' split files (bench.splits.peer_splits), each written here in its real on-disk format: a
PromptCCD split gives exactly the steps its files and rule give, and an SSB split pickle is read
without running anything it asks for."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from bench.errors import BenchError
from bench.splits.manifests import draw
from bench.splits.peer_splits import (PromptCCDConfig, happy_arrival_order, promptccd_protocol, read_promptccd,
                               read_ssb_splits)

RATIOS = "[[0.87, 0.54, 0.5, 1.0], [0.7, 0.67, 1.0], [0.9, 1.0], [1.0]]"


def promptccd_yaml(path, classes=100, labelled=70, seed=1):
    """A config as PromptCCD ships them (config/cifar100/cifar100_promptccd_w_gmp.yaml, abridged)."""
    path.write_text(f"CONFIG:\n  run_ccd: True\n  manual_seed: {seed}\n  save_path: exp/x # where to save\n\n"
                    f"DATA:\n  dataset: imagenet100\n  classes: {classes}\n  input_size: 224\n"
                    f"  labelled_data: {labelled}\n"
                    f"  random_split_ratio: 0.8\n  ccd_split_ratio: {RATIOS}\n  n_stage: 3\n  n_views: 2\n\n"
                    f"OPTIM:\n  epochs: 200\n  weight_decay: 0.00005\n")
    return path


def test_promptccd_protocol_on_cifar100s_shape_is_what_its_code_gives():
    """Hand-computed from PromptCCD's rule: config/cifar100/*.yaml sets classes 100, labelled_data 70,
    n_stage 3, ccd_split_ratio [[0.87, 0.54, 0.5, 1.0], [0.7, 0.67, 1.0], [0.9, 1.0], [1.0]]; data.py's
    build_CCD_dataset cuts each class's shuffled images with int(len * ratio), each cut from what is left."""
    protocol = promptccd_protocol([500] * 100)  # its CIFAR-100 protocol by default
    # `if i < args.labelled_data`: classes 0..69 are labelled, int(500 * 0.87) = 435 of their images
    assert protocol.labelled_classes == tuple(range(70)) and protocol.labelled_counts == {c: 435 for c in range(70)}
    # the 65 left: step s takes int(left * ccd_split_ratio[0][s]): int(65 * .54) = 35, int(30 * .5) = 15, 15
    old = [35, 15, 15]
    # a new class i arrives in step 1 + (i % 70) // ((100 - 70) // 3) = 1 + (i - 70) // 10 and gives
    # int(left * ccd_split_ratio[1 + that][j]): [0.7, 0.67, 1.0] -> 350, int(150 * .67) = 100, 50;
    # [0.9, 1.0] -> 450, 50; [1.0] -> 500
    new = {1: [350, 100, 50], 2: [450, 50], 3: [500]}
    for s, step in enumerate(protocol.steps, start=1):
        expected = {c: old[s - 1] for c in range(70)}
        for arrival, counts in new.items():
            if arrival <= s:
                expected.update({c: counts[s - arrival] for c in range(60 + 10 * arrival, 70 + 10 * arrival)})
        assert step == expected
    assert [sum(s.values()) for s in protocol.steps] == [5950, 6550, 7050] and protocol.disjoint
    labels = np.repeat(np.arange(100), 500)
    manifest = draw(protocol, labels, seed=0)  # a bench draw of it: the same counts, no image in two steps
    assert manifest.counts(labels) == [protocol.labelled_counts, *protocol.steps]
    every = np.concatenate(manifest.steps)
    assert len(every) == len(set(every.tolist())) == 50000  # every image used once: the last ratios are 1.0
    assert PromptCCDConfig.for_classes(200).labelled_data == 140  # its CUB / TinyImageNet configs


COUNTS = [10, 9, 7, 12, 6, 5]  # lines per class in the generated list


def image_name(c, k):
    return f"train/n0{c:07d}/n0{c:07d}_{k}.JPEG"


@pytest.fixture
def imagenet_like(tmp_path):
    """A list in config/imagenet100/train_100.txt's format (`path label` lines, the classes interleaved),
    with one line of each of classes 6..99 that a 6-class config drops; bench's training set holds the same
    files under another root, shuffled, with PromptCCD class c as bench class 5 - c, plus one file more."""
    lines = [(image_name(c, k), c) for k in range(12) for c in range(6) if k < COUNTS[c]]
    lines += [(image_name(c, 0), c) for c in range(6, 100)]
    (tmp_path / "train_100.txt").write_text("".join(f"{p} {c}\n" for p, c in lines))
    ours = [(f"/datasets/imagenet/{p}", 5 - c) for p, c in lines if c < 6] + [("/datasets/imagenet/extra.JPEG", 0)]
    ours = [ours[i] for i in np.random.default_rng(0).permutation(len(ours))]
    return tmp_path / "train_100.txt", [f for f, _ in ours], np.array([c for _, c in ours])


def test_an_imported_promptccd_split_gives_exactly_its_files_steps(tmp_path, imagenet_like):
    image_list, files, labels = imagenet_like
    split = read_promptccd(promptccd_yaml(tmp_path / "in100.yaml", classes=6, labelled=3), labels,
                           image_list=image_list, train_files=files, per_class=8)
    # each class keeps its first 8 lines (load_imagenet100 keeps 500), so 8, 8, 7, 8, 6, 5 images; cut by
    # the rule (labelled_data 3: one new class per step): class 0 and 1: 6 labelled (int(8 * .87)), then
    # int(2 * .54) = 1, int(1 * .5) = 0, 1; class 2: 6, then 0, 0, 1; class 3 in step 1: int(8 * .7) = 5,
    # int(3 * .67) = 2, 1; class 4 in step 2: int(6 * .9) = 5, 1; class 5 in step 3: 5. In bench's classes (5 - c):
    expected = [{5: 6, 4: 6, 3: 6}, {5: 1, 4: 1, 2: 5}, {2: 2, 1: 5}, {5: 1, 4: 1, 3: 1, 2: 1, 1: 1, 0: 5}]
    assert split.manifest.counts(labels) == expected
    assert split.manifest.labelled == (True, False, False, False)
    assert [split.protocol.labelled_counts, *split.protocol.steps] == expected
    assert split.protocol.labelled_classes == (5, 4, 3)
    # the very images: what PromptCCD's data.py (commit 8842a4e) picks from this list, run with
    # seed_everything(1) on it: (class, line k of that class) per step
    golden = [[(0, 0), (0, 1), (0, 2), (0, 4), (0, 6), (0, 7), (1, 1), (1, 2), (1, 3), (1, 4), (1, 6), (1, 7),
               (2, 0), (2, 1), (2, 2), (2, 3), (2, 4), (2, 5)],
              [(0, 3), (1, 0), (3, 0), (3, 1), (3, 5), (3, 6), (3, 7)],
              [(3, 3), (3, 4), (4, 0), (4, 1), (4, 3), (4, 4), (4, 5)],
              [(0, 5), (1, 5), (2, 6), (3, 2), (4, 2), (5, 0), (5, 1), (5, 2), (5, 3), (5, 4)]]
    got = [sorted((int(files[i].split("/")[-2][1:]), int(files[i].rsplit("_", 1)[1].split(".")[0])) for i in step)
           for step in split.manifest.steps]
    assert got == golden


def test_promptccd_files_that_do_not_match_the_dataset_are_one_line(tmp_path, imagenet_like):
    image_list, files, labels = imagenet_like
    config = promptccd_yaml(tmp_path / "c.yaml", classes=6, labelled=3)
    keep = np.array([not f.endswith(image_name(3, 1)) for f in files])  # line 10 of the list
    with pytest.raises(BenchError, match=rf"train_100.txt: line 10 '{image_name(3, 1)}' matches none of the 49 "):
        read_promptccd(config, labels[keep], image_list=image_list, train_files=np.array(files)[keep].tolist(),
                       per_class=8)
    names = ["apple", "aquarium_fish", "baby", "bear", "beaver", "bed"]
    (tmp_path / "class_dict.txt").write_text(str({n: i for i, n in enumerate(names)}))  # as PromptCCD ships it
    split = read_promptccd(config, labels, class_dict=tmp_path / "class_dict.txt", class_names=names[::-1])
    assert split.manifest is None and split.protocol.labelled_classes == (5, 4, 3)
    with pytest.raises(BenchError, match=r"class_dict.txt: class 'baby' is not one of the dataset's 6 class") as caught:
        read_promptccd(config, labels, class_dict=tmp_path / "class_dict.txt",
                       class_names=["x", *names[:2], *names[3:]])
    assert "\n" not in str(caught.value)
    (tmp_path / "bad.yaml").write_text("DATA:\n  classes: __import__('os').system('false')\n")
    with pytest.raises(BenchError, match="not a PromptCCD config"):
        read_promptccd(tmp_path / "bad.yaml", labels)
    # labels of another dataset: 3 classes cut by a 6-class rule (was a protocol of empty classes), or 8 classes
    few, many = np.repeat(np.arange(3), 10), np.repeat(np.arange(8), 10)
    with pytest.raises(BenchError, match=r"c.yaml has 6 classes and 3 of them have no training image \(class 3 first; "
                                         r"the labels given hold 3 classes\)"):
        read_promptccd(config, few)
    with pytest.raises(BenchError, match=r"train_labels hold class 6; .*c.yaml has 6 classes \(0..5\)"):
        read_promptccd(config, many)


# -- Happy's SSB class splits --

def ssb_file(path, known, easy, medium, hard):
    """A split pickle in ssb_splits/cub_osr_splits.pkl's structure (protocol 3, builtins only)."""
    data = {"known_classes": known, "unknown_classes": {"Easy": easy, "Medium": medium, "Hard": hard},
            "closed_set_open_set_pairs": {"Easy": [(known[0], easy[0])], "Medium": [], "Hard": []}}
    path.write_bytes(pickle.dumps(data, protocol=3))
    return path


def test_the_ssb_reader_returns_the_class_lists(tmp_path):
    splits = read_ssb_splits(ssb_file(tmp_path / "cub_osr_splits.pkl", [7, 0, 5, 2], [1], [9, 3], [4, 8, 6]))
    assert splits.known == (7, 0, 5, 2)
    assert splits.unknown == {"Easy": (1,), "Medium": (9, 3), "Hard": (4, 8, 6)}
    # Happy's get_class_splits: known, then Hard + Medium + Easy, cut at --num_old_classes
    assert splits.happy_classes() == ((7, 0, 5, 2), (4, 8, 6, 9, 3, 1))
    assert splits.happy_classes(num_old_classes=5) == ((7, 0, 5, 2, 4), (8, 6, 9, 3, 1))
    # the order Happy's CIFAR-100 new classes arrive in, as its logs/cifar_continual_dataset_dict.txt records it
    assert happy_arrival_order(range(50, 100))[:12] == (78, 61, 60, 91, 52, 77, 88, 81, 72, 54, 83, 85)


class OpensAFile:
    """Unpickled without restriction, it creates `marker` (builtins.open)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


class RunsAShell:
    """Unpickled without restriction, it runs `touch marker` (os.system)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("payload", [OpensAFile, RunsAShell])
def test_a_pickle_that_asks_for_any_global_is_refused_and_nothing_runs(tmp_path, payload):
    marker = tmp_path / "ran"
    path = tmp_path / "cub_osr_splits.pkl"
    path.write_bytes(pickle.dumps({"known_classes": [0], "unknown_classes": {"Easy": [payload(marker)]}}, protocol=3))
    refused = r"refusing .*cub_osr_splits.pkl: it asks for ((builtins|io)\.open|posix\.system), "
    with pytest.raises(BenchError, match=refused) as caught:
        read_ssb_splits(path)
    assert "\n" not in str(caught.value) and not marker.exists()
    path.write_bytes(pickle.dumps({"known_classes": np.arange(3)}))  # numpy arrays: not in an SSB file either
    with pytest.raises(BenchError, match="it asks for numpy"):
        read_ssb_splits(path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(BenchError, match="not an SSB split file"):
        read_ssb_splits(path)
    path.write_bytes(pickle.dumps({"known_classes": [0], "unknown_classes": {"Easy": [1], "Medium": [2]}}, protocol=3))
    with pytest.raises(BenchError, match=r"not an SSB split file \(its class lists: KeyError: 'Hard'\)"):
        read_ssb_splits(path)


@pytest.mark.parametrize("reader, what", [
    ("happy", "a Happy split file"), ("config", "a PromptCCD config"), ("class_dict", "a PromptCCD class_dict.txt"),
    ("image_list", "a PromptCCD image list"), ("ssb", "an SSB split file")])
@pytest.mark.parametrize("broken", ["missing", "binary", "directory"])
def test_every_peer_file_reader_names_a_file_it_cannot_read(tmp_path, reader, what, broken):
    from bench.splits.manifests import read_happy
    from bench.splits.peer_splits import read_class_dict, read_image_list, read_promptccd_config

    path = tmp_path / "file"
    if broken == "binary":
        path.write_bytes(b"\xff\xfe\x00\x81 not text")
    elif broken == "directory":
        path.mkdir()
    read = {"happy": lambda: read_happy(path, 100), "config": lambda: read_promptccd_config(path),
            "class_dict": lambda: read_class_dict(path, ["a"]), "image_list": lambda: read_image_list(path, [], 1),
            "ssb": lambda: read_ssb_splits(path)}[reader]
    if reader == "ssb" and broken == "binary":
        what = "not an SSB split file"  # bytes it reads, and refuses as a pickle
    with pytest.raises(BenchError, match=f"{what}"):
        read()

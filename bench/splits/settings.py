"""The settings a run can be in, and the `mixed` setting's registered protocols.

- `incd`, the paper's class-iNCD: every step holds unlabelled images of its new classes only. Its
  splits are `2-step`, `5-step`, `10-step` (`bench.config.spec.SPLITS`).
- `mixed`, continual generalized category discovery (PromptCCD, Happy, VB-CGCD): step 0 holds labelled
  images of the first classes; every later step holds unlabelled images of its new classes mixed with
  images of every class seen before. Its splits are the protocols of `MIXED_SPLITS`, e.g.
  `happy-5-stage`: the split names the protocol and its number of steps, and the run's `setting`
  section holds its counts, the seed of its draw and how K is known, all part of the run id.

A mixed protocol is a rule, so that it applies to any dataset. Happy's (`happy-5-stage`): the labelled classes are the first
`labelled_classes` of the class order (a fraction of the classes, or a count), of which
`labelled_fraction` of the images are labelled; the rest of the classes arrive in equal groups, one per
step, and step s holds, per class, `old_seen` images of each labelled class (from the images the labelled
step left), `novel_seen` of each class that arrived in an earlier step and `novel_unseen` of each class
arriving now. A count below 1 is a fraction of the class's training images (at least one image).
PromptCCD's (`promptccd-3-stage`) is `bench.splits.peer_splits.promptccd_protocol` with the section's ratios.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from bench.errors import BenchError, closest, suggestion
from bench.splits.manifests import MixedProtocol

SETTINGS: dict[str, str] = {
    "incd": "class-iNCD (the paper's): each step holds unlabelled images of its new classes only",
    "mixed": "continual category discovery: a labelled first step, then unlabelled steps of old and new classes",
}
# setting.selection: which epoch of its training a step keeps (`bench.protocol.epoch_selection`)
SELECTIONS: dict[str, str] = {
    "last": "the last epoch",
    "val": "the best epoch on held-out labelled images",
    "oracle": "the best epoch on the test images (oracle on test: a leak, marked as such)",
    "happy": "Happy's rule: the first best epoch on the test images (oracle on test: a leak, marked as such)",
    "promptccd": "PromptCCD's rule: every 10th epoch, the first best old-class accuracy of k-means over the "
                 "method's representation of the test images (oracle on test: a leak, marked as such)",
}
TEST_SELECTIONS = ("oracle", "happy", "promptccd")  # the rules that read the test labels: every result of theirs is marked
ORACLE_MARK = "oracle on test"
# setting.arrival: "canonical", the new classes in the class order; "happy", in the order Happy's runs
# (`--shuffle_classes --seed 0`) shuffle them (`bench.splits.peer_splits.happy_arrival_order`); "happy-ssb", the
# dataset's SSB known classes labelled (Happy's `--use_ssb_splits`, on by default) and the others in Happy's order
ARRIVALS = ("canonical", "happy", "happy-ssb")
# setting.evaluation: what a step is scored on (`bench.protocol.mixed`, `bench.protocol.transductive`)
EVALUATIONS: dict[str, str] = {
    "inductive": "the method's predictions on the test images of every class seen so far (Happy's)",
    "transductive": "semi-supervised k-means at known K over the method's representation of the step's own "
                    "training images (PromptCCD's)",
}
# setting.draw: which images each step holds (`bench.splits.manifests.draw`, `bench.splits.happy_draw`)
DRAWS: dict[str, str] = {
    "bench": "bench's draw, seeded with setting.manifest_seed",
    "happy": "Happy's code's draw, replayed: its very images (CIFAR, TinyImageNet, ImageNet-100, CUB-200)",
}
K_SOURCES = ("known", "silhouette", "brent")  # setting.k: the new classes' count given, or estimated (estimate_k)


@dataclass(frozen=True)
class MixedSplit:
    """A registered mixed protocol: its unlabelled steps, the rule that cuts them (`happy`: the counts
    below; `promptccd`: `bench.splits.peer_splits.promptccd_protocol`) and the defaults of its `setting` section."""

    steps: int
    source: str
    counts: Mapping[str, Any]
    rule: str = "happy"
    arrival: str = "canonical"  # its `setting.arrival` default
    # its `setting.whole_train` default on a dataset whose reader draws a val partition (CUB, Herbarium): train on
    # the whole official training set, the partition given back (the peers read it whole; a mixed run scores
    # neither task mappings nor epochs on that partition, so holding it out would only lose training images)
    whole_train: bool = True


# Happy (Ma et al., NeurIPS'24), CIFAR-100: 50 labelled classes (80% of their images labelled), then 5
# steps of 10 new classes; per step 25 images of each labelled class, 25 of each earlier new class and
# 400 of each new one (`online_old_seen_num`, `online_novel_seen_num`, `online_novel_unseen_num` of its
# `logs/cifar100_continual_dataset_dict.txt`: steps of 5250, 5500, ... 6250 images). As fractions of
# CIFAR-100's 500 images per class, the rule gives exactly those counts there.
HAPPY = dict(labelled_classes=0.5, labelled_fraction=0.8, old_seen=0.05, novel_seen=0.05, novel_unseen=0.8)
# PromptCCD (Cendra et al., ECCV'24), CIFAR-100 (`config/cifar100/*.yaml`, `data.py:build_CCD_dataset`):
# the first 70% of the classes labelled, 3 steps; `ccd_split_ratio` row r cuts the images of the classes
# arriving at step r (row 0: the labelled ones, whose first piece is labelled) into one piece per step
# from r on, each a floor of its ratio of what is left; no image is in two steps.
PROMPTCCD = dict(labelled_classes=0.7, ccd_split_ratio=[[0.87, 0.54, 0.5, 1.0], [0.7, 0.67, 1.0], [0.9, 1.0], [1.0]])
# Happy on CUB-200 (its README's command: `--num_old_classes 100 --prop_train_labels 0.8 --online_old_seen_num 5
# --online_novel_seen_num 5 --online_novel_unseen_num 25 --shuffle_classes --seed 0`, SSB splits on): the SSB
# known classes labelled, absolute counts per session, the whole official training set (its data/cub.py)
HAPPY_CUB = dict(labelled_classes=100, labelled_fraction=0.8, old_seen=5, novel_seen=5, novel_unseen=25)
# Happy on ImageNet-100 (its logs/in100_continual_dataset_dict.txt: 5 sessions, per session 60 images of each
# labelled class, 60 of each earlier new class and 1000 of each arriving one, every image of a class with fewer, as
# its data/imagenet.py takes them; its new classes 50-99 in the shuffled order of the log), 50 labelled classes at
# its default `--prop_train_labels 0.8`
HAPPY_IN100 = dict(labelled_classes=50, labelled_fraction=0.8, old_seen=60, novel_seen=60, novel_unseen=1000)
MIXED_SPLITS: dict[str, MixedSplit] = {
    "happy-5-stage": MixedSplit(5, "Happy (NeurIPS'24)", HAPPY),
    "happy-cub-5-stage": MixedSplit(5, "Happy (NeurIPS'24) on CUB-200", HAPPY_CUB, arrival="happy-ssb"),
    "happy-in100-5-stage": MixedSplit(5, "Happy (NeurIPS'24) on ImageNet-100", HAPPY_IN100, arrival="happy"),
    "promptccd-3-stage": MixedSplit(3, "PromptCCD (ECCV'24)", PROMPTCCD, rule="promptccd"),
    # Happy's longer horizon (its Table 4; its code's `--continual_session_num 10` with the README's other arguments:
    # the same counts per class and session, the new classes cut into 10 equal groups: 5 a session on CIFAR-100)
    "happy-10-stage": MixedSplit(10, "Happy (NeurIPS'24), 10 sessions", HAPPY),
    "happy-cub-10-stage": MixedSplit(10, "Happy (NeurIPS'24) on CUB-200, 10 sessions", HAPPY_CUB, arrival="happy-ssb"),
    "happy-in100-10-stage": MixedSplit(10, "Happy (NeurIPS'24) on ImageNet-100, 10 sessions", HAPPY_IN100,
                                       arrival="happy"),
}
# the setting section of a mixed run, besides its counts
SETTING_KEYS: dict[str, Any] = {"name": "mixed", "protocol": "", "manifest_seed": 0, "k": "known",
                                "k_max_new": 0, "selection": "last", "val_fraction": 0.1,
                                # the order the new classes arrive in: the class order, or Happy's shuffle of them
                                "arrival": "canonical",
                                # what a step is scored on: the test images (inductive) or its own (transductive)
                                "evaluation": "inductive",
                                # which images: bench's seeded draw, or Happy's code's replayed (`happy_draw`)
                                "draw": "bench",
                                # a domain-shifted stream: one domain per stage, or a stream's name; [] for none
                                # (`bench.splits.domains`)
                                "domains": [],
                                # a split manifest file the run holds instead of drawing its own (its sha256,
                                # filled in when the run is planned, is part of the run id; its path is not)
                                "manifest_file": "", "manifest_sha256": ""}


def with_manifest_file(setting: dict[str, Any]) -> dict[str, Any]:
    """The section with the sha256 of its `manifest_file`, read and checked now (before anything runs)."""
    if not setting.get("manifest_file"):
        return setting
    from bench.splits.manifests import read_manifest_file

    if not isinstance(setting["manifest_file"], str):
        raise BenchError(f"bad setting.manifest_file={setting['manifest_file']!r}: the path of a split manifest")
    _, digest = read_manifest_file(setting["manifest_file"], MIXED_SPLITS[setting["protocol"]].steps)
    return {**setting, "manifest_sha256": digest}


def setting_of(config: Mapping[str, Any]) -> str:
    return str(config.get("setting", {}).get("name", "incd"))


def mixed_setting(split: str, partitioned: bool = False) -> dict[str, Any]:
    """The `setting` section a run of the mixed split `split` starts from; on a dataset whose reader holds out a
    val partition (`partitioned`), with the split's `whole_train` (absent elsewhere: nothing to give back, and
    the run ids of before the key stay)."""
    entry = MIXED_SPLITS[split]
    return {**SETTING_KEYS, "protocol": split, "arrival": entry.arrival, **entry.counts,
            **({"whole_train": entry.whole_train} if partitioned else {})}


def check_setting(setting: Mapping[str, Any], dataset: str = "") -> None:
    """Every key of a mixed run's `setting` section (of a run on `dataset`), before anything runs."""
    def fail(key: str, value: Any, valid: str) -> BenchError:
        return BenchError(f"bad setting.{key}={value!r}: {valid}")

    split = MIXED_SPLITS[setting["protocol"]]
    known = set(SETTING_KEYS) | set(split.counts) | {"whole_train"}
    for key in setting:
        if key not in known:
            valid = [f"setting.{k}" for k in sorted(known)]
            raise BenchError(f"bad --cfg-options key 'setting.{key}': not a key of the mixed setting; valid keys: "
                             f"{', '.join(valid)}{suggestion(f'setting.{k}' for k in closest(key, known))}")
    if setting["k"] not in K_SOURCES:
        raise fail("k", setting["k"], f"choose from {', '.join(K_SOURCES)}")
    if setting.get("arrival", "canonical") not in ARRIVALS:
        raise fail("arrival", setting["arrival"], f"choose from {', '.join(ARRIVALS)}")
    if setting.get("arrival", "canonical") != "canonical" and setting.get("manifest_file"):
        raise fail("arrival", setting["arrival"], "a split manifest file gives its own class order: leave "
                   "setting.arrival=canonical with setting.manifest_file")
    if setting.get("draw", "bench") not in DRAWS:
        raise fail("draw", setting["draw"], "choose from " + "; ".join(f"{k} ({v})" for k, v in DRAWS.items()))
    if setting.get("draw", "bench") == "happy" and (split.rule != "happy" or setting.get("manifest_file")):
        raise fail("draw", "happy", "Happy's draw replays Happy's code: it takes a happy-*-stage split and no "
                   "setting.manifest_file")
    if setting.get("domains"):
        from bench.splits.domains import stream_of

        stream_of(setting["domains"], split.steps + 1, dataset)
        if setting.get("draw", "bench") == "happy" or setting.get("manifest_file"):
            raise fail("domains", setting["domains"], "a domain-shifted stream draws its own images: leave "
                       "setting.draw=bench and no setting.manifest_file")
    if setting.get("evaluation", "inductive") not in EVALUATIONS:
        raise fail("evaluation", setting["evaluation"],
                   "choose from " + "; ".join(f"{k} ({v})" for k, v in EVALUATIONS.items()))
    if setting["selection"] not in SELECTIONS:
        raise fail("selection", setting["selection"],
                   "choose from " + "; ".join(f"{k} ({v})" for k, v in SELECTIONS.items()))
    fraction = setting.get("val_fraction", SETTING_KEYS["val_fraction"])
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise fail("val_fraction", fraction, "a fraction in (0, 1) of each labelled class's images, held out "
                   "for setting.selection=val")
    if not isinstance(setting.get("whole_train", False), bool):
        raise fail("whole_train", setting["whole_train"], "True (train on the whole official training set, a "
                   "dataset's val partition given back) or False (the partition held out)")
    if setting.get("manifest_sha256") and not setting.get("manifest_file"):
        raise fail("manifest_sha256", setting["manifest_sha256"], "filled in from setting.manifest_file; give that")
    for key in ("manifest_seed", "k_max_new"):
        if not isinstance(setting[key], int) or isinstance(setting[key], bool) or setting[key] < 0:
            raise fail(key, setting[key], "an integer >= 0")
    for key in split.counts:
        value = setting[key]
        if key == "ccd_split_ratio":
            continue  # checked with the class count (`class_groups`)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise fail(key, value, "a fraction in (0, 1) of the classes or images, or a count >= 1")
    if split.rule == "happy" and setting["labelled_fraction"] >= 1:
        raise fail("labelled_fraction", setting["labelled_fraction"],
                   "a fraction in (0, 1): the labelled classes' other images feed the later steps")


def _count(share: float, n: int) -> int:
    """A class's count of `n` images: a fraction of them (at least one), or a count, at most `n` (Happy's ImageNet
    code takes every image of a class that has fewer than it asks for)."""
    return min(int(share), n) if share >= 1 else max(1, int(round(share * n)))


def class_groups(setting: Mapping[str, Any], num_classes: int) -> tuple[int, int]:
    """The labelled classes and the new classes per step of a mixed protocol on `num_classes` classes
    (the classes the steps cannot share equally are left out, as Happy leaves them)."""
    split = MIXED_SPLITS[setting["protocol"]]
    labelled = min(_count(setting["labelled_classes"], num_classes), num_classes)
    per_step = (num_classes - labelled) // split.steps
    if per_step < 1:
        raise BenchError(f"the {setting['protocol']} protocol needs at least one new class per step: {num_classes} "
                         f"classes with {labelled} labelled leave {num_classes - labelled} for {split.steps} steps")
    if split.rule == "promptccd":
        _promptccd_config(setting, num_classes).check()
    return labelled, per_step


def arrival_order(setting: Mapping[str, Any], num_classes: int, dataset: str = "") -> np.ndarray | None:
    """The classes in the order a mixed run's steps bring them, where `setting.arrival` reorders them; None for
    the class order. `happy`: the labelled classes first, as they are, then the new ones in the order Happy's
    runs shuffle them (its `data/cifar.py` shuffles the sorted new classes with numpy seeded 0: on CIFAR-100 its
    logs/cifar_continual_dataset_dict.txt). `happy-ssb`: the dataset's SSB known classes first (in the SSB
    file's order), then the others so shuffled (its data/cub.py; logs/cub_continual_dataset_dict.txt)."""
    arrival = setting.get("arrival", "canonical")
    if arrival == "canonical":
        return None
    from bench.splits.peer_splits import SSB_KNOWN, happy_arrival_order

    if arrival == "happy-ssb":
        if dataset not in SSB_KNOWN:
            raise BenchError(f"setting.arrival=happy-ssb labels a dataset's SSB known classes; bench has them for "
                             f"{', '.join(sorted(SSB_KNOWN))}, not {dataset or 'this dataset'}")
        known = SSB_KNOWN[dataset]
        if len(known) != _count(setting["labelled_classes"], num_classes):
            raise BenchError(f"setting.labelled_classes={setting['labelled_classes']!r}: the SSB splits of {dataset} "
                             f"label its {len(known)} known classes")
        first = list(known)
    else:
        first = list(range(class_groups(setting, num_classes)[0]))
    others = sorted(set(range(num_classes)) - set(first))
    return np.array([*first, *happy_arrival_order(others, seed=0)], dtype=np.int64)


def _promptccd_config(setting: Mapping[str, Any], num_classes: int) -> Any:
    from bench.splits.peer_splits import PromptCCDConfig

    ratios = setting["ccd_split_ratio"]
    if not isinstance(ratios, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in ratios):
        raise BenchError(f"bad setting.ccd_split_ratio={ratios!r}: a list of lists of ratios, as PromptCCD's config")
    return PromptCCDConfig(classes=num_classes, labelled_data=_count(setting["labelled_classes"], num_classes),
                           n_stage=MIXED_SPLITS[setting["protocol"]].steps,
                           ccd_split_ratio=tuple(tuple(float(x) for x in r) for r in ratios))


def protocol_for(setting: Mapping[str, Any], num_classes: int, train_labels: np.ndarray,
                 stage_labels: list[np.ndarray] | None = None) -> MixedProtocol:
    """The protocol of a mixed run on a dataset with `num_classes` classes (in its class order), whose
    training images have `train_labels`; in a domain-shifted stream, `stage_labels[s]` are the labels of stage s's
    domain's images, whose class sizes that stage's counts are fractions of (`train_labels`: stage 0's)."""
    steps = MIXED_SPLITS[setting["protocol"]].steps
    labelled, per_step = class_groups(setting, num_classes)
    sizes = np.bincount(np.asarray(train_labels, dtype=np.int64), minlength=num_classes)
    sizes_at = [np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes) for labels in stage_labels] \
        if stage_labels is not None else [sizes] * (steps + 1)
    if MIXED_SPLITS[setting["protocol"]].rule == "promptccd":
        from bench.splits.peer_splits import promptccd_protocol

        return promptccd_protocol(sizes.tolist(), _promptccd_config(setting, num_classes))
    arrivals = [range(labelled + s * per_step, labelled + (s + 1) * per_step) for s in range(steps)]
    protocol_steps = []
    for s in range(steps):
        size = sizes_at[s + 1]
        counts = {c: _count(setting["old_seen"], int(size[c])) for c in range(labelled)}
        counts.update({c: _count(setting["novel_seen"], int(size[c])) for a in arrivals[:s] for c in a})
        counts.update({c: _count(setting["novel_unseen"], int(size[c])) for c in arrivals[s]})
        protocol_steps.append(counts)
    return MixedProtocol(tuple(range(labelled)), float(setting["labelled_fraction"]), tuple(protocol_steps))


def step_sizes(protocol: MixedProtocol) -> tuple[int, ...]:
    """How many classes each step introduces: the labelled ones, then each step's new ones."""
    seen = set(protocol.labelled_classes)
    sizes = [len(seen)]
    for counts in protocol.steps:
        sizes.append(len(set(counts) - seen))
        seen |= set(counts)
    return tuple(sizes)


def step_name(t: int, mixed: bool) -> str:
    """How logs, pages and plots name step t (0-based): the mixed setting's as its peers' papers do (`stage 0`, the
    labelled one, then `stage 1` ...), class-iNCD's as the paper does (`step 1` ...)."""
    return f"stage {t}" if mixed else f"step {t + 1}"


def of_mixed_setting(split_label: str) -> bool:
    """Whether a results split label (`describe`: `happy-5-stage · draw 0`) is a mixed run's."""
    return str(split_label).split(" · ")[0] in MIXED_SPLITS


def first_step(mixed: bool) -> int:
    """The number plots give the first step: 0 in the mixed setting (its labelled stage), 1 in class-iNCD."""
    return 0 if mixed else 1


def describe(split: str, config: Mapping[str, Any]) -> str:
    """How results show a mixed run's split: `happy-5-stage · draw 0 · K silhouette`."""
    setting = config["setting"]
    drawn = (f"file {setting['manifest_sha256'][:8]}" if setting.get("manifest_sha256")
             else "Happy's draw" if setting.get("draw", "bench") == "happy" else f"draw {setting['manifest_seed']}")
    parts = [split, drawn]
    if setting.get("arrival", "canonical") != "canonical":
        parts.append(f"arrival {setting['arrival']}")
    if setting["k"] != "known":
        parts.append(f"K {setting['k']}")
    if setting.get("evaluation", "inductive") != "inductive":
        parts.append(setting["evaluation"])
    if setting.get("domains"):
        from bench.splits.domains import label

        parts.append(f"domains {label(setting['domains'])}")
    selection = setting.get("selection", "last")
    if selection in ("happy", "promptccd"):
        parts.append(f"selected as {'Happy' if selection == 'happy' else 'PromptCCD'}")
    if selection in TEST_SELECTIONS:
        parts.append(ORACLE_MARK.upper())  # a leak: shown wherever the run is
    elif selection != "last":
        parts.append(f"selected on {selection}")
    return " · ".join(parts)


__all__ = ["SETTINGS", "EVALUATIONS", "MIXED_SPLITS", "MixedSplit", "arrival_order", "check_setting", "class_groups", "describe",
           "mixed_setting",
           "protocol_for", "setting_of", "step_sizes", "step_name", "first_step", "of_mixed_setting"]

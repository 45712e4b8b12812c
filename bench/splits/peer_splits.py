"""Split files that other continual category discovery code ships, read as data into bench's
`MixedProtocol` and `Manifest` (bench.splits.manifests), so that a run can hold exactly their steps. Nothing a
file holds is ever run: text is parsed as literals, a pickle through an unpickler that imports nothing.

PromptCCD (Cendra et al., ECCV'24; github.com/Visual-AI/PromptCCD) ships under `config/`:
- `<dataset>/*.yaml`, whose DATA section sets `classes`, `labelled_data`, `n_stage`, `ccd_split_ratio`
  and CONFIG section `manual_seed`: the parameters of its rule (`promptccd_protocol`);
- `cifar100/class_dict.txt`, `tinyimagenet/class_dict.txt`: a Python dict literal, class folder name
  (CIFAR-100 label name, TinyImageNet wnid) -> class index;
- `imagenet100/train_100.txt`, `val_100.txt`: one `relative/path label` line per image.
It ships no list of steps: its `data.py` draws them at start-up, shuffling each class's images with
numpy's global generator seeded with `manual_seed`, in the order its loader lists the training images.
Where a file fixes that order (ImageNet-100's list) `read_promptccd` rebuilds the very images of every
step (a `Manifest`); where the filesystem does (`glob` for CIFAR-100 and TinyImageNet), only the
counts (a `MixedProtocol`) can be PromptCCD's.

Happy (Ma et al., NeurIPS'24; github.com/mashijie1028/Happy-CGCD) takes CUB's classes from the Semantic
Shift Benchmark's `ssb_splits/cub_osr_splits.pkl` (`read_ssb_splits`); its step counts are in the
file `bench.splits.manifests.read_happy` reads.
"""
from __future__ import annotations

import ast
import io
import pickle
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Mapping, Sequence, cast

import numpy as np

from bench.errors import BenchError, first_line
from bench.splits.manifests import Manifest, MixedProtocol, read_text

# -- PromptCCD --------------------------------------------------------------------------------------

PROMPTCCD_RATIOS: tuple[tuple[float, ...], ...] = ((0.87, 0.54, 0.5, 1.0), (0.7, 0.67, 1.0), (0.9, 1.0), (1.0,))
PER_CLASS = 500  # data_util.load_imagenet100 keeps each class's first 500 lines of train_100.txt


@dataclass(frozen=True)
class PromptCCDConfig:
    """The parameters of PromptCCD's rule; the defaults are its CIFAR-100 config's (every shipped config
    has these ratios, 3 steps and seed 1, and 70% of the classes labelled but Stanford Cars: 130 of 196)."""

    classes: int = 100
    labelled_data: int = 70
    n_stage: int = 3
    ccd_split_ratio: tuple[tuple[float, ...], ...] = PROMPTCCD_RATIOS
    manual_seed: int = 1

    @classmethod
    def for_classes(cls, classes: int) -> "PromptCCDConfig":
        """The CIFAR-100 protocol on a dataset of `classes` classes: round(70%) of them labelled."""
        return cls(classes=classes, labelled_data=int(round(0.7 * classes)))

    def check(self) -> None:
        per_step = (self.classes - self.labelled_data) // max(self.n_stage, 1)
        rows = self.ccd_split_ratio
        if not 0 < self.labelled_data < self.classes or self.n_stage < 1 or per_step < 1:
            raise BenchError(f"PromptCCD split: {self.classes} classes with {self.labelled_data} labelled make "
                             f"no {self.n_stage} steps of at least one new class")
        needed = [self.n_stage + 1] + [self.n_stage - a for a in range(self.n_stage)]
        if len(rows) < len(needed) or any(len(r) < n for r, n in zip(rows, needed)) or\
                any(not 0 <= x <= 1 for r in rows for x in r):
            raise BenchError(f"PromptCCD split: ccd_split_ratio {[list(r) for r in rows]} is not {self.n_stage + 1} "
                             f"rows of {needed} ratios in [0, 1]")


def _pieces(config: PromptCCDConfig, c: int, n: int) -> list[tuple[int, int]]:
    """(step, size) of the consecutive pieces PromptCCD cuts class `c`'s n shuffled images into (step 0:
    labelled), as `build_CCD_dataset` in its data.py does. A labelled class (c < labelled_data) keeps
    int(n * r[0][0]) labelled images, then gives step s = 1..n_stage int(left * r[0][s]) of those left.
    A new class arrives in step a + 1, a = (c % labelled_data) // ((classes - labelled_data) // n_stage),
    and gives step a + 1 + j int(left * r[a + 1][j]). Every size is floored and every piece is taken from
    what the earlier pieces left, so the steps are disjoint; the classes of an incomplete last group
    (a >= n_stage) are in no step at all, and `c % labelled_data` wraps when more classes are new than
    labelled. All of this is read from the code (the floors, the disjoint cuts, the arrival formula), which
    is what fixes the numbers; the configs carry only the ratios."""
    if c < config.labelled_data:
        first, row = 0, config.ccd_split_ratio[0][:config.n_stage + 1]
    else:
        a = (c % config.labelled_data) // ((config.classes - config.labelled_data) // config.n_stage)
        if a >= config.n_stage:
            return []
        first, row = a + 1, config.ccd_split_ratio[a + 1][:config.n_stage - a]
    pieces, left = [], n
    for j, ratio in enumerate(row):
        size = int(left * ratio)
        pieces.append((first + j, size))
        left -= size
    return pieces


def promptccd_protocol(class_counts: Sequence[int] | np.ndarray, config: PromptCCDConfig | None = None,
                       order: Sequence[int] | None = None) -> MixedProtocol:
    """PromptCCD's steps for a dataset whose class c (in PromptCCD's class order) has `class_counts[c]`
    training images; `config` defaults to its CIFAR-100 protocol on len(class_counts) classes, `order[c]`
    is bench's index of class c (default: the same). Its labelled classes are the first `labelled_data`
    and its new classes arrive in index order, (classes - labelled_data) // n_stage a step (no shuffle).
    On CIFAR-100 (500 images a class): 70 labelled classes of 435 labelled images; step 1 holds 35 of each
    labelled class and 350 of each of classes 70..79; step 2 15, 100 and 450 of classes 80..89; step 3
    15, 50, 50 and 500 of classes 90..99 (disjoint steps, `MixedProtocol.disjoint`)."""
    config = config or PromptCCDConfig.for_classes(len(class_counts))
    config.check()
    if len(class_counts) < config.classes:
        raise BenchError(f"PromptCCD split: {config.classes} classes, but image counts for {len(class_counts)}")
    index = list(order) if order is not None else list(range(config.classes))
    if len(index) < config.classes:
        raise BenchError(f"PromptCCD split: {config.classes} classes, but a class order of {len(index)}")
    labelled: dict[int, int] = {}
    steps: list[dict[int, int]] = [{} for _ in range(config.n_stage)]
    for c in range(config.classes):
        for step, size in _pieces(config, c, int(class_counts[c])):
            if step == 0:
                labelled[index[c]] = size
            elif size:
                steps[step - 1][index[c]] = size
    return MixedProtocol(tuple(index[:config.labelled_data]), config.ccd_split_ratio[0][0], tuple(steps),
                         labelled_counts=labelled, disjoint=True)


def promptccd_manifest(labels: Sequence[int] | np.ndarray, config: PromptCCDConfig,
                       index: Sequence[int] | np.ndarray | None = None) -> Manifest:
    """The very images PromptCCD puts in each step when its training list, in its loader's order, has
    PromptCCD classes `labels` (its image i is image `index[i]` of bench's training set): for each class
    in index order, its images shuffled by numpy's legacy generator seeded once with `manual_seed`
    (`seed_everything`, then one `np.random.shuffle` per class, nothing else drawn before), then cut into
    `_pieces`. Which images, not their order within a step: PromptCCD reshuffles that per epoch."""
    config.check()
    labels = np.asarray(labels, dtype=np.int64)
    where = np.arange(len(labels)) if index is None else np.asarray(index, dtype=np.int64)
    rng = np.random.RandomState(config.manual_seed)
    steps: list[list[np.ndarray]] = [[] for _ in range(config.n_stage + 1)]
    for c in range(config.classes):
        members = np.flatnonzero(labels == c)
        rng.shuffle(members)
        start = 0
        for step, size in _pieces(config, c, len(members)):
            steps[step].append(members[start:start + size])
            start += size
    return Manifest(tuple(np.sort(where[np.concatenate(s)]) if s else np.empty(0, dtype=np.int64) for s in steps),
                    (True,) + (False,) * config.n_stage)


_CONFIG_KEYS = ("classes", "labelled_data", "n_stage", "ccd_split_ratio", "manual_seed")


def read_promptccd_config(path: str | Path) -> PromptCCDConfig:
    """The rule's parameters from a PromptCCD yaml (`config/<dataset>/*.yaml`): the five `key: value` lines
    it needs, each value a literal (never YAML's tags, never code)."""
    found: dict[str, object] = {}
    for line in read_text(path, "a PromptCCD config (config/<dataset>/*.yaml)").splitlines():
        m = re.fullmatch(r"\s*([a-z_]+):\s*([^#]*?)\s*(#.*)?", line)
        if m and m.group(1) in _CONFIG_KEYS and m.group(1) not in found:
            try:
                found[m.group(1)] = ast.literal_eval(m.group(2))
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                raise BenchError(f"{path}: not a PromptCCD config ({m.group(1)}: {m.group(2)[:60]!r} is not a "
                                 f"one-line literal)") from None
    missing = [k for k in _CONFIG_KEYS if k not in found]
    if missing:
        raise BenchError(f"{path}: not a PromptCCD config (no {', '.join(missing)})")
    try:
        ints = [found[k] for k in _CONFIG_KEYS if k != "ccd_split_ratio"]
        if not all(type(v) is int for v in ints):
            raise TypeError("classes, labelled_data, n_stage and manual_seed must be integers")
        classes, labelled, n_stage, seed = cast("list[int]", ints)
        ratios = tuple(tuple(float(x) for x in row) for row in cast("list[list[float]]", found["ccd_split_ratio"]))
    except (TypeError, ValueError) as err:
        raise BenchError(f"{path}: not a PromptCCD config ({first_line(err)})") from None
    config = PromptCCDConfig(classes, labelled, n_stage, ratios, seed)
    config.check()
    return config


def read_class_dict(path: str | Path, class_names: Sequence[str]) -> tuple[int, ...]:
    """bench's index of each PromptCCD class, from its `class_dict.txt` (name -> PromptCCD index, a Python
    dict literal) and the dataset's class names; the first name the dataset lacks is an error."""
    try:
        table = ast.literal_eval(read_text(path, "a PromptCCD class_dict.txt").strip())
    except (ValueError, SyntaxError, RecursionError, MemoryError) as err:
        raise BenchError(f"{path}: not a PromptCCD class_dict ({first_line(err)})") from None
    if not isinstance(table, dict) or not all(isinstance(k, str) and type(v) is int for k, v in table.items())\
            or sorted(table.values()) != list(range(len(table))):
        raise BenchError(f"{path}: not a PromptCCD class_dict (a dict of class names to the indices 0..n-1)")
    where = {name: i for i, name in enumerate(class_names)}
    order = [0] * len(table)
    for name, c in table.items():
        if name not in where:
            raise BenchError(f"{path}: class {name!r} is not one of the dataset's {len(where)} class names")
        order[c] = where[name]
    return tuple(order)


def read_image_list(path: str | Path, train_files: Sequence[str | Path], classes: int,
                    per_class: int | None = PER_CLASS) -> tuple[np.ndarray, np.ndarray]:
    """PromptCCD's training list from a `path label` file (`config/imagenet100/train_100.txt`), as its
    loader builds it: each class's first `per_class` lines in file order, the classes 0..classes-1 one
    after the other (lines of other labels dropped). Returns their PromptCCD labels and, for each, its
    index in bench's training set: the file in `train_files` whose path ends with the line's path. The
    first kept line (in that order) that matches no training file, or more than one, is an error."""
    kept: dict[int, list[tuple[int, str]]] = {c: [] for c in range(classes)}
    for number, line in enumerate(read_text(path, "a PromptCCD image list (`path label` lines)").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2 or not re.fullmatch(r"-?\d+", parts[1]):
            raise BenchError(f"{path}: line {number} is not `path label`: {line.strip()!r}")
        c = int(parts[1])
        if c in kept and (per_class is None or len(kept[c]) < per_class):
            kept[c].append((number, parts[0]))
    entries = [entry for c in range(classes) for entry in kept[c]]
    labels = np.asarray([c for c in range(classes) for _ in kept[c]], dtype=np.int64)
    return labels, _match(path, entries, train_files)


def _match(source: str | Path, entries: Sequence[tuple[int, str]], train_files: Sequence[str | Path]) -> np.ndarray:
    tables: dict[int, dict[tuple[str, ...], int]] = {}
    index = np.empty(len(entries), dtype=np.int64)
    taken: dict[int, int] = {}
    for k, (number, entry) in enumerate(entries):
        key = PurePosixPath(entry.replace("\\", "/")).parts
        if len(key) not in tables:
            table: dict[tuple[str, ...], int] = {}
            for i, name in enumerate(train_files):
                tail = PurePosixPath(str(name).replace("\\", "/")).parts[-len(key):]
                table[tail] = -1 if tail in table else i  # -1: two training files end so
            tables[len(key)] = table
        hit = tables[len(key)].get(key)
        if hit is None or hit < 0:
            what = "matches none" if hit is None else "matches more than one"
            raise BenchError(f"{source}: line {number} {entry!r} {what} of the {len(train_files)} training files")
        if hit in taken:
            raise BenchError(f"{source}: line {number} {entry!r} names the image line {taken[hit]} named")
        taken[hit] = number
        index[k] = hit
    return index


@dataclass(frozen=True)
class PromptCCDSplit:
    """An imported PromptCCD split: its parameters, its counts in bench's class indices, and its images
    (`manifest`) where its files fix them."""

    config: PromptCCDConfig
    protocol: MixedProtocol
    manifest: Manifest | None


def read_promptccd(config: str | Path, train_labels: Sequence[int], *, class_dict: str | Path | None = None,
                   class_names: Sequence[str] | None = None, image_list: str | Path | None = None,
                   train_files: Sequence[str | Path] | None = None,
                   per_class: int | None = PER_CLASS) -> PromptCCDSplit:
    """A PromptCCD split for bench's training set (`train_labels`; `train_files`, its file names, for an
    image list). The rule's parameters come from the yaml `config`; PromptCCD's class order from
    `class_dict` (with bench's `class_names`), from the image list (each PromptCCD label must be one bench
    class), or else is bench's. With an `image_list` the images are fixed too: `manifest` holds them."""
    parameters = read_promptccd_config(config)
    labels = np.asarray(train_labels, dtype=np.int64)
    if image_list is not None:
        if train_files is None or class_dict is not None:
            raise BenchError(f"{image_list}: an image list needs the training set's file names (train_files) and "
                             f"sets the class order itself (no class_dict)")
        theirs, index = read_image_list(image_list, train_files, parameters.classes, per_class)
        order = _order_of(image_list, theirs, labels[index], parameters.classes)
        counts = np.bincount(theirs, minlength=parameters.classes)
        return PromptCCDSplit(parameters, promptccd_protocol(counts, parameters, order),
                              promptccd_manifest(theirs, parameters, index))
    if class_dict is not None:
        if class_names is None:
            raise BenchError(f"{class_dict}: a class_dict needs the dataset's class names")
        order = read_class_dict(class_dict, class_names)
    else:
        order = tuple(range(parameters.classes))
    if len(order) < parameters.classes:
        raise BenchError(f"{class_dict}: {len(order)} classes; {config} has {parameters.classes}")
    beyond = np.unique(labels[labels >= parameters.classes]) if class_dict is None else np.empty(0)
    if len(beyond):  # bench's order is PromptCCD's: a class past the config's is of another dataset
        raise BenchError(f"train_labels hold class {int(beyond[0])}; {config} has {parameters.classes} classes "
                         f"(0..{parameters.classes - 1}): give the training labels of the dataset it is for")
    counts = np.asarray([int((labels == order[c]).sum()) for c in range(parameters.classes)])
    empty = np.flatnonzero(counts == 0)  # labels of 3 classes cut by a 100-class rule: 97 empty classes, silently
    if len(empty):
        raise BenchError(f"{config} has {len(counts)} classes and {len(empty)} of them have no training image "
                         f"(class {int(empty[0])} first; the labels given hold {len(np.unique(labels))} classes): give "
                         f"the training labels of the dataset it is for")
    return PromptCCDSplit(parameters, promptccd_protocol(counts, parameters, order), None)


def _order_of(source: str | Path, theirs: np.ndarray, ours: np.ndarray, classes: int) -> tuple[int, ...]:
    order = []
    for c in range(classes):
        found = np.unique(ours[theirs == c])
        if len(found) != 1:
            raise BenchError(f"{source}: its class {c} holds images of {len(found)} of the dataset's classes "
                             f"({found[:3].tolist()}), not one")
        order.append(int(found[0]))
    if len(set(order)) != len(order):
        raise BenchError(f"{source}: two of its classes are the same class of the dataset")
    return tuple(order)


# -- Happy's SSB class splits (`ssb_splits/<dataset>_osr_splits.pkl`) --------------------------------

DIFFICULTIES = ("Easy", "Medium", "Hard")


@dataclass(frozen=True)
class SSBSplits:
    """The Semantic Shift Benchmark's classes (0-based class ids: CUB's official id - 1): `known`, and
    the `unknown` ones by difficulty, Easy / Medium / Hard."""

    known: tuple[int, ...]
    unknown: Mapping[str, tuple[int, ...]]

    def happy_classes(self, num_old_classes: int = -1) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Happy's labelled and new classes (`get_class_splits` in its data/get_datasets.py): known, then
        Hard + Medium + Easy, cut after `num_old_classes` when > 0 (its CUB runs: 100, the known ones)."""
        classes = self.known + self.unknown["Hard"] + self.unknown["Medium"] + self.unknown["Easy"]
        cut = num_old_classes if num_old_classes > 0 else len(self.known)
        return classes[:cut], classes[cut:]


# The SSB known classes (0-based: CUB's official id - 1) in the order of Happy-CGCD's
# ssb_splits/<dataset>_osr_splits.pkl `known_classes`, the labelled classes of its runs on CUB (read from the
# files, which `read_ssb_splits` reads too; kept here so that a registered split needs no file)
SSB_KNOWN: dict[str, tuple[int, ...]] = {"cub200": (
    150, 70, 34, 178, 199, 131, 129, 147, 134, 11, 26, 93, 95, 121, 123, 99, 149, 167, 18, 31, 69, 198, 116, 158, 126,
    17, 5, 179, 111, 163, 184, 81, 174, 42, 53, 89, 77, 55, 23, 48, 43, 44, 56, 28, 193, 143, 0, 176, 84, 15, 38, 154,
    141, 190, 172, 124, 189, 19, 80, 157, 12, 9, 79, 30, 94, 67, 197, 97, 168, 137, 119, 76, 98, 88, 40, 106, 171, 87,
    166, 186, 27, 51, 144, 135, 161, 64, 177, 7, 146, 61, 50, 162, 133, 82, 39, 74, 72, 91, 196, 136),
    # ssb_splits/aircraft_osr_splits.pkl (the sorted variants' indices, as bench's reader numbers them)
    "aircraft": (
    0, 1, 2, 3, 4, 5, 10, 11, 14, 16, 17, 19, 21, 22, 23, 24, 27, 28, 29, 30, 33, 36, 37, 38, 39, 41, 43, 44, 45,
    46, 47, 48, 52, 53, 56, 57, 58, 63, 64, 65, 66, 67, 71, 73, 76, 77, 79, 92, 95, 99),
    # ssb_splits/scars_osr_splits.pkl (Stanford Cars' class id - 1)
    "cars": (
    1, 11, 25, 38, 46, 50, 53, 75, 84, 100, 105, 117, 123, 129, 133, 134, 135, 136, 137, 138, 140, 144, 145, 146,
    147, 149, 150, 151, 153, 160, 161, 162, 163, 164, 167, 168, 169, 174, 175, 180, 185, 186, 187, 192, 193, 0, 81,
    97, 104, 122, 139, 141, 142, 143, 148, 152, 154, 155, 156, 157, 158, 159, 165, 166, 170, 171, 172, 173, 176,
    177, 181, 184, 188, 191, 194, 195, 2, 7, 9, 16, 20, 26, 28, 44, 54, 95, 98, 102, 127, 178, 182, 22, 41, 82, 93,
    112, 125, 189)}


def happy_arrival_order(new_classes: Sequence[int], seed: int = 0, shuffle: bool = True) -> tuple[int, ...]:
    """The order Happy's new classes arrive in (its `novel_targets_shuffle`): ascending (it makes a set of
    them, which CPython iterates so for these small ints), then, with `--shuffle_classes` (its runs'),
    shuffled by numpy's legacy generator seeded with `--seed` (0). This gives the order its
    logs/cub_continual_dataset_dict.txt records from the SSB file's classes."""
    order = np.array(sorted(set(int(c) for c in new_classes)), dtype=np.int64)
    if shuffle:
        np.random.RandomState(seed).shuffle(order)
    return tuple(int(c) for c in order)


class _RefusedGlobal(pickle.UnpicklingError):
    pass


class _DataOnly(pickle.Unpickler):
    """An SSB split file holds dicts, lists, tuples, strings and ints: nothing to import. Any global it
    asks for (os.system, builtins.open ...) is refused before it is looked up, so no code runs."""

    def find_class(self, module: str, name: str) -> type:
        raise _RefusedGlobal(f"{module}.{name}")


def read_ssb_splits(path: str | Path) -> SSBSplits:
    """The class lists of an SSB split pickle (`{'known_classes': [...], 'unknown_classes': {'Easy': [...],
    'Medium': [...], 'Hard': [...]}, ...}`), read without importing anything; anything else is a one-line
    error."""
    try:
        raw = Path(path).expanduser().read_bytes()
    except OSError as err:
        raise BenchError(f"{path}: cannot read an SSB split file ({type(err).__name__}: {err})") from None
    try:
        data = _DataOnly(io.BytesIO(raw)).load()
    except _RefusedGlobal as err:
        raise BenchError(f"refusing {path}: it asks for {err}, and an SSB split file holds only class lists") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            MemoryError, RecursionError) as err:
        raise BenchError(f"{path}: not an SSB split file ({first_line(err)})") from None
    try:
        known = _ids(data["known_classes"])
        unknown = {d: _ids(data["unknown_classes"][d]) for d in DIFFICULTIES}
    except (TypeError, KeyError, ValueError) as err:
        raise BenchError(f"{path}: not an SSB split file (its class lists: {first_line(err)})") from None
    every = list(known) + [c for d in DIFFICULTIES for c in unknown[d]]
    if len(set(every)) != len(every):
        raise BenchError(f"{path}: a class is listed twice among its known and unknown classes")
    return SSBSplits(known, unknown)


def _ids(values: object) -> tuple[int, ...]:
    if not isinstance(values, (list, tuple)) or not all(type(v) is int and v >= 0 for v in values):
        raise ValueError(f"not a list of class ids: {values!r:.60}")
    return tuple(values)


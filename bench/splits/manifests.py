"""The `mixed` setting of continual category discovery (its pieces): a labelled first
step, then unlabelled steps that mix images of classes already seen with new ones.

A `MixedProtocol` says, per step, how many training images of which class it holds; `draw` turns it
into a `Manifest` (which image goes to which step, labelled or not) for a dataset's training labels
and a seed. A manifest is what a run would record and can be written and read back (`to_json`,
`from_json`, versioned); `read_happy` imports the split file Happy (NeurIPS'24) ships, so that the
counts are exactly that file's (PromptCCD's files and Happy's SSB class splits: `bench.splits.peer_splits`).
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from bench.errors import BenchError

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class MixedProtocol:
    """Step 0: `labelled_fraction` of every image of each class in `labelled_classes`, with labels.
    Step s >= 1: `steps[s - 1]`, a map class -> number of unlabelled images.

    Two fields only PromptCCD's rule (bench.splits.peer_splits) needs, off by default (Happy's way):
    `labelled_counts`, the labelled images per class when a rule fixes them (PromptCCD floors
    `n * fraction`, where `labelled_fraction` would round); `disjoint`, every image in at most one step
    (PromptCCD partitions each class's images among the steps, where Happy draws each step afresh)."""

    labelled_classes: tuple[int, ...]
    labelled_fraction: float
    steps: tuple[Mapping[int, int], ...]
    labelled_counts: Mapping[int, int] | None = None
    disjoint: bool = False

    def seen_before(self, step: int) -> set[int]:
        """The classes of steps 0..stage-1 (the "soft" old classes of `step`)."""
        seen = set(self.labelled_classes)
        for counts in self.steps[:max(step - 1, 0)]:
            seen |= set(counts)
        return seen


@dataclass(frozen=True)
class Manifest:
    """Which training images each step holds: `steps[0]` the labelled step, then the unlabelled ones
    (indices into the dataset's training set)."""

    steps: tuple[np.ndarray, ...]
    labelled: tuple[bool, ...]
    # labelled images held out of step 0 for epoch selection (`setting.selection=val`), never trained on
    validation: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    # a domain-shifted stream's domain of each step (`bench.splits.domains`), the labelled one first; () without one
    domains: tuple[str, ...] = ()

    def counts(self, train_labels: np.ndarray) -> list[dict[int, int]]:
        """Per step, images per class."""
        labels = np.asarray(train_labels)
        return [dict(zip(*map(np.ndarray.tolist, np.unique(labels[index], return_counts=True))))
                for index in self.steps]

    def to_json(self) -> str:
        data = {"version": MANIFEST_VERSION, "labelled": list(self.labelled),
                "stages": [index.tolist() for index in self.steps]}
        if len(self.validation):
            data["validation"] = self.validation.tolist()
        if self.domains:
            data["domains"] = list(self.domains)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str, *, checked: bool = True) -> "Manifest":
        """A manifest from its JSON, or a `BenchError` saying what is wrong with it: an object with `version`,
        `steps` (lists of training-image indices: integers >= 0, each at most once in a step), `labelled`
        (one boolean per step) and optionally `validation`; the labelled steps share no image with the others
        nor with `validation` (`check`, left to the caller where `checked` is False)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise BenchError(f"a split manifest is a JSON object with version, steps and labelled; got a "
                             f"{type(data).__name__}")
        if data.get("version") != MANIFEST_VERSION:
            raise BenchError(f"split manifest version {data.get('version')!r}: this bench reads version "
                             f"{MANIFEST_VERSION}")
        steps, labelled = data.get("stages"), data.get("labelled")
        if not isinstance(steps, list) or not isinstance(labelled, list) or len(steps) != len(labelled)\
                or not all(isinstance(flag, bool) for flag in labelled):
            raise BenchError("a split manifest's `steps` is a list of lists of image indices and its `labelled` a "
                             "list of as many true/false, one per step")
        domains = data.get("domains", [])
        if not isinstance(domains, list) or (domains and len(domains) != len(steps)) \
                or not all(isinstance(d, str) for d in domains):
            raise BenchError("a split manifest's `domains`, where it has one, names the domain of each step: a list "
                             "of as many names as steps")
        manifest = cls(tuple(_indices(rows, f"step {t}") for t, rows in enumerate(steps)), tuple(labelled),
                       _indices(data.get("validation", []), "validation"), tuple(domains))
        if checked:
            manifest.check()
        return manifest

    def check(self) -> None:
        """Every step holds images, each at most once; a labelled step's images are in no other step and none
        is held out for validation; the held-out images are in no step (a `BenchError` otherwise)."""
        for t, rows in enumerate(self.steps):
            if not len(rows):
                raise BenchError(f"split manifest: step {t} holds no image")
            values, counts = np.unique(rows, return_counts=True)
            if (counts > 1).any():
                raise BenchError(f"split manifest: step {t} lists training image {int(values[counts > 1][0])} "
                                 f"{int(counts.max())} times; an image is at most once in a step")
        for t, rows in enumerate(self.steps):
            if not self.labelled[t]:
                continue
            for other, their in enumerate(self.steps):
                shared = np.intersect1d(rows, their) if other != t else np.empty(0)
                if len(shared):
                    raise BenchError(f"split manifest: training image {int(shared[0])} is in the labelled step {t} "
                                     f"and in step {other}; a labelled image is in no other step")
        for t, rows in enumerate(self.steps):
            shared = np.intersect1d(rows, self.validation)
            if len(shared):
                raise BenchError(f"split manifest: training image {int(shared[0])} is held out for validation and "
                                 f"in step {t}")


def _indices(values: object, where: str) -> np.ndarray:
    """Training-image indices from JSON: a list of integers in 0..2^63-1 (a float, a boolean or a string is refused,
    never truncated)."""
    if not isinstance(values, list):
        raise BenchError(f"split manifest: {where} is {type(values).__name__}, not a list of image indices")
    bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 63), None)
    if bad is not None:
        raise BenchError(f"split manifest: {where} lists {bad!r}; an image index is an integer >= 0")
    return np.asarray(values, dtype=np.int64)


def hold_out(manifest: Manifest, train_labels: np.ndarray, fraction: float, seed: int) -> Manifest:
    """`manifest` with `fraction` of each labelled class's step-0 images moved to its `validation`
    (at least one image of a class with two or more, never all of them), drawn with `seed`; the other
    steps are left as they are."""
    labels = np.asarray(train_labels, dtype=np.int64)
    rng = np.random.default_rng([seed, 1])  # a stream of its own: the steps' draw is unchanged
    first = manifest.steps[0]
    held = []
    for c in np.unique(labels[first]):
        images = first[labels[first] == c]
        n = min(len(images) - 1, max(1, int(round(fraction * len(images)))))
        held.append(rng.choice(images, size=n, replace=False) if n > 0 else np.empty(0, dtype=np.int64))
    validation = np.sort(np.concatenate(held)) if held else np.empty(0, dtype=np.int64)
    steps = (np.setdiff1d(first, validation), *manifest.steps[1:])
    return Manifest(steps, manifest.labelled, validation, manifest.domains)


@dataclass(frozen=True)
class StageDomains:
    """Where a domain-shifted stream's stages draw from (`bench.splits.domains`, `bench.data.domains.shifted`): the
    domain of each stage (`stages`, the labelled one first), of each training image (`images`), and the picture
    each training image shows (`sources`: the same picture in two domains has one source)."""

    stages: tuple[int, ...]
    images: np.ndarray
    sources: np.ndarray


def draw(protocol: MixedProtocol, train_labels: np.ndarray, seed: int, domains: StageDomains | None = None) -> Manifest:
    """The images of every step, drawn with `seed`: the labelled step takes its fraction of each
    labelled class; an unlabelled step draws, without replacement within the step, its count of a
    labelled class from that class's images the labelled step left, and of any other class from all of
    its images (each step draws afresh, so two steps may share images, as in Happy's code; with
    `protocol.disjoint`, from what earlier steps left, as in PromptCCD's). With `domains`, each step draws
    from its domain's images only, and "left" is by picture: no step holds a labelled picture in any domain. A
    stream whose domains hold the same pictures in the same order (corruptions) draws the same pictures as the
    dataset without the shift, each step's in its own domain."""
    labels = np.asarray(train_labels, dtype=np.int64)
    rng = np.random.default_rng(seed)
    n_steps = len(protocol.steps) + 1
    stages = domains.stages if domains is not None else (0,) * n_steps
    image_domain = domains.images if domains is not None else np.zeros(len(labels), dtype=np.int64)
    sources = domains.sources if domains is not None else np.arange(len(labels))
    if len(stages) != n_steps:
        raise BenchError(f"the stream names {len(stages)} stage domains for a protocol of {n_steps} stages")
    by_class = {(int(c), int(k)): np.flatnonzero((labels == c) & (image_domain == k))
                for k in np.unique(image_domain) for c in np.unique(labels)}
    by_class = {key: value for key, value in by_class.items() if len(value)}
    taken: dict[int, np.ndarray] = {}  # per class, the pictures no later step may hold
    labelled = []
    for c in protocol.labelled_classes:
        images = rng.permutation(_images_of(by_class, c, stages[0]))
        cut = _labelled_size(protocol, c, len(images))
        if cut > len(images):
            raise BenchError(f"the labelled step asks for {cut} images of class {c}; the dataset has {len(images)}")
        labelled.append(np.sort(images[:cut]))
        taken[c] = sources[images[:cut]]
    steps = [np.concatenate(labelled) if labelled else np.empty(0, dtype=np.int64)]
    for s, counts in enumerate(protocol.steps, start=1):
        picked = []
        for c, n in sorted(counts.items()):
            pool = _images_of(by_class, c, stages[s])
            if c in taken:
                pool = pool[~np.isin(sources[pool], taken[c])]
            if n > len(pool):
                raise BenchError(f"step {s} asks for {n} images of class {c}; the dataset has {len(pool)} to draw from"
                                 + (" in the step's domain" if domains is not None else ""))
            chosen = np.sort(rng.choice(pool, size=n, replace=False))
            if protocol.disjoint:
                taken[c] = np.concatenate([taken.get(c, np.empty(0, dtype=np.int64)), sources[chosen]])
            picked.append(chosen)
        steps.append(np.concatenate(picked) if picked else np.empty(0, dtype=np.int64))
    return Manifest(tuple(steps), (True,) + (False,) * len(protocol.steps))


def _labelled_size(protocol: MixedProtocol, c: int, n: int) -> int:
    if protocol.labelled_counts is not None:
        return int(protocol.labelled_counts[c])
    return int(round(protocol.labelled_fraction * n))


def _images_of(by_class: Mapping[tuple[int, int], np.ndarray], c: int, domain: int) -> np.ndarray:
    if (c, domain) not in by_class:
        classes = sorted({k for k, _ in by_class})
        where = f" in stage domain {domain}" if any(d for _, d in by_class) else ""
        raise BenchError(f"class {c} has no training image{where}; the dataset's classes are "
                         f"{classes[0]}..{classes[-1]}")
    return by_class[(c, domain)]


# -- Happy's split file (`logs/<dataset>_continual_dataset_dict.txt` in its repository) --

def read_happy(path: str | Path, num_classes: int, labelled_fraction: float = 0.8) -> MixedProtocol:
    """The protocol of a Happy split file: its per-step counts (`online_dataset_split_dict`), the order
    in which the new classes arrive (`novel_targets_shuffle`) and how many arrive per step. The labelled
    classes are the dataset's other classes. The file does not record Happy's labelled fraction
    (`--prop_train_labels`, 0.8 by default in its code): give it."""
    text = read_text(path, "a Happy split file (logs/<dataset>_continual_dataset_dict.txt)")
    sections = _sections(text, path)
    try:
        counts = ast.literal_eval(sections["online_dataset_split_dict"])  # a literal only: never code
        order = [int(c) for c in re.findall(r"-?\d+", sections["novel_targets_shuffle"])]
        per_step = int(sections["num_novel_class_per_session"])
        n_steps = int(counts["continual_session_num"])
        unseen, old, seen = (int(counts[k]) for k in ("online_novel_unseen_num", "online_old_seen_num",
                                                      "online_novel_seen_num"))
    except (KeyError, ValueError, SyntaxError, TypeError) as err:
        raise BenchError(f"{path}: not a Happy split file ({type(err).__name__}: {err})") from None
    if n_steps < 1 or per_step < 1 or min(unseen, old, seen) < 1:
        raise BenchError(f"{path}: {n_steps} sessions of {per_step} new classes, {unseen}/{old}/{seen} images per "
                         f"class (new/old/seen): each must be at least 1")
    if per_step * n_steps != len(order) or len(set(order)) != len(order):
        raise BenchError(f"{path}: {len(order)} new classes do not make {n_steps} steps of {per_step}")
    outside = [c for c in order if not 0 <= c < num_classes]
    if outside:
        raise BenchError(f"{path}: new class {outside[0]} is not a class of the dataset (0..{num_classes - 1})")
    labelled = tuple(c for c in range(num_classes) if c not in set(order))
    steps = []
    for s in range(n_steps):
        step = {c: old for c in labelled}
        step.update({c: seen for c in order[:s * per_step]})
        step.update({c: unseen for c in order[s * per_step:(s + 1) * per_step]})
        steps.append(step)
    return MixedProtocol(labelled, labelled_fraction, tuple(steps))


def read_text(path: str | Path, what: str) -> str:
    """A peer's text file, or a `BenchError` naming it and what it should be."""
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise BenchError(f"{path}: cannot read {what} ({type(err).__name__}: {err})") from None


def _sections(text: str, path: str | Path) -> dict[str, str]:
    """`name: \\n value` blocks, as Happy's logger writes them."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        head = re.fullmatch(r"([a-z_]+):\s*", line)
        if head:
            current = head.group(1)
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    if not sections:
        raise BenchError(f"{path}: not a Happy split file (no `name:` sections)")
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def protocol_counts(protocol: MixedProtocol) -> list[dict[int, int]]:
    """The unlabelled steps' images per class, as the protocol asks (for comparing with a manifest)."""
    return [dict(step) for step in protocol.steps]


def labelled_count(protocol: MixedProtocol, train_labels: Sequence[int]) -> dict[int, int]:
    """Images per labelled class in the labelled step, for `train_labels`."""
    labels = np.asarray(train_labels)
    return {c: _labelled_size(protocol, c, int((labels == c).sum())) for c in protocol.labelled_classes}


def read_manifest_file(path: str | Path, steps: int) -> tuple[Manifest, str]:
    """A split manifest a user gives (`setting.manifest_file`: a run's `split.json`, or one written from
    another codebase's files) and its sha256, or a `BenchError` saying what is wrong with it. `steps`:
    the unlabelled steps the run's split has."""
    import hashlib

    path = Path(path).expanduser()
    try:
        raw = path.read_bytes()
        manifest = Manifest.from_json(raw.decode("utf-8"), checked=False)
    except BenchError as err:
        raise BenchError(f"setting.manifest_file {path}: {err}") from None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise BenchError(f"setting.manifest_file {path}: not a readable split manifest ({type(err).__name__}: "
                         f"{err}); give a run's split.json or one in its format (bench.splits.manifests.Manifest)") from None
    if len(manifest.steps) != steps + 1 or manifest.labelled != (True,) + (False,) * steps:
        raise BenchError(f"setting.manifest_file {path}: {len(manifest.steps)} steps labelled {list(manifest.labelled)}; "
                         f"the split has a labelled step then {steps} unlabelled ones")
    try:  # after the flags: with every step marked labelled, the first image shared is a symptom, not the cause
        manifest.check()
    except BenchError as err:
        raise BenchError(f"setting.manifest_file {path}: {err}") from None
    return manifest, hashlib.sha256(raw).hexdigest()


def class_order_of(manifest: Manifest, train_labels: np.ndarray, num_classes: int, source: str) -> np.ndarray:
    """The class order a manifest's steps make (the labelled step's classes, then each step's new ones,
    each group sorted; classes in no step last, left out), or a `BenchError` for a manifest that does not
    fit the dataset."""
    labels = np.asarray(train_labels, dtype=np.int64)
    for t, rows in enumerate((*manifest.steps, manifest.validation)):
        outside = rows[(rows < 0) | (rows >= len(labels))]
        if len(outside):
            where = f"step {t}" if t < len(manifest.steps) else "its validation"
            raise BenchError(f"{source}: {where} names training image {int(outside[0])}; the dataset has "
                             f"{len(labels)} (0..{len(labels) - 1})")
        if t < len(manifest.steps) and len(rows) == 0:
            raise BenchError(f"{source}: step {t} holds no image")
    order: list[int] = []
    for t, rows in enumerate(manifest.steps):
        new = sorted(set(np.unique(labels[rows]).tolist()) - set(order))
        if t > 0 and not new:
            raise BenchError(f"{source}: step {t} brings no new class; every unlabelled step must")
        order += new
    return np.asarray(order + sorted(set(range(num_classes)) - set(order)), dtype=np.int64)


def protocol_of(manifest: Manifest, train_labels: np.ndarray) -> MixedProtocol:
    """The counts a manifest holds, as a protocol (its classes as `train_labels` number them)."""
    counts = manifest.counts(train_labels)
    first = counts[0]
    return MixedProtocol(tuple(sorted(first)), float("nan"), tuple(counts[1:]),
                         labelled_counts=dict(first))

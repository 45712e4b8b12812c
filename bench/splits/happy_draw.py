"""Happy's own images (`setting.draw=happy`): the draw Happy-CGCD's data code makes, replayed, so that a run of its
protocol holds the very training images Happy's runs hold, not merely as many.

Happy's `data/cifar.py` (and `tiny_imagenet.py`, `imagenet.py`, `cub.py`, the same code) draws with numpy's global
legacy generator, in this order; each class's images are in the order of the training set (CIFAR's files, the
sorted image files of TinyImageNet and of ImageNet's folders, CUB's images.txt, which bench's readers keep):

1. each labelled class (in its order: CUB's SSB known classes in their file's order): the generator seeded 0 (`data_utils.subsample_instances` seeds it at every
   call), then `choice(n, int(0.8·n), replace=False)`: the labelled images' positions in the class, the same for
   every class of n images; the class's other images, in the order `list(set(range(n)) - set(labelled))` gives
   them, are its pool for the later sessions;
2. every session, every labelled class: `choice(len(pool), old_seen, replace=False)` of its pool (drawn afresh:
   sessions may share images);
3. with `--shuffle_classes` (its runs' order, bench's `setting.arrival=happy`): the generator seeded 0 again, then
   the sorted new classes shuffled (`happy_arrival_order`);
4. every session, every new class arrived so far in arrival order: `choice(n, novel_seen, replace=False)` for one
   that arrived earlier, `choice(n, novel_unseen, ...)` for an arriving one (every image where it has fewer: its
   ImageNet code).

numpy's legacy generator (`RandomState`) is frozen across numpy versions, so the draws are the same wherever this
runs. Only datasets whose training set bench orders as Happy's code does may use it (`HAPPY_ORDERED`).
"""
from __future__ import annotations

import numpy as np

from bench.splits.manifests import Manifest, MixedProtocol
from bench.errors import BenchError

# the datasets whose training images bench's readers give in the order Happy's readers do (CUB's: its whole
# training set, `setting.whole_train`, which bench puts back in the official order)
HAPPY_ORDERED = ("cifar10", "cifar100", "tinyimagenet", "imagenet100", "cub200")


def happy_draw(protocol: MixedProtocol, train_labels: np.ndarray, shuffled: bool) -> Manifest:
    """The manifest of Happy's draw (module docstring) for `protocol` (Happy's rule: the labelled classes and the new
    classes in arrival order, the counts per session) over training images of classes `train_labels` in the
    dataset's order; `shuffled`: its classes arrive in Happy's shuffled order (`--shuffle_classes`), so the
    generator is seeded again before the new classes' draws."""
    if protocol.disjoint or protocol.labelled_counts is not None:
        raise BenchError("setting.draw=happy replays Happy's draw: it takes Happy's protocol (happy-*-stage), not "
                         "PromptCCD's")
    labels = np.asarray(train_labels, dtype=np.int64)
    of_class = {int(c): np.flatnonzero(labels == c) for c in np.unique(labels)}
    rs = np.random.RandomState(0)
    labelled, pool = [], {}
    for c in protocol.labelled_classes:
        images = of_class[c]
        rs.seed(0)
        chosen = rs.choice(len(images), size=int(protocol.labelled_fraction * len(images)), replace=False)
        labelled.append(images[chosen])
        pool[c] = images[np.array(list(set(range(len(images))) - set(chosen.tolist())), dtype=np.int64)]
    steps: list[list[np.ndarray]] = [[] for _ in protocol.steps]
    for s, counts in enumerate(protocol.steps):
        for c in protocol.labelled_classes:
            steps[s].append(pool[c][rs.choice(len(pool[c]), size=_fits(counts[c], len(pool[c]), c), replace=False)])
    if shuffled:  # Happy shuffles its new classes (every class not labelled): its draws continue from there
        rs.seed(0)
        rs.shuffle(np.array(sorted(set(of_class) - set(protocol.labelled_classes))))
    for s, counts in enumerate(protocol.steps):
        for c in sorted(set(counts) - set(protocol.labelled_classes)):  # arrival order: bench numbers them so
            images = of_class[c]
            steps[s].append(images[rs.choice(len(images), size=min(counts[c], len(images)), replace=False)])
    return Manifest((np.concatenate(labelled), *(np.concatenate(parts) for parts in steps)),
                    (True,) + (False,) * len(protocol.steps))


def _fits(count: int, available: int, c: int) -> int:
    if count > available:
        raise BenchError(f"Happy's draw asks for {count} images of labelled class {c}; its unlabelled pool holds "
                         f"{available}")
    return count

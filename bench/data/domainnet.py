"""DomainNet (Peng et al., ICCV'19, "Moment Matching for Multi-Source Domain Adaptation"): 345 classes seen through
six domains, from its official layout and lists (ai.bu.edu/M3SDA): one folder per domain, `<domain>/<class>/<file>`,
and per domain `<domain>_train.txt` and `<domain>_test.txt`, one `<domain>/<class>/<file> <label>` a line (label
0..344), at the dataset's top or in `splits/` (loaders differ: Dassl.pytorch reads `splits/`). Images decoded on
demand by parallel threads.

`dataset.domains` names the domains a run reads, comma-separated (`sketch`, `real,painting`; default `all`, the six
in the page's order); their lists are concatenated in that order, and `extra["domain"]` gives each training and test image's domain (its index in
`domains`), which a domain-shifted stream reads. Classes: the lists' labels; a class's name is its folder's, the same
in every domain (else the lists are refused)."""
from __future__ import annotations

from pathlib import Path
import numpy as np

from bench.data.base import DatasetError, ImageSet, LoadedDataset
from bench.data.files import locate, read_lines
from bench.data.tinyimagenet import IMAGENET_MEAN, IMAGENET_STD
from bench.errors import unknown
from bench.registries import DATASETS

DOMAINS = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")  # the official page's order
CLASSES = 345
LAYOUT = ("domainnet/{<domain>/<class>/<image>.jpg, <domain>_train.txt and <domain>_test.txt (or in splits/), "
          "one `<domain>/<class>/<image>.jpg <label>` per line}, domains " + ", ".join(DOMAINS))


def _list_file(path: Path, domain: str, split: str) -> Path:
    for candidate in (path / f"{domain}_{split}.txt", path / "splits" / f"{domain}_{split}.txt"):
        if candidate.is_file():
            return candidate
    raise DatasetError(f"domainnet: no {domain}_{split}.txt at {path} nor in {path / 'splits'}. Expected layout: "
                       f"{LAYOUT}")


def _read(path: Path, list_file: Path, domain: str, names: dict[int, str]) -> tuple[list[Path], list[int]]:
    """The images and labels of one list, checking each line's form, label range, domain and class folder (one
    name per label across every list read: `names` collects them)."""
    files, labels = [], []
    for line in read_lines(list_file):
        image, _, label_text = line.rpartition(" ")
        parts = image.split("/")
        if not image or not label_text.isdigit() or len(parts) != 3:
            raise DatasetError(f"bad line in {list_file}: {line!r} (expected `<domain>/<class>/<image> <label>`)")
        label = int(label_text)
        if label >= CLASSES:
            raise DatasetError(f"{list_file}: label {label} of {image}; DomainNet's labels are 0..{CLASSES - 1}")
        if parts[0] != domain:
            raise DatasetError(f"{list_file} lists {image}, of another domain than {domain}")
        if names.setdefault(label, parts[1]) != parts[1]:
            raise DatasetError(f"{list_file}: label {label} is class {parts[1]!r} there and {names[label]!r} "
                               f"elsewhere")
        files.append(path / image)
        labels.append(label)
    return files, labels


@DATASETS.register_module(name="domainnet")
class DomainNet:
    """DomainNet, 345 classes over six domains: `domainnet/` with a folder and two lists per domain."""

    num_classes = CLASSES

    def __init__(self, root: str | None = None, domains: str = "all") -> None:
        chosen = list(DOMAINS) if domains == "all" else [d.strip() for d in str(domains).split(",")]
        for domain in chosen:
            if domain not in DOMAINS:
                raise unknown("domainnet domain", domain, DOMAINS)
        if not chosen or len(set(chosen)) != len(chosen):
            raise DatasetError(f"dataset.domains={domains!r}: name each domain once, from {', '.join(DOMAINS)}")
        self.root, self.domains = root, tuple(chosen)

    def check(self) -> Path:
        """Where the files are, or a `DatasetError` saying what is missing (reads no list)."""
        return locate("domainnet", self.root, "domainnet", list(self.domains), LAYOUT)

    def load(self) -> LoadedDataset:
        path = self.check()
        names: dict[int, str] = {}
        sets, domain_of = [], []
        for split in ("train", "test"):
            files: list[Path] = []
            labels: list[int] = []
            which: list[int] = []
            for d, domain in enumerate(self.domains):
                more, more_labels = _read(path, _list_file(path, domain, split), domain, names)
                files += more
                labels += more_labels
                which += [d] * len(more)
            missing = [str(f) for f in files if not f.is_file()]
            if missing:
                raise DatasetError(f"domainnet: {len(missing)} listed {split} images are missing, e.g. {missing[0]}")
            sets.append(ImageSet(files, np.asarray(labels, dtype=np.int64)))
            domain_of.append(np.asarray(which, dtype=np.int8))
        empty = sorted(set(range(CLASSES)) - set(sets[0].labels.tolist()))
        if empty:
            raise DatasetError(f"domainnet: no training image of class {empty[0]} (of {len(empty)} classes without "
                               f"one) in the {', '.join(self.domains)} lists")
        return LoadedDataset(name="domainnet", class_names=[names.get(c, f"class {c}") for c in range(CLASSES)],
                             train=sets[0], test=sets[1], mean=IMAGENET_MEAN, std=IMAGENET_STD,
                             augmentation="finegrained", root=str(path),
                             extra={"domains": list(self.domains), "domain": {"train": domain_of[0],
                                                                              "test": domain_of[1]}})

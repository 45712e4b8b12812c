"""Tiny datasets written in the five real on-disk formats (generated here, never downloaded)."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
from PIL import Image

RNG = np.random.default_rng(0)


def _image(label: int, h: int, w: int) -> np.ndarray:
    base = np.zeros((h, w, 3), np.uint8)
    base[..., label % 3] = 40 + (label * 37) % 200  # a class-dependent colour, plus noise
    return np.clip(base + RNG.integers(0, 30, (h, w, 3)), 0, 255).astype(np.uint8)


def _jpeg(path: Path, label: int, h: int = 64, w: int = 64, mode: str = "RGB") -> None:
    """An image file of the class colour; `mode` "L" writes a grayscale file, as the real datasets
    hold a few (TinyImageNet, CUB), and a .png name writes a PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_image(label, h, w)).convert(mode).save(path, **({} if path.suffix == ".png" else {"quality": 90}))


def _pickle(path: Path, obj: dict) -> None:
    with path.open("wb") as fh:
        pickle.dump(obj, fh)


def write_cifar10(root: Path, per_class_train: int = 4, per_class_test: int = 2) -> Path:
    out = root / "cifar-10-batches-py"
    out.mkdir(parents=True)
    labels = np.repeat(np.arange(10), per_class_train)
    RNG.shuffle(labels)
    for i, chunk in enumerate(np.array_split(labels, 5), start=1):
        data = np.stack([_image(int(y), 32, 32).transpose(2, 0, 1).reshape(-1) for y in chunk])
        _pickle(out / f"data_batch_{i}", {"data": data, "labels": chunk.tolist()})
    test = np.repeat(np.arange(10), per_class_test)
    _pickle(out / "test_batch", {"data": np.stack([_image(int(y), 32, 32).transpose(2, 0, 1).reshape(-1) for y in test]),
                                 "labels": test.tolist()})
    _pickle(out / "batches.meta", {"label_names": [f"c{i}" for i in range(10)]})
    return out


def write_cifar100(root: Path, per_class_train: int = 2, per_class_test: int = 1) -> Path:
    out = root / "cifar-100-python"
    out.mkdir(parents=True)
    for name, per in (("train", per_class_train), ("test", per_class_test)):
        y = np.repeat(np.arange(100), per)
        data = np.stack([_image(int(c), 32, 32).transpose(2, 0, 1).reshape(-1) for c in y])
        _pickle(out / name, {"data": data, "fine_labels": y.tolist(), "coarse_labels": (y // 5).tolist()})
    _pickle(out / "meta", {"fine_label_names": [f"f{i}" for i in range(100)]})
    return out


def write_tinyimagenet(root: Path, per_class_train: int = 2, per_class_val: int = 1) -> tuple[Path, list[str]]:
    out = root / "tiny-imagenet-200"
    wnids = [f"n{RNG.integers(10**7, 10**8)}" for _ in range(200)]
    (out / "val" / "images").mkdir(parents=True)
    (out / "wnids.txt").write_text("\n".join(wnids) + "\n")  # unsorted, as in the zip
    lines = []
    for wnid in wnids:
        label = sorted(wnids).index(wnid)
        for j in range(per_class_train):
            _jpeg(out / "train" / wnid / "images" / f"{wnid}_{j}.JPEG", label, mode="L" if label == 3 and j == 0 else "RGB")
        (out / "train" / wnid / f"{wnid}_boxes.txt").write_text(f"{wnid}_0.JPEG\t0\t0\t63\t63\n")
        for _ in range(per_class_val):
            name = f"val_{len(lines)}.JPEG"
            _jpeg(out / "val" / "images" / name, label)
            lines.append(f"{name}\t{wnid}\t0\t0\t63\t63")
    (out / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return out, wnids


def write_cub(root: Path, per_class_train: int = 5, per_class_test: int = 1) -> Path:
    out = root / "CUB_200_2011"
    images, labels, split, classes = [], [], [], []
    image_id = 0
    for c in range(1, 201):
        folder = f"{c:03d}.Bird_{c}"
        classes.append(f"{c} {folder}")
        for j in range(per_class_train + per_class_test):
            image_id += 1
            rel = f"{folder}/Bird_{c}_{j}.jpg"
            _jpeg(out / "images" / rel, c - 1, h=30, w=40, mode="L" if (c, j) == (2, 1) else "RGB")  # not square
            images.append(f"{image_id} {rel}")
            labels.append(f"{image_id} {c}")
            split.append(f"{image_id} {1 if j < per_class_train else 0}")
    for name, lines in (("images.txt", images), ("image_class_labels.txt", labels),
                        ("train_test_split.txt", split), ("classes.txt", classes)):
        (out / name).write_text("\n".join(lines) + "\n")
    return out


def write_herbarium(root: Path, categories: list[str], per_class_train: int = 7, per_class_test: int = 2) -> Path:
    out = root / "herbarium_19"
    for label, cat in enumerate(sorted(categories)):
        for j in range(per_class_train):
            # ImageFolder also takes PNGs and images in sub-folders of a category
            name = {0: f"{cat}_{j}.png", 1: f"sub/{cat}_{j}.jpg"}.get(j, f"{cat}_{j}.jpg") if label == 0 else f"{cat}_{j}.jpg"
            _jpeg(out / "small-train" / cat / name, label, h=48, w=32)
        for j in range(per_class_test):
            _jpeg(out / "small-validation" / cat / f"{cat}_v{j}.jpg", label, h=48, w=32)
    return out


def write_imagenet(root: Path, with_images: list[int], per_class_train: int = 2, per_class_val: int = 1) -> tuple[Path, list[str]]:
    """ImageNet-1k's folder layout (train/<wnid>/, val/<wnid>/, 1000 wnid folders each), images in the classes at
    the (sorted-wnid) indices `with_images` only; the wnids, sorted."""
    out = root / "imagenet"
    wnids = [f"n{7 * i + 1000:08d}" for i in range(1000)]
    for wnid in wnids:
        (out / "train" / wnid).mkdir(parents=True)
        (out / "val" / wnid).mkdir(parents=True)
    for label, i in enumerate(with_images):
        for j in range(per_class_train):
            _jpeg(out / "train" / wnids[i] / f"{wnids[i]}_{j}.JPEG", label, h=40, w=48)
        for j in range(per_class_val):
            _jpeg(out / "val" / wnids[i] / f"ILSVRC2012_val_{i:05d}{j}.JPEG", label, h=40, w=48)
    return out, wnids


AIRCRAFT_VARIANTS = [f"{maker}-{i}" for maker in ("A3", "Boeing 7", "F-16A/B ", "Cessna") for i in range(25)]


def write_aircraft(root: Path, per_class_train: int = 2, per_class_test: int = 1) -> Path:
    """fgvc-aircraft-2013b/data: images/<id>.jpg and the variant lists (trainval/test, and train/val: the trainval
    images split in two), `<id> <variant name>` per line, names with spaces and slashes as the real ones."""
    out = root / "fgvc-aircraft-2013b" / "data"
    lists: dict[str, list[str]] = {"trainval": [], "test": [], "train": [], "val": []}
    order = sorted(AIRCRAFT_VARIANTS)
    for variant in AIRCRAFT_VARIANTS:  # written in another order than the sorted one bench numbers them in
        label = order.index(variant)
        for j in range(per_class_train + per_class_test):
            image_id = f"{1000000 + 10 * label + j:07d}"
            _jpeg(out / "images" / f"{image_id}.jpg", label, h=30, w=40)
            split = "trainval" if j < per_class_train else "test"
            lists[split].append(f"{image_id} {variant}")
            if split == "trainval":
                lists["train" if j % 2 == 0 else "val"].append(f"{image_id} {variant}")
    for split, lines in lists.items():
        (out / f"images_variant_{split}.txt").write_text("\n".join(lines) + "\n")
    return out


def write_cars(root: Path, per_class_train: int = 1, per_class_test: int = 1, classes: int = 196) -> Path:
    """stanford_cars: cars_train/, cars_test/ and the devkit's MATLAB annotation files (fname and class 1..196)."""
    from scipy.io import savemat

    out = root / "stanford_cars"
    fields = [("bbox_x1", "O"), ("bbox_y1", "O"), ("bbox_x2", "O"), ("bbox_y2", "O"), ("class", "O"), ("fname", "O")]
    for split, name, per_class in (("cars_train", "cars_train_annos.mat", per_class_train),
                                   ("cars_test", "cars_test_annos_withlabels.mat", per_class_test)):
        records = np.zeros((1, classes * per_class), dtype=fields)
        for k in range(classes * per_class):
            label = (k * 5) % classes  # not in class order (5 and 196 are coprime: every class)
            fname = f"{k + 1:05d}.jpg"
            _jpeg(out / split / fname, label, h=30, w=40)
            records[0, k] = (np.array([[1]]), np.array([[1]]), np.array([[30]]), np.array([[20]]),
                             np.array([[label + 1]], dtype=np.uint8), np.array([fname]))
        (out / "devkit").mkdir(parents=True, exist_ok=True)
        savemat(str(out / "devkit" / name), {"annotations": records})
    return out


def write_domainnet(root: Path, domains: tuple[str, ...] = ("clipart", "sketch"), per_class_train: int = 1,
                    per_class_test: int = 1, lists_in_splits: bool = False) -> Path:
    """domainnet/<domain>/<class>/<domain>_<label+1>_<n>.jpg for 345 classes, and per domain its train and test lists
    (`<domain>/<class>/<image> <label>`, classes listed out of order as the real lists), at the top or in splits/."""
    out = root / "domainnet"
    lists = out / "splits" if lists_in_splits else out
    lists.mkdir(parents=True, exist_ok=True)
    for domain in domains:
        lines: dict[str, list[str]] = {"train": [], "test": []}
        for k in range(345):
            label = (k * 7) % 345  # 7 and 345 are coprime: every class, not in order
            name = f"class_{label:03d}"
            for j in range(per_class_train + per_class_test):
                image = f"{domain}/{name}/{domain}_{label + 1:03d}_{j:06d}.jpg"
                _jpeg(out / image, label, h=12, w=12)
                lines["train" if j < per_class_train else "test"].append(f"{image} {label}")
        for split, text in lines.items():
            (lists / f"{domain}_{split}.txt").write_text("\n".join(text) + "\n")
    return out

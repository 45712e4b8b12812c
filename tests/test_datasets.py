"""The five real datasets read from fixtures in their on-disk formats: class order, splits, counts,
persisted partitions, every error path, and a run end to end on each."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.data import DatasetError, build_dataset
from bench.errors import BenchError
from bench.data.partitions import draw_partition, val_count
from bench.data.summary import format_thousands, task_counts
from tests import fixtures_datasets as fx

HERB_CATS = ["2", "10", "100", "7", "35", "301", "1", "20", "9", "88"]  # numeric ids sort as strings


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    fx.write_cifar10(root)
    fx.write_cifar100(root)
    _, wnids = fx.write_tinyimagenet(root)
    fx.write_cub(root)
    fx.write_herbarium(root, HERB_CATS)
    from bench.data.imagenet import subset_classes

    fx.write_imagenet(root, subset_classes().tolist())
    fx.write_aircraft(root)
    fx.write_cars(root)
    fx.write_domainnet(root)
    return root, wnids


def test_cifar10(roots):
    data = build_dataset("cifar10", {}, str(roots[0]))
    assert data.num_classes == 10 and data.class_names[3] == "c3"
    assert data.train.images.shape == (40, 32, 32, 3) and data.train.images.dtype == np.uint8
    assert np.bincount(data.train.labels).tolist() == [4] * 10 and len(data.test) == 20
    assert data.val is None and data.augmentation == "cifar"
    assert data.mean == (0.4914, 0.4822, 0.4465)


def test_cifar100_uses_fine_labels(roots):
    data = build_dataset("cifar100", {}, str(roots[0]))
    assert data.num_classes == 100 and np.bincount(data.train.labels).tolist() == [2] * 100
    assert data.class_names[:2] == ["f0", "f1"]


def test_tinyimagenet_classes_are_sorted_wnids_and_val_annotations_are_read_as_is(roots):
    data = build_dataset("tinyimagenet", {}, str(roots[0]))
    assert data.class_names == sorted(roots[1])
    assert data.train.images.shape == (400, 64, 64, 3)
    assert np.bincount(data.test.labels).tolist() == [1] * 200
    assert data.train.images.dtype == np.uint8 and data.train.images.shape[-1] == 3  # grayscale files too
    # the fixture colours images by class: the val image of class k looks like its train images
    k = 17
    assert abs(data.test.images[data.test.labels == k].mean() - data.train.images[data.train.labels == k].mean()) < 10


def test_cub_classes_partition_and_persistence(roots, tmp_path):
    data = build_dataset("cub200", {}, str(roots[0]), partitions_dir=str(tmp_path))
    assert data.class_names[0] == "001.Bird_1" and data.num_classes == 200
    assert np.bincount(data.train.labels).tolist() == [4] * 200  # 5 official train images, int(0.2·5)=1 val
    assert np.bincount(data.val.labels).tolist() == [1] * 200
    assert len(data.test) == 200 and not data.train.in_memory
    (saved,) = tmp_path.glob("cub200-*.json")
    val_files = json.loads(saved.read_text())["val"]
    assert len(val_files) == 200
    again = build_dataset("cub200", {}, str(roots[0]), partitions_dir=str(tmp_path))
    assert [str(p) for p in again.val.images] == [str(p) for p in data.val.images]  # read back, not redrawn
    batch = data.train.load(np.arange(3))
    assert batch.shape == (3, 256, 256, 3)  # decoded: shorter side 256, centre crop
    assert data.train.load(np.flatnonzero(data.train.labels == 1)).shape[-1] == 3  # a grayscale file
    # the val images are official training images, never test images, and train ∩ val = ∅
    assert not {str(p) for p in data.val.images} & {str(p) for p in data.train.images}
    assert all(p.name.endswith(("_0.jpg", "_1.jpg", "_2.jpg", "_3.jpg", "_4.jpg")) for p in data.val.images)


def test_herbarium_order_is_lexicographic_and_val_is_5_per_class(roots, tmp_path):
    data = build_dataset("herbarium19", {"num_classes": 10}, str(roots[0]), partitions_dir=str(tmp_path))
    assert data.class_names == sorted(HERB_CATS) == ["1", "10", "100", "2", "20", "301", "35", "7", "88", "9"]
    assert np.bincount(data.val.labels).tolist() == [5] * 10
    assert np.bincount(data.train.labels).tolist() == [2] * 10
    assert np.bincount(data.test.labels).tolist() == [2] * 10
    # ImageFolder's listing: PNGs and images in sub-folders of a category count
    first = [p.relative_to(roots[0] / "herbarium_19") for p in [*data.train.images, *data.val.images]
             if p.parent.name == "1" or p.parent.parent.name == "1"]
    assert {str(p) for p in first} >= {"small-train/1/1_0.png", "small-train/1/sub/1_1.jpg"}
    assert data.train.load(np.arange(2)).shape == (2, 256, 256, 3)


def test_a_partition_is_drawn_once_and_shared_by_every_later_reader(roots, tmp_path):
    first = build_dataset("herbarium19", {"num_classes": 10}, str(roots[0]), partitions_dir=str(tmp_path))
    (saved,) = tmp_path.glob("herbarium19-*.json")
    record = json.loads(saved.read_text())
    assert record["val_images"] == 50 and record["train_images"] == 20 and record["seed"] == 0
    # what is stored is what is used, even if the drawing rule's RNG changed since
    record["val"] = sorted(record["val"])[::-1]
    saved.write_text(json.dumps(record))
    again = build_dataset("herbarium19", {"num_classes": 10}, str(roots[0]), partitions_dir=str(tmp_path))
    assert sorted(map(str, again.val.images)) == sorted(map(str, first.val.images))
    # another seed is another partition, in another file
    other = build_dataset("herbarium19", {"num_classes": 10, "partition_seed": 1}, str(roots[0]),
                          partitions_dir=str(tmp_path))
    assert len(list(tmp_path.glob("herbarium19-*.json"))) == 2
    assert sorted(map(str, other.val.images)) != sorted(map(str, first.val.images))


def test_a_corrupt_or_foreign_partition_file_is_named_not_redrawn(roots, tmp_path):
    build_dataset("cub200", {}, str(roots[0]), partitions_dir=str(tmp_path))
    (saved,) = tmp_path.glob("cub200-*.json")
    text = saved.read_text()
    saved.write_text(text[: len(text) // 2])  # truncated
    with pytest.raises(DatasetError, match=f"corrupt partition file {saved}"):
        build_dataset("cub200", {}, str(roots[0]), partitions_dir=str(tmp_path))
    record = json.loads(text)
    record["val"][0] = "999.Nowhere/x.jpg"
    saved.write_text(json.dumps(record))
    with pytest.raises(DatasetError, match="lists 1 images that are not in the train split, e.g. 999.Nowhere/x.jpg"):
        build_dataset("cub200", {}, str(roots[0]), partitions_dir=str(tmp_path))


def test_the_partition_rule_holds_out_int_fraction_or_a_count_per_class():
    assert [val_count(n, 0.2) for n in (1, 4, 5, 29, 30, 60)] == [0, 0, 1, 5, 6, 12]  # the authors' int(0.2·n)
    assert [val_count(n, 5) for n in (2, 5, 6, 40)] == [1, 4, 5, 5]  # never the last training image
    labels = np.repeat(np.arange(4), [30, 29, 10, 7])
    mask = draw_partition(labels, 0.2, seed=0)
    assert np.bincount(labels[mask]).tolist() == [6, 5, 2, 1]
    assert np.array_equal(mask, draw_partition(labels, 0.2, seed=0))


@pytest.mark.parametrize("name, remove, message", [
    ("cifar10", "cifar-10-batches-py/data_batch_3", "missing data_batch_3"),
    ("cifar100", "cifar-100-python/meta", "missing meta"),
    ("tinyimagenet", "tiny-imagenet-200/val/val_annotations.txt", "missing val/val_annotations.txt"),
    ("cub200", "CUB_200_2011/train_test_split.txt", "missing train_test_split.txt"),
    ("herbarium19", "herbarium_19/small-validation", "missing small-validation"),
])
def test_a_missing_part_is_named_with_the_expected_layout(tmp_path, name, remove, message):
    {"cifar10": fx.write_cifar10, "cifar100": fx.write_cifar100, "tinyimagenet": fx.write_tinyimagenet,
     "cub200": fx.write_cub, "herbarium19": lambda r: fx.write_herbarium(r, HERB_CATS)}[name](tmp_path)
    import shutil

    target = tmp_path / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(DatasetError, match=message) as err:
        build_dataset(name, {"num_classes": 10} if name == "herbarium19" else {}, str(tmp_path))
    assert name in str(err.value) and str(tmp_path) in str(err.value) and "Expected layout" in str(err.value)


def test_no_root_and_a_wrong_root(tmp_path):
    with pytest.raises(DatasetError, match="no data root given; use --data-root DIR"):
        build_dataset("cifar10", {}, None)
    with pytest.raises(DatasetError, match=f"not found or incomplete at {tmp_path}"):
        build_dataset("cifar10", {}, str(tmp_path))


def test_corrupt_files_are_named(tmp_path):
    out = fx.write_cifar10(tmp_path)
    (out / "data_batch_2").write_bytes((out / "data_batch_2").read_bytes()[:100])  # truncated
    with pytest.raises(DatasetError, match="corrupt or truncated CIFAR file .*data_batch_2"):
        build_dataset("cifar10", {}, str(tmp_path))
    cub = fx.write_cub(tmp_path / "c")
    bad = cub / "images" / "001.Bird_1" / "Bird_1_0.jpg"
    bad.write_bytes(b"not a jpeg")
    data = build_dataset("cub200", {}, str(tmp_path / "c"))
    with pytest.raises(DatasetError, match="unreadable image .*Bird_1_0.jpg"):
        data.train.load(np.arange(len(data.train)))


def test_wrong_class_counts_are_refused(tmp_path):
    out, _ = fx.write_tinyimagenet(tmp_path)
    lines = (out / "wnids.txt").read_text().splitlines()
    (out / "wnids.txt").write_text("\n".join(lines[:150]) + "\n")
    with pytest.raises(DatasetError, match="lists 150 wnids; TinyImageNet-200 has 200"):
        build_dataset("tinyimagenet", {}, str(tmp_path))


APPENDIX = Path(__file__).resolve().parents[1] / "results" / "paper" / "appendix_table_data_splits.csv"


def published_train_per_class(dataset: str) -> list[int]:
    """Training images per class in canonical order, from each dataset's published sizes, after the
    harness's train/val partition."""
    if dataset == "C10":
        return [5000] * 10
    if dataset == "C100":
        return [500] * 100
    if dataset == "T200":
        return [500] * 200
    if dataset == "B200":
        # 5,994 official training images, 29 or 30 a class (194·30 + 6·29); int(0.2·n) held out as val
        official = [30] * 194 + [29] * 6
        return [n - val_count(n, 0.2) for n in official]
    raise KeyError(dataset)


def appendix_rows() -> dict[tuple[str, str], list[dict]]:
    rows: dict[tuple[str, str], list[dict]] = {}
    with APPENDIX.open() as fh:
        for row in csv.DictReader(fh):
            rows.setdefault((row["dataset"], row["split"]), []).append(row)
    return rows


@pytest.mark.parametrize("dataset", ["C10", "C100", "T200", "B200"])
@pytest.mark.parametrize("split", ["2-step", "5-step"])
def test_counting_reproduces_the_papers_appendix_table(dataset, split):
    paper = appendix_rows()[(dataset, split)]
    per_class = published_train_per_class(dataset)
    rows = task_counts(per_class, [0] * len(per_class), int(split[0]))
    assert [r["num_classes"] for r in rows] == [int(p["num_classes"]) for p in paper]
    assert [format_thousands(r["train"]) for r in rows] == [p["num_train_images"] for p in paper]


def test_herbarium_class_splits_and_total_match_the_appendix():
    """Herbarium's per-class sizes are not published, only the totals: 34,225 small-train images
    over 683 classes, 5 a class held out as val."""
    table = appendix_rows()
    for split in ("2-step", "5-step"):
        paper = table[("H683", split)]
        rows = task_counts([1] * 683, [1] * 683, int(split[0]))
        assert [r["num_classes"] for r in rows] == [int(p["num_classes"]) for p in paper]
        assert sum(float(p["num_train_images"][:-1]) for p in paper) == pytest.approx(
            (34225 - 683 * val_count(50, 5)) / 1000, abs=0.1 * len(paper))
    assert format_thousands(34225 - 5 * 683) == "30.8k"


def test_data_summary_command(roots, capsys, tmp_path):
    assert main(["data", "summary", "cifar10", "--data-root", str(roots[0]), "--split", "5-step",
                 "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cifar10: 10 classes, 40 train and 20 test images; 5-step split" in out
    assert f"read from {roots[0] / 'cifar-10-batches-py'}" in out
    assert "| 0-1 " in out and "| 8-9 " in out
    assert main(["data", "summary", "cifar10", "--data-root", str(tmp_path / "nowhere")]) == 2
    assert "not found or incomplete" in capsys.readouterr().err


def test_data_summary_of_a_mixed_split_shows_the_steps_a_run_holds(capsys, tmp_path):
    """Was a 6-task class-iNCD table (CIFAR-100) or a refusal (digits) for a split `bench run` runs."""
    import json

    from bench.protocol.runner import execute
    from tests.helpers import tiny_specs

    options = {"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4}
    (spec,) = tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **options)
    split = json.loads((execute(spec, tmp_path / "run") / "split.json").read_text())
    assert main(["data", "summary", "synthetic", "--split", "happy-5-stage", "--results", str(tmp_path),
                 "--cfg-options", *[f"{k}={v}" for k, v in options.items()]]) == 0
    out = capsys.readouterr().out
    assert "happy-5-stage: 6 labelled classes (0.8 of their images labelled), then 5 unlabelled steps" in out
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in out.splitlines()[3:]]
    assert [r[1] for r in rows] == ["labelled"] + ["unlabelled"] * 5
    assert [int(r[4]) + int(r[5]) for r in rows] == [len(images) for images in split["stages"]]
    assert [int(r[3]) for r in rows] == [6, 1, 1, 1, 1, 1] and [int(r[2]) for r in rows] == [0, 6, 7, 8, 9, 10]
    assert [int(r[6]) for r in rows] == [4 * (6 + t) for t in range(6)]  # 4 test images of every class seen


TINY_VIT = ["--backbone", "timm:vit_tiny_patch16_224", "--cfg-options", "backbone.pretrained=False",
            "backbone.kwargs.img_size=32", "backbone.kwargs.patch_size=16", "backbone.kwargs.embed_dim=32",
            "backbone.kwargs.depth=1", "backbone.kwargs.num_heads=2", "method.epochs=2", "features.views=2"]


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100", "tinyimagenet", "cub200", "herbarium19", "imagenet100",
                                     "aircraft", "cars", "domainnet"])
def test_baseline_and_kmeans_end_to_end_on_each_fixture(roots, tmp_path, capsys, dataset):
    extra = {"herbarium19": ["dataset.num_classes=10"], "domainnet": ["dataset.domains=sketch"]}.get(dataset, [])
    code = main(["run", "--grid", "smoke", "--methods", "Baseline", "K-means", "--datasets", dataset,
                 "--data-root", str(roots[0]), "--cluster", "debug", "--results", str(tmp_path), *TINY_VIT, *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 done, 0 failed" in out and dataset in out
    spec = json.loads(next((tmp_path / "runs").glob("*/spec.json")).read_text())
    assert spec["location"]["data_root"] == str(roots[0])


def test_domainnet_reads_its_lists_per_domain_and_says_each_images_domain(roots, tmp_path):
    with pytest.raises(DatasetError, match="domainnet.*missing infograph, painting, quickdraw, real"):
        build_dataset("domainnet", {}, str(roots[0]))  # every domain by default: the fixture holds two
    data = build_dataset("domainnet", {"domains": "sketch,clipart"}, str(roots[0]))
    assert data.num_classes == 345 and data.class_names[7] == "class_007" and data.augmentation == "finegrained"
    assert len(data.train) == len(data.test) == 690 and np.bincount(data.train.labels).tolist() == [2] * 345
    # the domains' lists in the order asked, each image's domain beside it
    assert data.extra["domains"] == ["sketch", "clipart"]
    assert data.extra["domain"]["train"].tolist() == [0] * 345 + [1] * 345
    assert str(data.train.images[0]).endswith("sketch/class_000/sketch_001_000000.jpg")
    assert data.train.labels[:3].tolist() == [0, 7, 14]
    # the lists in splits/ (Dassl.pytorch's layout) read the same
    fx.write_domainnet(tmp_path, domains=("real",), lists_in_splits=True)
    assert len(build_dataset("domainnet", {"domains": "real"}, str(tmp_path)).test) == 345
    with pytest.raises(BenchError, match="unknown domainnet domain 'photo'; known: clipart, infograph, painting"):
        build_dataset("domainnet", {"domains": "photo"}, str(tmp_path))
    listed = tmp_path / "domainnet" / "splits" / "real_test.txt"
    listed.write_text(listed.read_text().replace("real/class_007/", "real/class_008/", 1))
    with pytest.raises(DatasetError, match="label 7 is class 'class_008' there and 'class_007' elsewhere"):
        build_dataset("domainnet", {"domains": "real"}, str(tmp_path))
    listed.write_text("real/class_000/x.jpg seven\n")
    with pytest.raises(DatasetError, match="bad line in .*real_test.txt"):
        build_dataset("domainnet", {"domains": "real"}, str(tmp_path))


def mixed_kmeans_run(roots, tmp_path, capsys, dataset, *options):
    """K-means on `happy-5-stage` of a fixture dataset with the tiny ViT and `options`: its run directory, and what
    it printed."""
    code = main(["run", "--grid", "smoke", "--methods", "K-means", "--datasets", dataset, "--splits", "happy-5-stage",
                 "--data-root", str(roots[0]), "--cluster", "debug", "--results", str(tmp_path),
                 *[a for a in TINY_VIT if a != "method.epochs=2"], *options])
    out = capsys.readouterr().out
    assert code == 0, out
    (run,) = (tmp_path / "runs").glob("*")
    return run, out


@pytest.mark.parametrize("whole", [True, False])
def test_a_mixed_run_trains_on_the_whole_official_training_set_unless_told(roots, tmp_path, capsys, whole):
    """Herbarium's reader holds images of each class out for validation (here 1 of 7): the mixed setting gives them
    back (the peers read the whole training set, and a mixed run scores nothing on them) unless
    `setting.whole_train=false`."""
    from bench.splits.manifests import Manifest

    extra = [] if whole else ["setting.whole_train=false"]
    run, _ = mixed_kmeans_run(roots, tmp_path, capsys, "herbarium19", "dataset.num_classes=10",
                              "dataset.val_per_class=1", *extra)
    spec = json.loads((run / "spec.json").read_text())
    assert spec["config"]["setting"]["whole_train"] is whole
    manifest = Manifest.from_json((run / "split.json").read_text())
    partitioned = build_dataset("herbarium19", {"num_classes": 10, "val_per_class": 1}, str(roots[0]), str(tmp_path))
    used = np.concatenate(manifest.steps)
    # the whole set holds 7 images a class (in the official order), the partitioned one 6: rows past its end
    assert used.max() >= len(partitioned.train) if whole else used.max() < len(partitioned.train)
    assert ("val partition are given back" in (run / "log.txt").read_text()) is whole


def test_imagenet100_is_gcds_class_subset_read_from_imagenets_folder_layout(tmp_path):
    from bench.data.imagenet import subset_classes

    np.random.seed(0)  # GCD's and Happy's code: the global generator seeded 0, then one draw
    assert subset_classes().tolist() == np.sort(np.random.choice(range(1000), size=(100,), replace=False)).tolist()
    chosen = subset_classes().tolist()
    out, wnids = fx.write_imagenet(tmp_path, chosen)
    data = build_dataset("imagenet100", {}, str(tmp_path))
    assert data.num_classes == 100 and data.class_names == [wnids[i] for i in chosen]
    assert np.bincount(data.train.labels).tolist() == [2] * 100 and np.bincount(data.test.labels).tolist() == [1] * 100
    assert data.val is None and str(data.train.images[0]).startswith(str(out / "train" / wnids[chosen[0]]))
    # the class of an image is its folder's rank among the subset's (the fixture colours images by it)
    first = data.train.load(np.array([0, len(data.train) - 1]))
    assert not np.array_equal(first[0], first[1])
    shutil.rmtree(out / "val" / wnids[chosen[5]])
    with pytest.raises(DatasetError, match="the class folders of .*val differ"):
        build_dataset("imagenet100", {}, str(tmp_path))
    (out / "val" / wnids[chosen[5]]).mkdir()
    with pytest.raises(DatasetError, match=f"no images in .*{wnids[chosen[5]]}"):
        build_dataset("imagenet100", {}, str(tmp_path))
    shutil.rmtree(out / "train" / wnids[3])
    with pytest.raises(DatasetError, match="has 999 class folders; ImageNet-1k has 1000"):
        build_dataset("imagenet100", {}, str(tmp_path))


def test_aircraft_numbers_the_sorted_variants_and_reads_either_peers_lists(tmp_path):
    out = fx.write_aircraft(tmp_path)
    data = build_dataset("aircraft", {}, str(tmp_path))
    assert data.num_classes == 100 and data.class_names == sorted(fx.AIRCRAFT_VARIANTS)
    assert np.bincount(data.train.labels).tolist() == [2] * 100 and np.bincount(data.test.labels).tolist() == [1] * 100
    # an image's class is its variant's rank among the sorted names (the fixture colours images by it)
    variant = "F-16A/B -3"
    (image_id,) = [line.split(" ", 1)[0] for line in (out / "images_variant_test.txt").read_text().splitlines()
                   if line.split(" ", 1)[1] == variant]
    assert data.test.labels[[str(p) for p in data.test.images].index(str(out / "images" / f"{image_id}.jpg"))] ==\
        sorted(fx.AIRCRAFT_VARIANTS).index(variant)
    promptccd = build_dataset("aircraft", {"splits": "train-val"}, str(tmp_path))  # its train and val lists
    assert len(promptccd.train) == 100 and len(promptccd.test) == 100 and promptccd.class_names == data.class_names
    with pytest.raises(BenchError, match="unknown aircraft splits 'test'; known: train-val, trainval-test"):
        build_dataset("aircraft", {"splits": "test"}, str(tmp_path))
    with (out / "images_variant_test.txt").open("a") as fh:
        fh.write("9999999 Concorde\n")
    with pytest.raises(DatasetError, match="names variants the training list does not, e.g. 'Concorde'"):
        build_dataset("aircraft", {}, str(tmp_path))


def test_cars_numbers_the_annotations_class_minus_one(tmp_path):
    out = fx.write_cars(tmp_path)
    data = build_dataset("cars", {}, str(tmp_path))
    assert data.num_classes == 196 and np.bincount(data.train.labels).tolist() == [1] * 196
    assert data.train.labels[:3].tolist() == [0, 5, 10] and str(data.train.images[1]).endswith("cars_train/00002.jpg")
    (out / "cars_test" / "00003.jpg").unlink()
    with pytest.raises(DatasetError, match="1 images listed in .*cars_test_annos_withlabels.mat are missing"):
        build_dataset("cars", {}, str(tmp_path))
    (out / "devkit" / "cars_train_annos.mat").write_bytes(b"not MATLAB")
    with pytest.raises(DatasetError, match="cannot read the annotations in .*cars_train_annos.mat"):
        build_dataset("cars", {}, str(tmp_path))


def test_a_run_holds_happys_images_with_its_draw(roots, tmp_path, capsys):
    """`setting.draw=happy` on CIFAR-100 (the fixture's 2 images a class): the run's split is Happy's draw of the
    dataset's training labels, relabelled in Happy's arrival order, and its results say so."""
    from bench.splits.happy_draw import happy_draw
    from bench.splits.manifests import Manifest
    from bench.splits.settings import arrival_order, protocol_for

    run, out = mixed_kmeans_run(roots, tmp_path, capsys, "cifar100", "setting.draw=happy", "setting.arrival=happy")
    spec = json.loads((run / "spec.json").read_text())
    labels = build_dataset("cifar100", {}, str(roots[0])).train.labels
    order = arrival_order(spec["config"]["setting"], 100)
    relabelled = np.argsort(order)[labels]
    expected = happy_draw(protocol_for(spec["config"]["setting"], 100, relabelled), relabelled, shuffled=True)
    stored = Manifest.from_json((run / "split.json").read_text())
    assert all(np.array_equal(a, b) for a, b in zip(stored.steps, expected.steps))
    assert "happy-5-stage · Happy's draw · arrival happy" in out


def test_a_cub_table_with_a_digit_int_cannot_read_is_a_dataset_error(tmp_path):
    from bench.data.base import DatasetError
    from bench.data.cub import _table

    path = tmp_path / "image_class_labels.txt"
    path.write_text("1 1\n² 3\n")  # `²` is a digit to str.isdigit, not to int: was a ValueError traceback
    with pytest.raises(DatasetError, match="bad line in .*image_class_labels.txt: '² 3'"):
        _table(path, 2)

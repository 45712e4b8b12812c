"""A mixed run that holds a given split (`setting.manifest_file`): a run's own split.json run again gives
the same run; a hand-written manifest with its own class order runs with exactly its counts; the file is
known by its content in the run id, not by its path; a bad or changed file is refused."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.errors import BenchError
from bench.splits.manifests import Manifest
from bench.protocol.runner import execute
from tests.helpers import tiny_specs

MIXED = {"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4}


def spec_with(path=None, **options):
    extra = {"setting.manifest_file": str(path)} if path else {}
    return tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **MIXED, **extra, **options)[0]


def metrics(out):
    frame = pd.read_parquet(out / "metrics.parquet")
    return frame[["step", "group", "flavour", "metric", "value"]].sort_values(["step", "group", "flavour", "metric"])


def test_a_runs_own_split_given_back_gives_the_same_run(tmp_path):
    drawn = execute(spec_with(), tmp_path / "a")
    given = spec_with(drawn / "split.json")
    assert given.config["setting"]["manifest_sha256"] and given.run_id != spec_with().run_id
    out = execute(given, tmp_path / "b")
    assert json.loads((out / "split.json").read_text()) == json.loads((drawn / "split.json").read_text())
    pd.testing.assert_frame_equal(metrics(out).reset_index(drop=True), metrics(drawn).reset_index(drop=True))
    assert set(pd.read_parquet(out / "metrics.parquet").split) == {
        f"happy-5-stage · file {given.config['setting']['manifest_sha256'][:8]}"}


def test_a_manifest_with_its_own_class_order_runs_with_exactly_its_counts(tmp_path):
    labels = np.repeat(np.arange(12), 20)  # the synthetic dataset's training labels, class by class
    rng = np.random.default_rng(3)

    def images(c, n, besides=()):
        return rng.choice(np.setdiff1d(np.flatnonzero(labels == c), besides), size=n, replace=False)

    # labelled: classes 7, 2, 9, 4, 0, 11; then one new class per step, in the order 5, 1, 10, 3, 8; the later
    # steps' images of labelled classes are of those the labelled step left (a labelled image is in no other)
    labelled = [7, 2, 9, 4, 0, 11]
    arrivals = [5, 1, 10, 3, 8]
    first = np.concatenate([images(c, 15) for c in labelled])
    steps = [first]
    for s, new in enumerate(arrivals):
        steps.append(np.concatenate([images(c, 3, first) for c in labelled[:3]] + [images(c, 2) for c in arrivals[:s]]
                                     + [images(new, 12 + s)]))
    path = tmp_path / "theirs.json"
    path.write_text(Manifest(tuple(np.sort(s) for s in steps), (True,) + (False,) * 5).to_json())
    out = execute(spec_with(path), tmp_path / "r")
    kept = Manifest.from_json((out / "split.json").read_text())
    assert kept.counts(labels) == Manifest.from_json(path.read_text()).counts(labels)  # exactly the file's
    log = (out / "log.txt").read_text()
    assert "classes in the order its steps make: [0, 2, 4, 7, 9, 11, 5, 1, 10, 3, 8]" in log
    k = pd.read_parquet(out / "metrics.parquet").query("group == 'k' and metric == 'true'")
    assert k.value.tolist() == [1.0] * 5  # one new class per step, as the file has it


def test_the_run_id_knows_the_file_by_its_content_not_its_path(tmp_path):
    first = execute(spec_with(), tmp_path / "a") / "split.json"
    copy = tmp_path / "elsewhere" / "copy.json"
    copy.parent.mkdir()
    copy.write_text(first.read_text())
    assert spec_with(first).run_id == spec_with(copy).run_id
    data = json.loads(first.read_text())
    data["stages"][1] = data["stages"][1][1:]
    copy.write_text(json.dumps(data))
    assert spec_with(copy).run_id != spec_with(first).run_id


def test_a_bad_or_changed_manifest_file_is_refused(tmp_path):
    with pytest.raises(BenchError, match="manifest_file .*missing.json: not a readable split manifest"):
        spec_with(tmp_path / "missing.json")
    short = tmp_path / "short.json"
    short.write_text(Manifest((np.arange(3), np.arange(3, 6)), (True, False)).to_json())
    with pytest.raises(BenchError, match="2 steps .* a labelled step then 5 unlabelled ones"):
        spec_with(short)
    first = execute(spec_with(), tmp_path / "a") / "split.json"
    path = tmp_path / "given.json"
    path.write_text(first.read_text())
    planned = spec_with(path)
    data = json.loads(path.read_text())
    data["stages"][2] = data["stages"][2][:-1]
    path.write_text(json.dumps(data))
    with pytest.raises(BenchError, match="the file changed since"):
        execute(planned, tmp_path / "b")


def defect(manifest_json: dict, kind: str) -> object:
    """A run's split.json (as a dict) broken one way."""
    data = json.loads(json.dumps(manifest_json))
    steps = data["stages"]
    if kind == "repeated in a step":
        steps[1].append(steps[1][0])
    elif kind == "labelled image in an unlabelled step":
        steps[2].append(steps[0][0])
    elif kind == "float index":
        steps[1][0] = steps[1][0] + 0.5
    elif kind == "negative index":
        steps[1][0] = -3
    elif kind == "empty step":
        steps[3] = []
    elif kind == "huge index":
        steps[1][0] = 10 ** 30
    elif kind == "a list":
        return [steps]
    elif kind == "validation in a step":
        data["validation"] = [steps[1][0]]
    elif kind == "a string index":
        steps[1][0] = "7"
    elif kind == "every step labelled":
        data["labelled"] = [True] * len(steps)
    return data


@pytest.mark.parametrize("kind, said", [
    ("repeated in a step", "step 1 lists training image .* 2 times; an image is at most once in a step"),
    ("labelled image in an unlabelled step", "is in the labelled step 0 and in step 2"),
    ("float index", "step 1 lists .*\\.5; an image index is an integer >= 0"),
    ("negative index", "step 1 lists -3; an image index is an integer >= 0"),
    ("empty step", "step 3 holds no image"),
    ("huge index", "step 1 lists 1000000000000000000000000000000; an image index is an integer >= 0"),
    ("a list", "a split manifest is a JSON object with version, steps and labelled; got a list"),
    ("validation in a step", "is held out for validation and in step 1"),
    ("a string index", "step 1 lists '7'; an image index is an integer >= 0"),
    # the cause, not its symptom (was: "training image 80 is in the labelled step 1 and in step 2")
    ("every step labelled", "6 steps labelled \\[True, True, True, True, True, True\\]; the split has a labelled step "
                            "then 5 unlabelled ones"),
])
def test_each_manifest_defect_is_refused_when_the_run_is_planned(tmp_path, kind, said):
    split = json.loads((execute(spec_with(), tmp_path / "a") / "split.json").read_text())
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(defect(split, kind)))
    with pytest.raises(BenchError, match=f"setting.manifest_file .*broken.json: .*{said}"):
        spec_with(path)


def test_a_manifest_beyond_the_dataset_is_refused_before_any_run_starts(tmp_path, capsys):
    from bench.cli import main

    split = json.loads((execute(spec_with(), tmp_path / "a") / "split.json").read_text())
    split["stages"][2].append(12 * 20 + 5)  # the dataset has 240 training images
    path = tmp_path / "beyond.json"
    path.write_text(json.dumps(split))
    results = tmp_path / "results"
    code = main(["run", "--grid", "smoke", "--methods", "K-means", "--datasets", "synthetic", "--splits",
                 "happy-5-stage", "--backbone", "pixels", "--cluster", "debug", "--results", str(results),
                 "--cfg-options", *[f"{k}={v}" for k, v in MIXED.items()], f"setting.manifest_file={path}"])
    err = capsys.readouterr().err
    assert code == 2 and "step 2 names training image 245; the dataset has 240 (0..239)" in err
    assert not (results / "runs").exists() or not any((results / "runs").iterdir())  # nothing started

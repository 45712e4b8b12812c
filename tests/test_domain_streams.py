"""Domain-shifted streams (`setting.domains`: bench/splits/domains.py, bench/data/domains.py): each stage draws its
images from its domain (a corruption at a severity, or a dataset's own domain), the corruptions are the same
pictures in every run and cached, a corruption stream draws the clean stream's pictures, every mixed-setting method
runs one end to end, and the per-domain rows recompute from the predictions."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.config.grids import expand, load_grid
from bench.data import build_dataset
from bench.data.base import ImageSet, LoadedDataset
from bench.data.domains import corrupted, shifted
from bench.errors import BenchError
from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.registries.catalogue import known_method, method_names
from bench.runs.predictions import PREDICTIONS, Keys, opened
from bench.splits.domains import STREAMS, Domain, parse_domain, stream_of
from bench.splits.manifests import MixedProtocol, StageDomains, draw
from bench.splits.settings import mixed_setting, protocol_for
from tests import fixtures_datasets as fx
from tests.helpers import tiny_specs

pytest.importorskip("imagecorruptions")  # the `domains` extra; the test extra installs it


def images(n: int = 6, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


@pytest.mark.parametrize("value, said", [
    (["clean", "fog:3"], "names 2 domain\\(s\\); the protocol has 6 stages"),
    (["clean", "fog", "clean", "clean", "clean", "clean"], "a corruption takes a severity 1-5 after a colon, e.g. fog:3"),
    (["clean", "fog:6", "clean", "clean", "clean", "clean"], "severity 1-5"),
    (["clean", "sonw:2", "clean", "clean", "clean", "clean"], "unknown domain 'sonw'.*did you mean 'snow'"),
    (["clean", "clean:2", "clean", "clean", "clean", "clean"], "only a corruption takes a severity"),
    ("imagenet-c", "unknown stream setting.domains='imagenet-c'.*imagenet-c-6, domainnet-6"),
    (["sketch", "fog:1", "sketch", "sketch", "sketch", "sketch"], "either the dataset's own domains or clean"),
])
def test_a_stream_names_one_valid_domain_per_stage(value, said):
    with pytest.raises(BenchError, match=said):
        stream_of(value, 6, "domainnet")


def test_a_bad_stream_is_refused_before_anything_runs():
    with pytest.raises(BenchError, match="unknown domain 'sketch'.*valid: clean"):
        tiny_specs(methods=["NCM + k-means"], splits=["happy-5-stage"],
                   **{"setting.domains": ["clean", "sketch", "clean", "clean", "clean", "clean"]})
    with pytest.raises(BenchError, match="a domain-shifted stream draws its own images"):
        tiny_specs(methods=["NCM + k-means"], splits=["happy-5-stage"],
                   **{"setting.domains": "imagenet-c-6", "setting.draw": "happy"})


def test_the_registered_streams_parse_and_say_their_domains():
    assert [str(d) for d in stream_of("imagenet-c-6", 6)] == list(STREAMS["imagenet-c-6"])
    assert {d.kind for d in stream_of("domainnet-6", 6, "domainnet")} == {"dataset"}
    assert parse_domain("fog:3") == Domain("fog", 3) and str(Domain("fog", 3)) == "fog:3"


def test_a_corruption_is_the_same_picture_whatever_the_global_generator_and_leaves_it_as_it_was():
    x = images()
    np.random.seed(1)
    first = corrupted(x, Domain("gaussian_noise", 3))
    after = np.random.random()
    np.random.seed(2)
    again = corrupted(x, Domain("gaussian_noise", 3))
    np.random.seed(1)
    assert np.random.random() == after  # the run's own draws go on as if nothing had been corrupted
    assert np.array_equal(first, again) and first.dtype == np.uint8 and first.shape == x.shape
    assert not np.array_equal(first, x)
    assert not np.array_equal(first[0], first[1] - x[1] + x[0])  # each image its own noise
    assert not np.array_equal(first, corrupted(x, Domain("gaussian_noise", 5)))  # the severity matters
    assert np.array_equal(corrupted(x, Domain("clean")), x)
    with pytest.raises(BenchError, match="at least 32 pixels a side; these are 16x16"):
        corrupted(images(size=16), Domain("fog", 1))


def toy(n_classes: int = 6, per_class: int = 8) -> LoadedDataset:
    labels = np.repeat(np.arange(n_classes), per_class)
    return LoadedDataset("toy", [f"c{c}" for c in range(n_classes)], ImageSet(images(len(labels)), labels),
                         ImageSet(images(2 * n_classes, seed=1), np.repeat(np.arange(n_classes), 2)))


def test_a_corruption_stream_is_cached_and_draws_the_clean_draws_pictures_each_in_its_stage_domain(tmp_path):
    data, said = toy(), []
    stream = stream_of(["clean", "snow:2", "fog:1", "snow:2"], 4)
    view = shifted(data, stream, tmp_path, {"dataset": "toy"}, said.append)
    assert sum("corrupting" in line for line in said) == 4  # snow and fog, train and test
    assert view.extra["stream"]["names"] == ["clean", "snow:2", "fog:1"] and len(view.train) == 3 * len(data.train)
    said.clear()
    again = shifted(data, stream, tmp_path, {"dataset": "toy"}, said.append)
    assert not any("corrupting" in line for line in said) and np.array_equal(again.train.images, view.train.images)
    old = {0: 2, 1: 2, 2: 2}  # Happy's kind of protocol: half of each labelled class labelled, then 3 stages
    protocol = MixedProtocol((0, 1, 2), 0.5, ({**old, 3: 5}, {**old, 3: 2, 4: 5}, {**old, 3: 2, 4: 2, 5: 5}))
    n = len(data.train)
    stages = (0, 1, 2, 1)
    where = StageDomains(stages, np.asarray(view.extra["stream"]["train"]), np.asarray(view.extra["stream"]["source"]))
    clean, shift = draw(protocol, data.train.labels, 7), draw(protocol, view.train.labels, 7, where)
    for s, (a, b) in enumerate(zip(clean.steps, shift.steps)):
        assert np.array_equal(b, a + stages[s] * n)
    labelled = set(shift.steps[0] % n)
    assert not any(set(rows % n) & labelled for rows in shift.steps[1:])  # no labelled picture, in any domain


def test_a_domainnet_stream_draws_each_stage_from_its_own_domain(tmp_path):
    root = tmp_path / "data"
    fx.write_domainnet(root, ("clipart", "sketch"), per_class_train=3)
    data = build_dataset("domainnet", {"domains": "sketch,clipart"}, str(root))
    stream = stream_of(["clipart", "sketch", "clipart", "sketch", "sketch", "clipart"], 6, "domainnet")
    view = shifted(data, stream, tmp_path, {}, lambda _: None)
    info = view.extra["stream"]
    assert info["names"] == ["clipart", "sketch"] and len(view.train) == len(data.train)
    assert all(f"/{info['names'][d]}/" in str(f) for f, d in zip(view.train.images, info["train"]))
    setting = mixed_setting("happy-5-stage")
    where = StageDomains((0, 1, 0, 1, 1, 0), np.asarray(info["train"]), np.asarray(info["source"]))
    stage_labels = [view.train.labels[where.images == k] for k in where.stages]
    protocol = protocol_for(setting, 345, stage_labels[0], stage_labels)
    manifest = draw(protocol, view.train.labels, 0, where)
    for s, rows in enumerate(manifest.steps):
        assert (where.images[rows] == where.stages[s]).all()
    with pytest.raises(BenchError, match="names real, which the dataset as read does not hold"):
        shifted(data, stream_of(["real"] * 6, 6, "domainnet"), tmp_path, {}, lambda _: None)
    # a corruption stream over file-backed images: every domain decoded alike, the clean one too
    one = build_dataset("domainnet", {"domains": "sketch"}, str(root))
    one = replace(one, train=one.train.subset(np.arange(12)), test=one.test.subset(np.arange(4)))  # a few suffice
    view = shifted(one, stream_of(["clean", "fog:1", "clean", "fog:1", "fog:1", "clean"], 6), tmp_path,
                   {"dataset": "domainnet-sketch"}, lambda _: None)
    n = len(one.train)
    assert view.train.in_memory and view.train.images.shape[0] == 2 * n
    assert np.array_equal(view.train.images[:n], one.train.load(np.arange(n)))
    assert not np.array_equal(view.train.images[n:], view.train.images[:n])


MIXED_METHODS = [m for m in method_names() if "mixed" in known_method(m).runs_on.settings]


def test_every_mixed_setting_method_runs_a_corruption_stream_and_its_domain_rows_recompute(tmp_path):
    """The stream's CI grid (cgcd-drift-smoke: cgcd-smoke's tiny recipe, its images at 32 pixels): every method of
    the mixed setting in it, on bench's ImageNet-C stream."""
    specs = [s for s in expand(load_grid("cgcd-drift-smoke")) if s.config["setting"].get("domains")]
    assert sorted(s.method for s in specs) == sorted(MIXED_METHODS)
    names = list(STREAMS["imagenet-c-6"])
    for spec in specs:
        out = execute(spec, tmp_path)
        assert json.loads((out / "split.json").read_text())["domains"] == names
        frame = pd.read_parquet(out / "metrics.parquet")
        domain = frame[frame.group == "domain"]
        assert sorted(set(domain.metric)) == sorted(names) and set(domain.step) == set(range(6)), spec.method
        recomputed = {(r.step, r.group, r.flavour, r.metric): r.value for r in replay(out / PREDICTIONS)}
        measured = {(r.step, r.group, r.flavour, r.metric): r.value for r in frame.itertuples()}
        assert recomputed.keys() == measured.keys()
        assert all(np.isclose(recomputed[k], measured[k], rtol=1e-9, equal_nan=True) for k in measured)
        with opened(out / PREDICTIONS) as stored:  # a stage's rows score the domains seen so far
            labels, kept = stored[Keys.test_labels(1)], np.isin(stored[Keys.test_domain(1)], [0, 1])
            assert 0 < kept.sum() < len(labels)
    # the report groups them by domain, in a table and on the site, each run's page its stage × domain matrix
    main(["report", "--grid", "cgcd-drift-smoke", "--results", str(tmp_path)])  # LaTeX, and the site beside it
    report = tmp_path / "reports" / "cgcd-drift-smoke"
    table = (report / "cgcd_domains.tex").read_text()
    assert all(name.replace("_", "\\_") in table for name in names) and all(m in table for m in MIXED_METHODS)
    assert 'id="cgcd-domains"' in (report / "index.html").read_text()
    pages = [p.read_text() for p in (report / "runs").glob("*.html")]
    assert sum("accuracy by domain" in page for page in pages) == len(specs)

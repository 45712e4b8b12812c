"""PromptCCD's evaluation and selection (bench/protocol/transductive.py): semi-supervised k-means pinned on hand
computations, a transductive run's rows recomputed from the clusters of its steps' own images, and PromptCCD's
selection scoring every 10th epoch only and keeping the first best."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from bench.splits.manifests import Manifest
from bench.errors import BenchError
from bench.protocol.epoch_selection import EpochSelection
from bench.protocol.evaluate import clustering_accuracy, old_new_accuracies
from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.protocol.transductive import embeds, ss_kmeans
from bench.runs.predictions import PREDICTIONS, Keys
from tests.helpers import tiny_specs
from tests.test_mixed_setting import MIXED, features_and_labels


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)[:, None]


def test_ss_kmeans_moves_centres_with_labelled_and_unlabelled_images_by_hand():
    # classes 0 at {0}, 1 at {10}; unlabelled {4, 6, 7}; K = 2 (no draw). Pass 1 (centres 0, 10): 4 -> 0, 6 -> 1,
    # 7 -> 1, inertia 16 + 16 + 9 = 41; centres -> mean{0, 4} = 2 and mean{10, 6, 7} = 23/3. Pass 2: the same
    # assignment, inertia 4 + (6 - 23/3)² + (7 - 23/3)² + 2² + (10 - 23/3)² = 50/3, and the centres stay: done
    out = ss_kmeans(column(4, 6, 7), column(0, 10), torch.tensor([0, 1]), 2, gen=torch.Generator().manual_seed(0))
    assert out.assign.tolist() == [0, 1, 1]
    assert out.centres[:, 0].tolist() == pytest.approx([2.0, 23 / 3], rel=1e-12)
    assert out.inertia == pytest.approx(50 / 3, rel=1e-12)


def test_a_labelled_image_stays_with_its_class_even_nearer_another_centre():
    # class 0 at {0, 8}, class 1 at {10}; unlabelled {1, 2}. Pass 1 (centres 4, 10): both unlabelled -> 0,
    # inertia 9 + 4 + 16 + 16 = 45; centre 0 -> mean{0, 8, 1, 2} = 2.75. Pass 2: the image at 8 is 27.56 from its
    # class's centre and 4 from the other, and stays: inertia 3.0625 + 0.5625 + 7.5625 + 27.5625 = 38.75
    out = ss_kmeans(column(1, 2), column(0, 8, 10), torch.tensor([0, 0, 1]), 2, gen=torch.Generator().manual_seed(0))
    assert out.assign.tolist() == [0, 0]
    assert out.centres[:, 0].tolist() == pytest.approx([2.75, 10.0], rel=1e-12)
    assert out.inertia == pytest.approx(38.75, rel=1e-12)


def test_ss_kmeans_finds_new_blobs_beside_the_labelled_classes_and_is_seeded():
    gen = torch.Generator().manual_seed(3)
    centres = torch.randn(5, 8, generator=gen, dtype=torch.float64) * 10
    classes = torch.arange(5).repeat_interleave(20)
    x = centres[classes] + torch.randn(100, 8, generator=gen, dtype=torch.float64) * 0.3
    labelled = classes < 3
    # labelled: half the images of classes 0-2; unlabelled: their other half and every image of classes 3, 4
    shown = labelled & (torch.arange(100) % 2 == 0)
    out = ss_kmeans(x[~shown], x[shown], classes[shown], 5, gen=torch.Generator().manual_seed(0), n_init=4)
    truth = classes[~shown].numpy()
    assert clustering_accuracy(truth, out.assign.numpy()) == 100.0
    known = truth < 3  # the labelled classes' images go to their class's own cluster, not merely a matched one
    assert np.array_equal(out.assign.numpy()[known], truth[known])
    again = ss_kmeans(x[~shown], x[shown], classes[shown], 5, gen=torch.Generator().manual_seed(0), n_init=4)
    assert torch.equal(out.assign, again.assign)


def test_ss_kmeans_refuses_fewer_clusters_than_labelled_classes():
    with pytest.raises(BenchError, match="K = 1 must be at least 1 and at least the 2 labelled classes"):
        ss_kmeans(column(1), column(0, 10), torch.tensor([0, 1]), 1, gen=torch.Generator())


def test_promptccds_selection_scores_every_tenth_epoch_and_keeps_the_first_best():
    scores = {0: 1.0, 10: 3.0, 20: 3.0}  # epochs 10 and 20 tie: the strict rule keeps 10
    scored: list[int] = []
    epoch_now = 0

    def score(_logits) -> float:
        scored.append(epoch_now)
        return scores[epoch_now]

    w = torch.nn.Parameter(torch.zeros(1))
    selection = EpochSelection("promptccd", score, every=10)
    with selection.over([w], lambda x: x) as after_epoch:
        for epoch_now in range(25):
            w.data.fill_(epoch_now)
            after_epoch(epoch_now)
    assert scored == [0, 10, 20] and selection.chosen == [(10, 25)] and w.item() == 10.0


def test_a_transductive_run_scores_each_step_on_its_own_images_by_semi_supervised_kmeans(tmp_path):
    (spec,) = tiny_specs(methods=["K-means"], splits=["promptccd-3-stage"], **MIXED,
                         **{"setting.evaluation": "transductive"})
    (inductive,) = tiny_specs(methods=["K-means"], splits=["promptccd-3-stage"], **MIXED)
    assert spec.run_id != inductive.run_id
    out = execute(spec, tmp_path)
    plain, labels, data = features_and_labels(spec)
    manifest = Manifest.from_json((out / "split.json").read_text())
    stored = np.load(out / PREDICTIONS)
    frame = pd.read_parquet(out / "metrics.parquet")
    at = {(r.step, r.group, r.flavour): r.value for r in frame.itertuples() if r.metric == "acc"}
    labelled = np.unique(labels[manifest.steps[0]])
    z = F.normalize(plain.float(), dim=1)
    for t in range(1, 4):
        rows = manifest.steps[t]
        assert np.array_equal(stored[Keys.trans_labels(t)], labels[rows])
        # the clusters are those of semi-supervised k-means over the step's images and the labelled step's
        k = int(sum(stored[Keys.k_given(s)][0] for s in range(t + 1)))
        expected = ss_kmeans(z[rows], z[manifest.steps[0]], torch.as_tensor(labels[manifest.steps[0]]), k,
                             gen=torch.Generator().manual_seed(spec.seed * 1000 + t)).assign.numpy()
        assert np.array_equal(stored[Keys.trans_pred(t)], expected)
        (hard,) = old_new_accuracies(labels[rows], expected, labelled)
        assert at[(t, "all", "cgcd")] == pytest.approx(hard["all"])
        assert at[(t, "old", "cgcd_hard")] == pytest.approx(hard["old"])
        # the test images' scores stay beside, under their own flavour
        test = np.asarray(stored[Keys.test_labels(t)])
        (on_test,) = old_new_accuracies(test, np.asarray(stored[Keys.unified(t)]), labelled)
        assert at[(t, "all", "inductive")] == pytest.approx(on_test["all"])
    summary = frame[frame.group == "summary"].set_index("metric")["value"]
    # F compares the labelled classes' test images after the labelled step and after the last
    assert summary["F"] == pytest.approx(at[(0, "all", "cgcd")] - at[(3, "old", "inductive_hard")])
    assert summary["All"] == pytest.approx(np.mean([at[(t, "all", "cgcd")] for t in (1, 2, 3)]))
    assert set(frame.split) == {"promptccd-3-stage · draw 0 · transductive"}
    again = pd.DataFrame([dataclasses.asdict(r) for r in replay(out / "predictions.npz")])
    keys = ["step", "group", "flavour", "metric"]
    merged = frame[keys + ["value"]].merge(again, on=keys, suffixes=("", "_again"), how="outer")
    assert len(merged) == len(frame) and np.allclose(merged["value"], merged["value_again"], equal_nan=True)


def test_a_run_selected_as_promptccd_keeps_its_first_scored_epoch_on_a_frozen_representation(tmp_path):
    # Baseline learns a head on frozen features: PromptCCD's k-means over them scores every epoch alike, and its
    # strict rule keeps the first epoch scored (0), as PromptCCD's code would
    (spec,) = tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **MIXED,
                         **{"method.epochs": 12, "setting.selection": "promptccd"})
    frame = pd.read_parquet(execute(spec, tmp_path) / "metrics.parquet")
    kept = frame[frame.group == "selected_epoch"]
    assert len(kept) == 6 and (kept.value == 1.0).all()
    assert set(frame.split) == {"happy-5-stage · draw 0 · selected as PromptCCD · ORACLE ON TEST"}


def test_a_method_on_tokens_without_a_representation_cannot_be_clustered():
    from bench.methods.base import Method, RunsOn
    from bench.registries import METHODS

    class Tokens(Method):
        runs_on = RunsOn(inputs="tokens")

    class Embeds(Tokens):
        def embed(self, x: torch.Tensor) -> torch.Tensor:
            return x

    assert not embeds(Tokens(4, 0)) and embeds(Embeds(4, 0))
    assert embeds(METHODS.get("EwC")(4, 0, **{"unfreeze": 1}))  # a tail's feature
    assert embeds(METHODS.get("Baseline")(4, 0))  # frozen features
    with pytest.raises(NotImplementedError, match="its embed\\(\\) must return its representation"):
        Tokens(4, 0).embed(torch.zeros(1, 4))

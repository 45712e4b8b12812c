"""The statistics part of a report: ranks, Friedman and the post-hoc tests checked against scikit-posthocs and
Demšar (2006) on the paper's own data; Holm and Benjamini–Hochberg on hand-computed cases; the paired image ×
seed bootstrap on predictions made to order, recomputed with the evaluator's code."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scikit_posthocs as sp

from bench.protocol.steps import replay
from bench.splits.layout import TaskLayout
from bench.reporting.image_bootstrap import bootstrap_scores, paired, scorer
from bench.reporting.ranks import Blocks, blocks, nemenyi, nemenyi_cd, rank, rank_matrix, refusal, wilcoxon_pairs
from bench.reporting.stats import adjust
from bench.runs.predictions import Keys

# Demšar (2006), Table 6: AUC of C4.5 and three variants (+m, +cf, +m+cf) on 14 UCI data sets
DEMSAR = np.array([
    [0.763, 0.768, 0.771, 0.798], [0.599, 0.591, 0.590, 0.569], [0.954, 0.971, 0.968, 0.967],
    [0.628, 0.661, 0.654, 0.657], [0.882, 0.888, 0.886, 0.898], [0.936, 0.931, 0.916, 0.931],
    [0.661, 0.668, 0.609, 0.685], [0.583, 0.583, 0.563, 0.625], [0.775, 0.838, 0.866, 0.875],
    [1.000, 1.000, 1.000, 1.000], [0.940, 0.962, 0.965, 0.962], [0.619, 0.666, 0.614, 0.669],
    [0.972, 0.981, 0.975, 0.975], [0.957, 0.978, 0.946, 0.970]])
NAMES = ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"]
RTOL = 1e-12


def demsar_blocks(values: np.ndarray = DEMSAR) -> Blocks:
    index = pd.MultiIndex.from_tuples([("one", f"set{i}") for i in range(len(values))], names=["split", "dataset"])
    return Blocks("A", pd.DataFrame(values, index=index, columns=NAMES), (), (1, 1))


def test_nemenyi_pvalues_equal_scikit_posthocs_on_demsars_data():
    ours = nemenyi(rank_matrix(DEMSAR).mean(axis=0), len(DEMSAR))
    theirs = sp.posthoc_nemenyi_friedman(DEMSAR).to_numpy()
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    assert rank(demsar_blocks()).pvalues.loc["C4.5", "C4.5+m+cf"] == pytest.approx(theirs[0, 3], rel=RTOL)


@pytest.mark.parametrize("ours, theirs", [("holm", "holm"), ("bh", "fdr_bh")])
def test_wilcoxon_pairs_equal_scikit_posthocs_on_demsars_data(ours, theirs):
    reference = sp.posthoc_wilcoxon(list(DEMSAR.T), p_adjust=theirs).to_numpy()
    np.testing.assert_allclose(wilcoxon_pairs(DEMSAR, ours), reference, rtol=RTOL)


def test_ranks_friedman_and_critical_difference_as_demsar_prints_them():
    """The paper's ranks (3.143, 2.000, 2.893, 1.964) rank voting's C4.5+cf above C4.5+m+cf, both printed 0.975:
    with that tie broken as the paper did, its ranks, χ²_F = 9.28 (Demšar's form has no tie correction, scipy's
    has: its statistic times the correction factor is Demšar's) and its CD = 1.25 for q_0.05 = 2.569."""
    values = DEMSAR.copy()
    values[12, 2] += 1e-4
    r = rank(demsar_blocks(values))
    assert [round(r.average[m], 3) for m in NAMES] == [3.143, 2.000, 2.893, 1.964]
    ties = 60 + 6 + 6 + 6  # Σ(t³ − t): mushroom's four-way tie, iris', lung cancer's and primary tumor's pairs
    n, k = values.shape
    assert round(r.friedman[0] * (1 - ties / (n * k * (k * k - 1))), 2) == 9.28
    assert round(nemenyi_cd(4, 14), 2) == 1.25
    assert round(nemenyi_cd(4, 14) / math.sqrt(4 * 5 / (6 * 14)), 3) == 2.569


def test_friedman_is_scipys_and_cliques_join_what_nemenyi_cannot_tell_apart():
    from scipy.stats import friedmanchisquare

    r = rank(demsar_blocks())
    assert r.friedman == pytest.approx(tuple(friedmanchisquare(*DEMSAR.T)), rel=RTOL)
    assert r.critical_difference == pytest.approx(nemenyi_cd(4, 14), rel=RTOL)
    # no pair differs at 0.05 (the smallest p is 0.062): one bar over all four
    assert r.cliques == [list(r.average.index)]


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, then made non-decreasing
    np.testing.assert_allclose(adjust([0.01, 0.04, 0.03, 0.005], "holm"), [0.03, 0.06, 0.06, 0.02], rtol=RTOL)
    np.testing.assert_allclose(adjust([0.5, 0.6], "holm"), [1.0, 1.0], rtol=RTOL)  # capped at 1
    held = adjust([0.01, math.nan, 0.04], "holm")  # a test not made is not counted
    assert held[0] == pytest.approx(0.02) and math.isnan(held[1]) and held[2] == pytest.approx(0.04)


def test_benjamini_hochberg_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04 (already monotone)
    np.testing.assert_allclose(adjust([0.01, 0.04, 0.03, 0.005], "bh"), [0.02, 0.04, 0.04, 0.02], rtol=RTOL)
    # 0.02·3/2 = 0.03 > 0.03·3/3: the larger p's value carries down
    np.testing.assert_allclose(adjust([0.001, 0.02, 0.03], "bh"), [0.003, 0.03, 0.03], rtol=RTOL)
    with pytest.raises(ValueError, match="choose from holm, bh"):
        adjust([0.1], "bonferroni")


def scores_of(cells):
    """A `final_scores`-like frame: (split, dataset, label, mean) per A cell, 3 seeds."""
    return pd.DataFrame([dict(split=s, dataset=d, label=m, metric="A", mean=v, n=3) for s, d, m, v in cells])


def test_ranks_refuse_one_block_and_name_a_method_missing_a_cell():
    one = blocks(scores_of([("5-step", "c10", "a", 1.0), ("5-step", "c10", "b", 2.0)]), "A")
    assert refusal(one) == ("ranks of A refused: 1 block(s) (split × dataset) with every method; ranks need at least 2")
    part = blocks(scores_of([("5-step", "c10", "a", 1.0), ("5-step", "c10", "b", 2.0), ("5-step", "c100", "a", 3.0),
                             ("5-step", "c100", "c", 1.0), ("5-step", "c10", "c", 0.5)]), "A")
    assert part.left_out == ("b: not ranked, no A in 5-step / c100",)
    assert list(part.values.columns) == ["a", "c"] and refusal(part) is None
    assert part.rests_on() == "2 blocks (2 dataset(s) × 1 split(s)), 2 methods, 3 seed(s) per value"


LAYOUT = TaskLayout((0, 6), (6, 4))  # two steps: classes 0-5, then 6-9


def stored_run(rng: np.random.Generator, n_per_class: int, accuracy: float, wrong: np.ndarray | None = None) -> dict:
    """A two-step run's predictions.npz as a dict: task heads and maps perfect on val, the unified head right on
    exactly `accuracy` of the last step's test images (those not in `wrong`, if given), wrong elsewhere."""
    out: dict[str, np.ndarray] = {Keys.offsets: np.array(LAYOUT.offsets), Keys.sizes: np.array(LAYOUT.sizes)}
    for t in range(2):
        offset, size = LAYOUT.offsets[t], LAYOUT.sizes[t]
        classes = np.arange(offset, offset + size)
        out[Keys.val_labels(t)] = np.repeat(classes, 3)
        out[Keys.val_pred(t)] = np.repeat(classes - offset, 3)
        seen = np.arange(0, offset + size)
        labels = np.repeat(seen, n_per_class)
        out[Keys.test_labels(t)] = labels
        if t == 1:
            n = len(labels)
            if wrong is None:
                wrong = rng.choice(n, size=round((1 - accuracy) * n), replace=False)
            unified = labels.copy()
            unified[wrong] = (labels[wrong] + 1 + rng.integers(0, len(seen) - 1, len(wrong))) % len(seen)
        else:
            unified = labels.copy()
        out[Keys.unified(t)] = unified
        out[Keys.task_pred(t)] = labels[labels >= offset] - offset
        out[Keys.mapping(t)] = np.arange(size)
        out[Keys.refit(t)] = np.array([t])
        for s in range(t):
            out[Keys.refit_pred(t, s)] = out[Keys.val_pred(s)]
    return out


@pytest.mark.parametrize("source", ["wo/A", "wo/A_sample", "w/A", "w/A_sample", "wo_refit/A"])
def test_an_unweighted_resample_is_the_evaluators_value(source):
    stored = stored_run(np.random.default_rng(1), 30, 0.7)
    flavour, metric = source.split("/")
    expected = next(r.value for r in replay(stored) if (r.group, r.flavour, r.metric) == ("summary", flavour, metric))
    s = scorer(stored, source)
    assert s.score(np.ones(s.images))[0] == pytest.approx(expected, rel=1e-12)


def bootstrap(runs: dict, resamples: int = 400, source: str = "wo/A"):
    scorers = {key: scorer(stored, source) for key, stored in runs.items()}
    return scorers, bootstrap_scores(scorers, resamples, seed=0)


@pytest.mark.parametrize("source", ["wo/A", "w/A_sample"])
def test_a_method_against_itself_is_centred_at_zero_with_even_odds(source):
    rng = np.random.default_rng(2)
    runs = {("m", s): stored_run(rng, 40, 0.7) for s in range(3)}
    scorers, scores = bootstrap(runs, source=source)
    result = paired(scorers, scores, "m", "m")
    assert (result.diff, result.low, result.high, result.p_improvement) == (0.0, 0.0, 0.0, 0.5)
    assert (result.seeds, result.images, result.resamples) == (3, 400, 400)


def test_a_planted_five_point_difference_is_found():
    rng = np.random.default_rng(3)
    runs = {**{("better", s): stored_run(rng, 100, 0.75) for s in range(3)},
            **{("worse", s): stored_run(rng, 100, 0.70) for s in range(3)}}
    scorers, scores = bootstrap(runs)
    result = paired(scorers, scores, "better", "worse")
    assert result.diff == pytest.approx(5.0, rel=0.2)  # class-weighted: about 5 points, not exactly
    assert 0 < result.low < result.diff < result.high and result.p_improvement > 0.99
    assert paired(scorers, scores, "worse", "better").p_improvement < 0.01


def test_a_planted_zero_is_not_found():
    """The same accuracy on other images: the interval holds 0 and neither method is likely better."""
    rng = np.random.default_rng(4)
    n = 10 * 100
    runs = {}
    for s in range(3):
        for label in ("first", "second"):  # the same number wrong in each task, on other images
            wrong = np.concatenate([rng.choice(np.arange(0, 600), 180, replace=False),
                                    rng.choice(np.arange(600, n), 120, replace=False)])
            runs[(label, s)] = stored_run(rng, 100, 0.7, wrong)
    scorers, scores = bootstrap(runs)
    result = paired(scorers, scores, "first", "second")
    assert result.diff == pytest.approx(0.0, abs=1e-9)
    assert result.low < 0 < result.high and 0.2 < result.p_improvement < 0.8


def test_runs_on_other_images_are_not_paired():
    rng = np.random.default_rng(5)
    runs = {("a", 0): stored_run(rng, 10, 0.7), ("b", 0): stored_run(rng, 11, 0.7)}
    scorers, scores = bootstrap(runs, 50)
    assert paired(scorers, scores, "a", "b") is None


def test_a_difference_the_same_on_every_seed_is_not_called_significant():
    import warnings

    from bench.reporting.statistics import Options, comparisons

    def row(label, by_seed):
        return dict(split="2-step", dataset="d", metric="A", label=label, mean=float(np.mean(list(by_seed.values()))),
                    by_seed=by_seed)

    scores = pd.DataFrame([row("best", {0: 0.7, 1: 0.8, 2: 0.9}), row("same gap", {0: 0.5, 1: 0.6, 2: 0.7}),
                           row("tied", {0: 0.7, 1: 0.8, 2: 0.9}), row("varied", {0: 0.5, 1: 0.75, 2: 0.6})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: scipy's "Precision loss ..." warning, then p 0.000, "significant"
        table = comparisons(scores, Options()).set_index("method")
    assert math.isnan(table.loc["same gap", "p"]) and not table.loc["same gap", "significant"]
    assert math.isclose(table.loc["same gap", "diff"], -0.2, rel_tol=1e-9)
    assert table.loc["tied", "p"] == 1.0 and not table.loc["tied", "significant"]
    assert 0 < table.loc["varied", "p"] < 1


@pytest.fixture(scope="module")
def mixed_runs(tmp_path_factory):
    """Tiny runs of the mixed setting on generated images and pixels: K-means and NCM + k-means under Happy's
    5-stage protocol, two seeds, inductive; and K-means again scored transductively."""
    from bench.protocol.runner import execute
    from tests.helpers import tiny_specs

    root = tmp_path_factory.mktemp("mixed_bootstrap")
    sizes = {"dataset.num_classes": 12, "dataset.train_per_class": 20, "dataset.test_per_class": 4}
    specs = tiny_specs(methods=["K-means", "NCM + k-means"], splits=["happy-5-stage"], seeds=[0, 1], **sizes)
    specs += tiny_specs(methods=["K-means"], splits=["happy-5-stage"], **sizes, **{"setting.evaluation": "transductive"})
    return root, {spec.run_id: execute(spec, root) for spec in specs}


def test_a_mixed_runs_all_is_resampled_and_its_unweighted_resample_is_the_stored_all(mixed_runs):
    from bench.reporting.image_bootstrap import MixedScorer, load_scorer

    _, runs = mixed_runs
    for out in runs.values():
        metrics = pd.read_parquet(out / "metrics.parquet")
        stored_all = metrics[(metrics.group == "summary") & (metrics.metric == "All")]["value"].item()
        s = load_scorer(out, "cgcd/A")  # was refused: "a run of the mixed setting: its steps are not bootstrapped"
        assert isinstance(s, MixedScorer) and len(s.steps) == 5
        assert s.score(np.ones(s.images))[0] == pytest.approx(stored_all, rel=1e-12)
        twice = s.score(np.full((1, s.images), 2.0))[0]  # every image drawn twice: the same accuracies
        assert twice == pytest.approx(stored_all, rel=1e-12)


def test_the_report_fills_the_image_bootstrap_of_mixed_cells(mixed_runs):
    from bench.reporting.aggregate import final_scores
    from bench.reporting.load import load_metrics
    from bench.reporting.statistics import Options, compute

    root, runs = mixed_runs
    frame = load_metrics(sorted(runs.values()))
    stats = compute(frame, final_scores(frame), {d.name: d for d in runs.values()}, Options(resamples=200))
    assert not [line for line in stats.notes["bootstrap"] if "mixed setting" in line]
    a = stats.comparisons[(stats.comparisons["metric"] == "A") & (stats.comparisons["split"] == "happy-5-stage · draw 0")]
    assert len(a) == 1
    row = a.iloc[0]
    with np.load(next(iter(runs.values())) / "predictions.npz") as stored:  # every step's images: the last step's
        test_images = len(stored[Keys.test_labels(5)])
    assert row["images"] == test_images and row["boot_low"] <= row["diff"] <= row["boot_high"]
    assert 0.0 <= row["p_better"] <= 1.0

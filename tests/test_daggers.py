"""The tables' daggers, corrected for their number: every bold value is tested against its column's runner-up
(paired t-test over the seeds both have), the table's p-values are corrected together (Holm by default,
Benjamini–Hochberg with `--correction bh`), and a bold value keeps its dagger (not separable) where the corrected
p-value is not below 0.05. Hand-built tables where the uncorrected test, Holm and BH disagree."""
from __future__ import annotations

import math
import shutil

import pytest

from bench.reporting.aggregate import final_scores
from bench.reporting.stats import paired_pvalue, separable
from bench.reporting.table import render_table
from tests.test_report import compile_latex, frame_of, s


def p_of_three(d: tuple[float, float, float]) -> float:
    """The two-sided paired t-test's p-value of three differences by hand: with 2 degrees of freedom the t
    distribution's tail has a closed form, p = 1 − t / √(t² + 2)."""
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    t = abs(mean) / (sd / math.sqrt(3))
    return 1 - t / math.sqrt(t * t + 2)


# Best − Other over seeds 0, 1, 2 in two columns (datasets D1, D2): mean 3.3 and 2.8, sample std 1
SHIFTS = {"D1": 3.3, "D2": 2.8}


def two_columns():
    """Best beats Other in A on D1 (p ≈ 0.029) and D2 (p ≈ 0.040); F is the same for both (a tie: no test)."""
    entries = []
    for dataset, shift in SHIFTS.items():
        for seed, wobble in enumerate((-1.0, 0.0, 1.0)):
            entries.append(("Other", dataset, "2-step", seed, "wo", s(50.0, 10.0), [50.0]))
            entries.append(("Best", dataset, "2-step", seed, "wo", s(50.0 + shift + wobble, 10.0), [50.0]))
    return final_scores(frame_of(entries))


def rows_of(md: str) -> dict[str, str]:
    return {line.split("|")[2].strip(): line for line in md.splitlines()[2:] if line.startswith("|")}


def test_paired_pvalue_by_hand_and_its_agreement_with_the_interval():
    best, other = {0: 52.3, 1: 53.3, 2: 54.3}, {0: 50.0, 1: 50.0, 2: 50.0}
    assert paired_pvalue(best, other) == pytest.approx(p_of_three((2.3, 3.3, 4.3)), rel=1e-9)
    assert paired_pvalue(best, other) == pytest.approx(0.0292, abs=5e-4)
    assert paired_pvalue({0: 2.0, 1: 1.0}, {0: 1.0, 1: 2.0}) == pytest.approx(1.0)  # d = 1, −1: mean 0
    assert paired_pvalue({0: 3.0, 1: 4.0}, {0: 1.0, 1: 2.0}) == 0.0  # d = 2, 2: no spread at all
    assert paired_pvalue({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0}) == 1.0
    assert math.isnan(paired_pvalue({0: 5.0, 1: 6.0}, {1: 1.0, 2: 1.0}))  # one shared seed: no test
    assert math.isnan(paired_pvalue(float("nan"), {0: 1.0, 1: 2.0}))
    # uncorrected, p < 0.05 is exactly the 95% interval excluding 0 (the test the daggers used to be)
    for first, second in [(best, other), ({0: 3.0, 1: 4.0, 2: 5.0}, {0: 2.0, 1: 2.0, 2: 2.0}),
                          ({0: 2.0, 1: 1.0}, {0: 1.0, 1: 2.0}), ({0: 10.0, 1: 11.0, 2: 12.0}, {0: 2.0, 1: 2.0, 2: 2.0})]:
        assert (paired_pvalue(first, second) < 0.05) is separable(first, second)


def test_holm_marks_what_the_uncorrected_test_would_call_separable_and_bh_marks_fewer_than_holm(tmp_path):
    scores = two_columns()
    p = {dataset: p_of_three(tuple(shift + w for w in (-1.0, 0.0, 1.0))) for dataset, shift in SHIFTS.items()}
    assert p["D1"] == pytest.approx(0.0292, abs=5e-4) and p["D2"] == pytest.approx(0.0404, abs=5e-4)
    # each test alone (the uncorrected dagger): both bold values separable from the runner-up, no mark
    a = scores[scores["metric"] == "A"].set_index(["dataset", "label"])["by_seed"]
    assert all(separable(a[(d, "Best")], a[(d, "Other")]) for d in SHIFTS)

    # Holm over the 2 comparisons: 2 × 0.029 = 0.058, and 0.040 is held up to it: both ≥ 0.05, both marked
    holm = render_table(scores, "markdown")
    assert render_table(scores, "markdown", correction="holm") == holm  # Holm is the default
    best = rows_of(holm)["Best"]
    assert "**53.3 ± 1.0**†" in best and "**52.8 ± 1.0**†" in best and best.count("†") == 2  # F ties: bold, untested
    assert "†" not in rows_of(holm)["Other"]
    assert holm.rstrip().endswith("† not separable from the runner-up: corrected p ≥ 0.05 (paired t-test over the "
                                  "seeds both have, p-values corrected with Holm over the 2 comparisons of this "
                                  "table, each column's bold value against its runner-up).")

    # Benjamini–Hochberg: 0.040 × 2/2 = 0.040 and min(0.029 × 2/1, 0.040) = 0.040: both < 0.05, neither marked
    bh = render_table(scores, "markdown", correction="bh")
    assert "**53.3 ± 1.0** | **10.0 ± 0.0** | **52.8 ± 1.0** |" in rows_of(bh)["Best"] and "†" not in bh
    assert bh.rstrip().endswith("Each bold value tested differs from its runner-up beyond noise: corrected p < 0.05 "
                                "(paired t-test over the seeds both have, p-values corrected with Benjamini–Hochberg "
                                "over the 2 comparisons of this table, each column's bold value against its "
                                "runner-up).")

    tex = render_table(scores, "latex", caption="Tab.")
    assert tex.count(r"$^\dagger$") == 3  # two marks and the note's
    assert (r"$^\dagger$ not separable from the runner-up: corrected p $\geq$ 0.05 (paired t-test over the seeds "
            r"both have, p-values corrected with Holm over the 2 comparisons of this table") in tex
    bh_tex = render_table(scores, "latex", caption="Tab.", correction="bh")
    assert r"\dagger" not in bh_tex and "corrected p $<$ 0.05" in bh_tex and "Benjamini--Hochberg over the 2" in bh_tex
    if shutil.which("pdflatex"):
        for i, text in enumerate((tex, bh_tex)):
            (tmp_path / str(i)).mkdir()
            compile_latex(text, tmp_path / str(i), packages="booktabs,multirow")


def test_one_comparison_is_not_corrected_and_a_column_without_a_test_is_not_counted():
    scores = two_columns()
    one = scores[scores["dataset"] == "D2"]  # p ≈ 0.040 alone: below 0.05 under either correction
    for correction in ("holm", "bh"):
        md = render_table(one, "markdown", correction=correction)
        assert "†" not in md and "over the 1 comparison of this table" in md
    single = scores[scores["by_seed"].map(len) > 0].copy()
    single["by_seed"] = [{0: v[0]} for v in single["by_seed"]]  # one seed: nothing to test, no note
    md = render_table(single, "markdown")
    assert "†" not in md and "comparison" not in md


def test_an_unknown_correction_is_refused():
    with pytest.raises(ValueError, match="unknown correction 'bonferroni'; choose from holm, bh"):
        render_table(two_columns(), "markdown", correction="bonferroni")


def test_the_sites_tables_mark_the_same_cells_with_the_same_note():
    from bench.reporting.site.tables import _layout_table

    scores = two_columns()
    holm = _layout_table("t", scores, "comparison", [], {})
    assert holm.count('<sup title="not separable from the runner-up (corrected)">†</sup>') == 2
    assert "† not separable from the runner-up: corrected p ≥ 0.05" in holm and "Holm over the 2 comparisons" in holm
    bh = _layout_table("t", scores, "comparison", [], {}, "bh")
    assert "<sup" not in bh and "Benjamini–Hochberg over the 2 comparisons" in bh

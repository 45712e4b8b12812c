"""The tuning block (bench/reporting/tuning.py): a method's runs as its authors tune it beside its runs holding a bench
study's best values (`tuning.study`: their own split label, never averaged with the others), the gap over the seeds
both ran, in the report's `tuning.*` and on the site."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.errors import BenchError
from bench.protocol.runner import execute
from bench.reporting.load import load_metrics
from bench.reporting.site.tables import _tuning_section
from bench.reporting.tuning import tuning_table
from tests.helpers import tiny_specs

STUDY = {"tuning.study": "demo-Baseline-validation", "tuning.study_protocol": "validation 0.2",
         "tuning.study_trials": 4, "method.lr": 0.3}


def reported_a(out) -> float:
    frame = pd.read_parquet(out / "metrics.parquet")
    flavour, metric = frame["reported_A"].iloc[0].split("/")
    return float(frame[(frame.group == "summary") & (frame.flavour == flavour) & (frame.metric == metric)].value.iloc[0])


def test_the_report_sets_the_tuned_runs_beside_the_authors_with_the_gap(tmp_path):
    authors = [reported_a(execute(s, tmp_path)) for s in tiny_specs(seeds=(0, 1))]
    tuned_specs = tiny_specs(seeds=(0, 1), **STUDY)
    assert {s.split_label for s in tuned_specs} == {"2-step · tuned (validation 0.2, 4 trials)"}
    tuned = [reported_a(execute(s, tmp_path)) for s in tuned_specs]
    frame = load_metrics(sorted((tmp_path / "runs").iterdir()))
    (row,) = tuning_table(frame).to_dict("records")
    assert row["method"] == "Baseline" and row["split"] == "2-step" and row["seeds"] == "2 / 2"
    assert row["as its authors tune (their protocol)"] == "2-step"
    assert row["A (authors')"].startswith(f"{np.mean(authors):.1f} [")
    assert row["A (tuned)"].startswith(f"{np.mean(tuned):.1f} [")
    assert row["gap (tuned − authors')"].startswith(f"{np.mean(tuned) - np.mean(authors):.1f} [")
    # a report of the grid finds them beside its own runs
    from bench.config.selection import Selection
    from bench.execution.selection import runs_to_report
    from tests.helpers import TINY

    selected = runs_to_report(Selection("smoke", methods=["Baseline"], splits=["2-step"], seeds=[0, 1],
                                        backbones=["pixels"], results=tmp_path, cfg_options=TINY))
    assert sorted(d.name for d in selected.directories) == sorted(s.run_id for s in [*tiny_specs(seeds=(0, 1)),
                                                                                       *tuned_specs])
    site = _tuning_section(frame)
    assert 'id="tuning"' in site and row["A (tuned)"] in site
    assert _tuning_section(frame[~frame["split"].astype(str).str.contains("tuned")]) == ""  # nothing tuned: no block


def test_a_study_mark_without_its_protocol_or_with_a_holdout_is_refused():
    with pytest.raises(BenchError, match="takes tuning.study_protocol and tuning.study_trials >= 1"):
        tiny_specs(**{"tuning.study": "x"})
    with pytest.raises(BenchError, match="no tuning.holdout"):
        tiny_specs(**{**STUDY, "tuning.holdout": 0.2})

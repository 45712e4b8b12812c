"""`bench report`: load → aggregate → render. Pure functions over the long metrics table.

- `pipeline`: the report from end to end behind one entry point (`write_reports`), and `results_of`, its cells as
  pandas objects (`bench.results`);
- `load` (the metrics files of a selection of runs), `aggregate` (seeds to cells), `stats` (intervals, tests),
  `layouts` (the paper's tables' rows and columns), `table` (rendering), `compare` (beside the paper), `peers`
  (beside a mixed-setting peer's published tables), `cgcd` (the mixed setting's table), `plots` (radar, curves,
  accuracy matrices), `files` (a report's files),
  `per_class` (a run's classes and its old/new confusion, from its predictions, with the evaluator's Hungarian match),
  `site/` (the html report), `outcomes` (what a command says about finished runs: the leaderboard, failures, version
  warnings).

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features,
bench.runs, bench.protocol.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

# what `from bench.reporting import write_report` has always imported: from `files`, on first use, so that
# importing a light part of the package (`outcomes`, for `bench status`) does not import pandas
_FILES = ("write_report", "write_figures", "steps_figures")


def __getattr__(name: str) -> Any:
    if name in _FILES:
        return getattr(import_module("bench.reporting.files"), name)
    raise AttributeError(f"module 'bench.reporting' has no attribute {name!r}")

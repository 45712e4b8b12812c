"""`bench metrics recompute`: a finished run's metrics computed again, with the current evaluator,
from the predictions it stored (`bench.predictions`), without running it again.

Only the metric rows change: every other column of `metrics.parquet` (the run's identity and
provenance) is kept. The new file replaces the old one atomically, and only when a value changed;
recomputing twice changes nothing the second time. A run whose `metrics.parquet` is missing or
damaged gets the whole file rebuilt from its predictions (`bench.runner.rebuild_metrics`). A run
without stored predictions (recorded before they were kept) is listed and left as it is.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from bench.predictions import PREDICTIONS, replay
from bench.rundir import DONE, METRICS, unreadable
from bench.storage import atomic_path

KEYS = ["step", "group", "flavour", "metric"]


@dataclass
class Recomputed:
    run: Path
    status: str  # "unchanged", "changed", "rebuilt" (metrics.parquet unreadable), "not rebuilt" (its
    #              predictions unreadable too, or the run is being run), "no stored predictions"
    changed: list[str]  # "flavour/metric (group, step t): old → new", at most a few, for the report

    @property
    def n_changed(self) -> int:
        return len(self.changed)


def recompute_run(run: Path, write: bool = True) -> Recomputed:
    run = Path(run)
    if not (run / PREDICTIONS).exists():
        return Recomputed(run, "no stored predictions", [])
    damaged = unreadable(run).get(METRICS)
    if damaged is not None:  # missing or damaged: the whole file again from the predictions, not a re-run
        if not write:
            return Recomputed(run, "rebuilt", [f"{METRICS} unreadable ({damaged}): would be rebuilt"])
        from bench.runner import RunBusy, rebuild_metrics

        try:
            if rebuild_metrics(run) is None:
                return Recomputed(run, "not rebuilt", [f"{METRICS} unreadable ({damaged}) and cannot be rebuilt from "
                                                       f"{PREDICTIONS} (see its log.txt): `bench run` runs it again"])
        except RunBusy:
            return Recomputed(run, "not rebuilt", [f"{METRICS} unreadable ({damaged}); the run is being run"])
        return Recomputed(run, "rebuilt", [f"{METRICS} unreadable ({damaged}): rebuilt"])
    old = pd.read_parquet(run / METRICS)
    rows = pd.DataFrame([asdict(r) for r in replay(run / PREDICTIONS)])
    constant = {c: old[c].iloc[0] for c in old.columns if c not in KEYS + ["value"]}
    new = rows.assign(**constant)[list(old.columns)].astype(old.dtypes.to_dict())
    merged = old[KEYS + ["value"]].merge(new[KEYS + ["value"]], on=KEYS, how="outer", suffixes=("_old", "_new"))
    differs = ~((merged["value_old"] == merged["value_new"]) | (merged["value_old"].isna() & merged["value_new"].isna()))
    changed = [f"{r.flavour}/{r.metric} ({r.group}, step {r.step + 1}): {r.value_old:.4g} → {r.value_new:.4g}"
               for r in merged[differs].itertuples()]
    if not changed:
        return Recomputed(run, "unchanged", [])
    if write:
        with atomic_path(run / METRICS) as tmp:  # removed if the write fails (a full disk)
            new.to_parquet(tmp, index=False)
    return Recomputed(run, "changed", changed)


def finished_runs(results: Path) -> list[Path]:
    return sorted(p for p in (Path(results) / "runs").glob("*") if (p / DONE).exists())

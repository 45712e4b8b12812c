"""`bench metrics recompute`: a finished run's metrics computed again, with the current evaluator,
from the predictions it stored (`bench.predictions`), without running it again.

Only the metric rows change: every other column of `metrics.parquet` (the run's identity and
provenance) is kept. The new file replaces the old one atomically, and only when a value changed;
recomputing twice changes nothing the second time. A run whose `metrics.parquet` is missing or
damaged gets the whole file rebuilt from its predictions (`bench.runner.rebuild_metrics`). A run
without stored predictions (recorded before they were kept) is listed and left as it is; one whose
predictions cannot be read, or name another run (copied in), is skipped in one line and its metrics
are left as they are (predictions written before they named their run are recomputed as before).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from bench.errors import first_line
from bench.predictions import PREDICTIONS, ForeignFile, check_owner, replay
from bench.rundir import DONE, METRICS, unreadable
from bench.storage import atomic_path

KEYS = ["step", "group", "flavour", "metric"]


@dataclass
class Recomputed:
    run: Path
    status: str  # "unchanged", "changed", "rebuilt" (metrics.parquet unreadable), "not rebuilt" (its
    #              predictions unreadable too or another run's, or the run is being run), "no stored
    #              predictions", "skipped" (its predictions unreadable or another run's: metrics kept)
    changed: list[str]  # "flavour/metric (group, step t): old → new", at most a few, for the report

    @property
    def n_changed(self) -> int:
        return len(self.changed)


def recompute_run(run: Path, write: bool = True) -> Recomputed:
    run = Path(run)
    if not (run / PREDICTIONS).exists():
        return Recomputed(run, "no stored predictions", [])
    refused = _refused(run)
    damaged = unreadable(run).get(METRICS)
    if damaged is not None:  # missing or damaged: the whole file again from the predictions, not a re-run
        if refused is not None:
            return Recomputed(run, "not rebuilt", [f"{METRICS} unreadable ({damaged}) and not rebuilt: {refused}; "
                                                   f"`bench run` runs it again"])
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
    if refused is not None:
        return Recomputed(run, "skipped", [f"{refused}; its metrics are left as they are"])
    try:
        rows = pd.DataFrame([asdict(r) for r in replay(run / PREDICTIONS)])
    except Exception as err:  # a damaged file: numpy and zipfile raise many types
        return Recomputed(run, "skipped", [f"cannot read {run / PREDICTIONS} ({first_line(err)}); its metrics are "
                                           f"left as they are"])
    old = pd.read_parquet(run / METRICS)
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


def _refused(run: Path) -> str | None:
    """Why the run's stored predictions cannot be recomputed as its metrics (they name another run, or
    cannot be read), in one line; None when they can."""
    try:
        check_owner(run / PREDICTIONS, run.name)  # a run directory is named by its run id
    except ForeignFile as err:
        return str(err)
    except Exception as err:  # a damaged file: numpy and zipfile raise many types
        return f"cannot read {run / PREDICTIONS} ({first_line(err)})"
    return None


def finished_runs(results: Path) -> list[Path]:
    return sorted(p for p in (Path(results) / "runs").glob("*") if (p / DONE).exists())

"""`bench metrics recompute`: a finished run's metrics computed again, with the current evaluator,
from the predictions it stored (`bench.runs.predictions`), without running it again.

Only the metric rows change: every other column of `metrics.parquet` (the run's identity and
provenance) is kept. The new file replaces the old one atomically, and only when a value changed;
recomputing twice changes nothing the second time. A run whose `metrics.parquet` is missing,
damaged or not its own (another run's rows copied in, columns missing: `bench.runs.rundir.unreadable`) gets
the whole file rebuilt from its predictions (`rebuild_metrics`, also when a run finds its own
metrics damaged: a re-run costs GPU-hours). A run
without stored predictions (recorded before they were kept) is listed and left as it is; one whose
predictions cannot be read, name another run (copied in) or are of a schema newer than this bench reads, is
skipped in one line and its metrics are left as they are (predictions written before they named their run, or
their schema version, are recomputed as before).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from bench.config.spec import RunSpec
from bench.core.provenance import VERSION_COLUMNS, utc_now
from bench.core.storage import atomic_path, write_atomic
from bench.errors import first_line
from bench.protocol.steps import replay as replay_stored, reported_of
from bench.runs import predictions
from bench.runs.metrics_file import metrics_frame, write_metrics
from bench.runs.predictions import PREDICTIONS, ForeignFile, NewerSchema, check_owner, opened
from bench.runs.provenance_file import read_provenance
from bench.runs.rows import MetricRow
from bench.runs.rundir import DONE, METRICS, RunBusy, set_aside, unreadable
from bench.runs.runstore import Log, locked

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
    if damaged is not None:  # missing, damaged or another run's: the whole file again from the predictions, not a re-run
        if refused is not None:
            return Recomputed(run, "not rebuilt", [f"{METRICS} unreadable ({damaged}) and not rebuilt: {refused}; "
                                                   f"`bench run` runs it again"])
        if not write:
            return Recomputed(run, "rebuilt", [f"{METRICS} unreadable ({damaged}): would be rebuilt from its stored "
                                               f"predictions"])
        kept = (run / METRICS).exists()  # set aside by the rebuild, never deleted
        try:
            if rebuild_metrics(run) is None:
                return Recomputed(run, "not rebuilt", [f"{METRICS} unreadable ({damaged}) and cannot be rebuilt from "
                                                       f"{PREDICTIONS} (see its log.txt): `bench run` runs it again"])
        except RunBusy:
            return Recomputed(run, "not rebuilt", [f"{METRICS} unreadable ({damaged}); the run is being run"])
        return Recomputed(run, "rebuilt", [f"{METRICS} unreadable ({damaged}): rebuilt from its stored predictions"
                                           + (", the file it replaces kept aside in the run directory" if kept else "")])
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
    except (ForeignFile, NewerSchema) as err:
        return str(err)
    except Exception as err:  # a damaged file: numpy and zipfile raise many types
        return f"cannot read {run / PREDICTIONS} ({first_line(err)})"
    return None


def finished_runs(results: Path) -> list[Path]:
    return sorted(p for p in (Path(results) / "runs").glob("*") if (p / DONE).exists())


def replay(path: Path) -> list[MetricRow]:
    """The metric rows the current evaluator gives for a run's stored predictions (`path`), summary included."""
    with opened(path) as stored:
        return replay_stored(stored)


def rebuild_metrics(out: Path) -> str | None:
    """`metrics.parquet` of the finished run `out` rebuilt from its `predictions.npz` when the metrics
    are its only unreadable file; None when it is readable or cannot be rebuilt (the run must run again)."""
    with locked(out):
        bad = unreadable(out) if (out / DONE).exists() else {}
        log = Log(out / "log.txt", echo=False)
        return bad.get(METRICS) if bad and repaired(out, bad, log) else None


def repaired(out: Path, bad: dict[str, str], log: Log) -> bool:
    """Whether a finished run whose only unreadable file is `metrics.parquet` got it back from what its
    evaluator was given (`predictions.npz`), without running again."""
    if set(bad) != {METRICS} or not (out / predictions.PREDICTIONS).exists():
        return False
    try:
        frame = rebuilt_frame(out)
    except NewerSchema:  # a newer bench's run: running it again here would overwrite what that bench wrote
        raise
    except Exception as err:  # damaged predictions too: numpy and zipfile raise many types
        log(f"cannot rebuild {METRICS} from {predictions.PREDICTIONS} ({first_line(err)}); running again")
        return False
    aside = set_aside(out, [METRICS])  # the DONE marker goes with it, and comes back below
    write_metrics(out, frame)
    write_atomic(out / DONE, utc_now() + "\n")
    log(f"{METRICS} unreadable ({bad[METRICS]}): moved to {aside.name}/, rebuilt from {predictions.PREDICTIONS} "
        f"without running again")
    return True


def rebuilt_frame(out: Path) -> pd.DataFrame:
    """The metrics frame of a finished run from its spec.json and predictions.npz, with the training's
    provenance (host, device, SLURM job, versions, times) the predictions keep; predictions written before they
    kept it leave those columns `unknown` (duration NaN, started/ended the rebuild's time). `rebuilt_from` names
    the source.
    Predictions that name another run (copied in) raise `ForeignFile`; ones written before predictions
    named their run are accepted as before."""
    spec = RunSpec.from_json((out / "spec.json").read_text())
    predictions.check_owner(out / predictions.PREDICTIONS, spec.run_id)  # another run's: refused, not its metrics
    rows = replay(out / predictions.PREDICTIONS)
    frame = metrics_frame(spec, rows, torch.device("cpu"), utc_now(), float("nan"), _logged_mapping_images(out),
                          reported_of(spec))
    # the version columns (the device among them) are the training's, not the rebuild's: kept with the predictions
    # since they keep them, else unknown
    kept = read_provenance(out, spec.run_id)
    if kept is not None:
        # kept before runs recorded their GPU: unknown, not the rebuild's ""
        return frame.assign(**{"gpu": "unknown", **{k: v for k, v in kept.items() if k in frame}},
                            rebuilt_from=predictions.PREDICTIONS)
    return frame.assign(host="unknown", gpu="unknown", slurm_job_id="unknown", **dict.fromkeys(VERSION_COLUMNS, "unknown"),
                        rebuilt_from=predictions.PREDICTIONS)


def _logged_mapping_images(out: Path) -> str:
    """Which images froze the task mappings, as the run logged it ("unknown" without its log)."""
    path = out / "log.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    said = [line for line in lines if "task mappings frozen on the " in line]
    return ("val" if "held-out validation" in said[-1] else "train") if said else "unknown"


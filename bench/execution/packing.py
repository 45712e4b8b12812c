"""Packed SLURM jobs: several runs in one array task, run one after another by one warm process.

A 10-second run on the feature bank does not deserve a scheduling slot and a fresh import of the stack (about
6 s); clusters also cap arrays (MaxArraySize, MaxSubmitJobs). `bench run --cluster slurm --pack N` puts N runs in
each task; `--pack auto` fills each task up to a target length (`--pack-hours`, at most 80% of the profile's
`timeout_min`) by the cost model's estimate per run (`bench.execution.cost`).

A task is a `SlurmPack`, a submitit `Checkpointable`: a time limit or a preemption requeues it with the same
runs, and it skips those already done (and those that failed in an earlier attempt of the task: a failure is
not retried by a requeue), so it resumes what it had not finished, the run in flight from its last checkpoint.
`bench status` and `bench cancel` speak of runs: the task writes which run it is on
(`<results>/submitit/packs/<task>.current`), and a cancel that names only some of a task's runs leaves the
others running and lists the cancelled ones in `<task>.skip`, which the task reads before each run.
"""
from __future__ import annotations

import math
import sys
import os
from pathlib import Path
from typing import Sequence

import submitit

from bench.config.spec import RunSpec
from bench.errors import BenchError, ascii_digits
from bench.execution.cost import FLOOR_S, run_seconds
from bench.execution.job_exit import end_job_without_teardown

PACKS = ("submitit", "packs")  # under the results folder
DEFAULT_HOURS = 4.0  # `--pack auto`'s target task length
FILL = 0.8  # of the profile's time limit, at most, that an auto pack is planned to take


def parse_pack(value: str | int | None) -> int | str | None:
    """`--pack N` (runs per task) or `--pack auto`; None: one run per task."""
    if value is None or isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if str(value) == "auto":
        return "auto"
    if ascii_digits(value) and int(value) >= 1:  # `²` is a digit to isdigit, not to int
        return int(value)
    raise BenchError(f"--pack {value}: give the runs per array task (an integer >= 1) or auto (tasks of about "
                     f"--pack-hours each, by the cost model)")


def pack_runs(specs: Sequence[RunSpec], pack: int | str, *, hours: float = DEFAULT_HOURS,
              timeout_min: float | None = None) -> list[list[RunSpec]]:
    """The runs of one resource group cut into array tasks: `pack` runs each, or ("auto") as many as fit
    `hours` (and 80% of `timeout_min`) by the cost model, a run longer than that alone. Runs of one dataset and
    backbone stay together (they read the same banks), in the grid's order otherwise."""
    if hours <= 0:
        raise BenchError(f"--pack-hours {hours}: must be > 0")
    order = sorted(range(len(specs)), key=lambda i: (specs[i].dataset, specs[i].backbone, i))
    ordered = [specs[i] for i in order]
    if pack != "auto":
        size = int(pack)
        return [ordered[i: i + size] for i in range(0, len(ordered), size)]
    budget = hours * 3600 if not timeout_min else min(hours * 3600, FILL * timeout_min * 60)
    packs: list[list[RunSpec]] = []
    filled = math.inf
    for spec in ordered:
        seconds = run_seconds(spec) or FLOOR_S
        if filled + seconds > budget:
            packs.append([])
            filled = 0.0
        packs[-1].append(spec)
        filled += seconds
    return packs


def packs_dir(results: Path) -> Path:
    return Path(results).joinpath(*PACKS)


def current_run(results: Path, job_id: str) -> str | None:
    """The run a packed task is on now (None between runs, or before it started)."""
    try:
        return (packs_dir(results) / f"{job_id}.current").read_text().strip() or None
    except OSError:
        return None


def skipped(results: Path, job_id: str) -> set[str]:
    """The runs of a packed task that `bench cancel` took out of it."""
    try:
        return set((packs_dir(results) / f"{job_id}.skip").read_text().split())
    except OSError:
        return set()


def skip(results: Path, job_id: str, run_ids: Sequence[str]) -> None:
    """Take runs out of a packed task that goes on with its others: it reads the list before each run."""
    folder = packs_dir(results)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{job_id}.skip").open("a") as fh:
        fh.write("".join(f"{run_id}\n" for run_id in run_ids))


class SlurmPack(submitit.helpers.Checkpointable):
    """Several runs as one SLURM array task, one after another in this process. Requeued with the same
    arguments (and the runs that failed in this task so far, `failed`) on a time limit or a preemption."""

    def __init__(self, include: Sequence[str | os.PathLike[str]] = ()) -> None:
        self.include = tuple(str(d) for d in include)
        self.failed: list[str] = []  # run ids: pickled with the requeue, so a failure is not retried by it

    def __call__(self, spec_jsons: Sequence[str], results: str) -> str:
        from bench.protocol.runner import execute
        from bench.registries import plugins
        from bench.runs.rundir import RunBusy, is_done

        plugins.use(self.include)
        plugins.load()
        job_id = _job_id()
        marker = packs_dir(Path(results)) / f"{job_id}.current"
        marker.parent.mkdir(parents=True, exist_ok=True)
        specs = [RunSpec.from_json(text) for text in spec_jsons]
        for i, spec in enumerate(specs):
            if spec.run_id in self.failed or spec.run_id in skipped(Path(results), job_id) or is_done(Path(results), spec):
                continue
            marker.write_text(spec.run_id)
            print(f"bench pack {job_id}: run {i + 1}/{len(specs)} {spec.run_id} ({spec.describe()})", flush=True)
            try:
                execute(spec, Path(results), echo=True)
            except RunBusy:
                continue  # run by another process (a second submission): not this task's to finish
            except Exception as err:  # its error.txt says why; the pack goes on with its other runs
                self.failed.append(spec.run_id)
                print(f"bench pack {job_id}: run {spec.run_id} FAILED: {type(err).__name__}: {err}", flush=True)
        marker.unlink(missing_ok=True)
        if self.failed:  # the task fails, so SLURM says so; its runs that finished are done all the same
            print(f"bench pack {job_id}: {len(self.failed)} of {len(specs)} runs failed: {', '.join(self.failed)}",
                  file=sys.stderr, flush=True)
            raise RuntimeError(f"{len(self.failed)} of the task's {len(specs)} runs failed: {', '.join(self.failed)}")
        end_job_without_teardown()
        return "done"


def _job_id() -> str:
    """This task's id as `bench status` knows it (`<array>_<task>`), from submitit's view of the job."""
    try:
        return str(submitit.JobEnvironment().job_id)
    except RuntimeError:  # not in a SLURM job (a test calling the pack in-process)
        return "local"


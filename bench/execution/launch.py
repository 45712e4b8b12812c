"""`bench run` from end to end, behind one entry point, `launch(selection, options)`: the selection's runs not
yet done, checked (`preflight`), then run where `options.cluster` says (`scheduler`: the local pool or in-process;
`slurm`: job arrays), or planned (`plan`: a dry run); the leaderboard and the failures said at the end
(`bench.reporting.outcomes`). `bench.run` and `bench run` are this function behind their options.

Importing this module imports nothing heavy: each step imports what it needs.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from bench.config.selection import (DEFAULT_RESULTS, Options, PathLike, Selection, flag_of, names_of, number_of,
                                    options_of, whole_of)
from bench.errors import BenchError
from bench.execution import plan
from bench.execution.preflight import (check_caches, check_cluster, check_device, check_inputs, check_pack,
                                       check_splits, check_tail_backbones, check_timm_models, local_slots)
from bench.execution.selection import expand_selection
from bench.reporting.outcomes import error_line, print_leaderboard, report_failures


@dataclass(frozen=True)
class RunOptions:
    """How and where `bench run` runs a selection (`bench run --help` says what each option does); the field
    names are the command's option names."""

    cluster: str = "local"
    workers: int | None = None
    gpus: Sequence[str] | str | None = None
    runs_per_gpu: int = 1
    device: str | None = None
    threads: int | None = None
    read_ahead: bool | None = None
    weights_dir: PathLike | None = None
    force: bool = False
    retry_failed: bool = False
    dry_run: bool = False
    profile: str = "default"
    slurm_options: Options | None = None
    wait: bool = False
    pack: int | str | None = None
    pack_hours: float = 4.0
    trackers: Sequence[str] | None = None

    def __post_init__(self) -> None:
        # lists as tuples, and "none given" one value: the command's empty lists are the API's None. What needs
        # the cluster's checks first (`slurm_options` are read for SLURM alone) is checked where it is used.
        object.__setattr__(self, "trackers", names_of(self.trackers, "trackers", empty=True) or ())
        # counts, hours and flags as given, not coerced: threads=1.5 would be recorded as 1.5 and run on 1 thread
        for name in ("workers", "threads"):
            whole_of(getattr(self, name), name)
        whole_of(self.runs_per_gpu, "runs_per_gpu")
        object.__setattr__(self, "pack_hours", number_of(self.pack_hours, "pack_hours"))
        for name in ("force", "retry_failed", "dry_run", "wait"):
            flag_of(getattr(self, name), name)
        for name in ("cluster", "profile"):
            if not isinstance(getattr(self, name), str):
                raise BenchError(f"bad {name}={getattr(self, name)!r}: a name (a string)")
        if self.slurm_options is None or isinstance(self.slurm_options, list):
            object.__setattr__(self, "slurm_options", tuple(self.slurm_options or ()))
        if isinstance(self.gpus, list):
            object.__setattr__(self, "gpus", tuple(self.gpus))


@dataclass(frozen=True)
class RunOutcome:
    """What `bench.run` did. `exit_code` is the command's exit status: 0 when every run it started
    finished (or, with `dry_run` or SLURM without `wait`, when everything was planned or submitted)."""

    grid: str
    results: Path
    specs: tuple[Any, ...]  # every selected run (RunSpec)
    already_done: tuple[Any, ...]  # done before this call
    pending: tuple[Any, ...]  # what ran, was submitted, or would run (dry_run)
    done: tuple[Any, ...] = ()  # finished by this call (local clusters, or SLURM with wait)
    failed: tuple[tuple[Any, str], ...] = ()  # (spec, first line of its error)
    busy: tuple[Any, ...] = ()  # skipped: being run elsewhere
    jobs: tuple[tuple[str, int, str], ...] = ()  # SLURM: (job id, runs, resources) of each job array
    exit_code: int = 0
    elsewhere: tuple[Any, ...] = ()  # pending, then finished by another process (a `bench worker`) meanwhile

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def finished(self) -> tuple[Any, ...]:
        """Every selected run that is finished now: done before this call, by it, or by another process while it
        ran (`done` alone is empty when everything was done already)."""
        return self.already_done + self.done + self.elsewhere


def launch(selection: Selection, options: RunOptions) -> RunOutcome:
    """Run `selection` as `options` say. Every check (names, splits, devices, backbones, data and weight files,
    cache space) is made before anything is written."""
    started = time.monotonic()  # the SLURM plan's time includes expanding the grid
    from bench.runs.rundir import DONE, ERROR, check_writable, invalidate, is_done, run_dir, unreadable

    o, results = options, selection.results
    check_cluster(o.cluster, o.workers, o.threads)
    check_device(o.device, o.cluster)
    slots = local_slots(o.cluster, o.gpus, o.runs_per_gpu, o.device, o.workers)
    pack = check_pack(o.cluster, o.pack, o.pack_hours)
    loaded, specs = expand_selection(selection, device=o.device, read_ahead=o.read_ahead, threads=o.threads,
                                     weights_dir=o.weights_dir, trackers=list(o.trackers or ()))
    check_splits(specs)
    check_tail_backbones(specs)
    check_timm_models(specs)
    done = [s for s in specs if is_done(results, s)]
    for spec in specs if not o.dry_run else ():
        out = run_dir(results, spec)
        if spec not in done and (out / DONE).exists() and _rebuild_metrics(out):
            done.append(spec)
    finished = {s.run_id for s in done}
    for spec in specs:
        out = run_dir(results, spec)
        if spec.run_id not in finished and (out / DONE).exists():  # marked done, but cannot be read back
            bad = "; ".join(f"{out / name}: {why}" for name, why in unreadable(out).items())
            print(f"bench: warning: run {spec.run_id} ({spec.describe()}) is marked done but cannot be read back "
                  f"({bad}); it runs again, its damaged files kept aside in the run directory", file=sys.stderr)
    if o.force:
        pending = specs
    elif o.retry_failed:
        pending = [s for s in specs if s.run_id not in finished and (run_dir(results, s) / ERROR).exists()]
    else:
        pending = [s for s in specs if s.run_id not in finished]
    if not o.dry_run:
        check_inputs(pending)
        check_caches(results, pending)
    outcome = RunOutcome(loaded.name, results, tuple(specs), tuple(done), tuple(pending))
    shown_backbone, label = selection.shown_backbone(loaded), selection.label(loaded.name)
    if o.cluster == "slurm":
        return _run_slurm(outcome, loaded, o, started=started, shown_backbone=shown_backbone, pack=pack, label=label)
    if o.dry_run:
        plan.print_local(label, specs, done, pending, o.workers, slots)
        return outcome
    check_writable(results)
    if not pending:
        what = "no failed runs to retry" if o.retry_failed else "nothing to run (--force re-runs them)"
        print(f"{label}: {len(done)} of {len(specs)} runs already done, {what}"
              if len(done) < len(specs) else f"{label}: all {len(specs)} runs already done, {what}")
        print_leaderboard(results, specs, shown_backbone)
        return outcome
    for spec in pending if o.force else ():
        invalidate(results, spec)
    print(f"{label}: {len(specs)} runs, {len(specs) - len(pending)} already done, "
          f"running {len(pending)} on {o.cluster}")
    start = time.monotonic()
    from bench.execution.scheduler import run_specs
    from bench.execution.workers import sigterm_stops

    with sigterm_stops():  # a closed session's or `timeout`'s SIGTERM stops the runs as Ctrl-C does
        ran = run_specs(pending, results, cluster=o.cluster, max_parallel=o.workers, gpus=slots)
    busy = f", {len(ran.busy)} skipped (being run elsewhere)" if ran.busy else ""
    # what this process ran, apart from what other processes (`bench worker`s) finished while it ran
    ran_here = (f"{len(ran.done)} done here, {len(ran.elsewhere)} finished meanwhile by other processes (`bench "
                f"worker` or another `bench run` on these results)" if ran.elsewhere else f"{len(ran.done)} done")
    print(f"{ran_here}, {len(ran.failed)} failed{busy} in {time.monotonic() - start:.1f}s")
    print_leaderboard(results, specs, shown_backbone)
    return replace(outcome, done=tuple(ran.done), failed=tuple(ran.failed), busy=tuple(ran.busy),
                   elsewhere=tuple(ran.elsewhere), exit_code=report_failures(results, ran.failed))


def _rebuild_metrics(out: Path) -> bool:
    """A finished run whose metrics.parquet alone is unreadable gets it back from its stored
    predictions, here and now (seconds on the CPU), instead of running again (GPU-hours)."""
    from bench.runs.predictions import PREDICTIONS
    from bench.runs.rundir import METRICS, RunBusy, unreadable

    if set(unreadable(out)) != {METRICS} or not (out / PREDICTIONS).exists():
        return False  # nothing to rebuild from: no torch imported for it
    from bench.protocol.recompute import rebuild_metrics

    try:
        why = rebuild_metrics(out)
    except RunBusy:
        return False
    if why is not None:
        print(f"bench: warning: run {out.name}: {out / METRICS} could not be read ({why}); rebuilt from its "
              f"{PREDICTIONS} without running again, the damaged file kept aside in the run directory", file=sys.stderr)
    return why is not None


def _run_slurm(outcome: RunOutcome, grid: Any, o: RunOptions, *, started: float, shown_backbone: str,
               pack: int | str | None, label: str) -> RunOutcome:
    from bench.execution import slurm
    from bench.runs.rundir import check_writable, invalidate

    results, specs, pending = outcome.results, list(outcome.specs), list(outcome.pending)
    profile = slurm.load_profile(o.profile)
    overrides = options_of(o.slurm_options)
    chunks = slurm.plan(pending, profile, overrides, pack=pack, pack_hours=o.pack_hours)
    if o.dry_run:
        plan.print_slurm(label, specs, pending, chunks, profile, time.monotonic() - started, pack,
                         slurm.resources_line)
        return outcome
    check_writable(results)
    if not pending:
        print(f"{label}: all {len(specs)} runs already done, nothing to submit")
        print_leaderboard(results, specs, shown_backbone)
        return outcome
    for spec in pending if o.force else ():
        invalidate(results, spec)
    sub = slurm.submit(pending, results, profile, overrides, grid.name, pack=pack, pack_hours=o.pack_hours)
    submitted = sum(n for _, n, _, _ in sub.arrays)
    print(f"{label}: submitted {submitted} runs in {len(sub.arrays)} job array(s) with profile {profile.path} "
          f"({sub.skipped_active} already queued or running) in {time.monotonic() - started:.1f}s")
    for job_id, n, summary, tasks in sub.arrays:
        print(f"  job {job_id}: {n} runs" + (f" in {tasks} packed task(s)" if pack is not None else "") + f" ({summary})")
    outcome = replace(outcome, jobs=tuple((str(j), n, s) for j, n, s, _ in sub.arrays))
    if not o.wait:
        print(f"follow with: bench status --grid {grid.name}" + (f" --results {results}" if results != DEFAULT_RESULTS else ""))
        return outcome
    final = slurm.wait(results, specs)
    print_leaderboard(results, specs, shown_backbone)
    failed = [(s, error_line(results, s)) for s in final.states.get("failed", [])]
    return replace(outcome, done=tuple(final.states.get("done", [])), failed=tuple(failed),
                   exit_code=report_failures(results, failed))


def launch_batched(selections: Sequence[Selection], options: RunOptions) -> list[Path]:
    """The runs of several selections (a batch of `bench tune --batch`'s trials) in this process, those that may
    step together in one batch (`bench.protocol.batched`), after `launch`'s checks. Their run directories."""
    from bench.protocol.batched import execute_batch

    specs = [spec for selection in selections
             for spec in expand_selection(selection, device=options.device, threads=options.threads,
                                          weights_dir=options.weights_dir)[1]]
    check_splits(specs)
    check_inputs(specs)
    check_caches(selections[0].results, specs)
    return execute_batch(specs, selections[0].results)

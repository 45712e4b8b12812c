"""SLURM: resource profiles, job-array submission, status, cancel and requeue.

The filesystem is the source of truth. `submit` appends one line per run to
`<results>/submissions.jsonl` (run id → job id, submitit folder) and returns; `status` reads that
manifest and the run directories, asking SLURM with one batched `sacct` call (falling back to the
run directories alone where accounting is unavailable), so it works from any shell, later.

Each job runs `SlurmRun`, a submitit `Checkpointable`: on a time limit or a preemption submitit
requeues it with the same arguments and the runner resumes from the run's last finished step.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import submitit

from bench.registries import plugins
from bench.execution import packing
from bench.execution.job_exit import end_job_without_teardown
from bench.execution.pull import ATTEMPTS
from bench.errors import BenchError, unknown
from bench.runs.rundir import DONE, ERROR, RunBusy, is_done, run_dir
from bench.config.spec import RunSpec

MANIFEST = "submissions.jsonl"
STATES = ("done", "failed", "running", "pending", "cancelled", "unsubmitted")
ACTIVE_SACCT = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED",
                "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING", "PREEMPTED"}


# --------------------------------------------------------------------------- profiles

@dataclass(frozen=True)
class Profile:
    name: str
    default: Mapping[str, Any]
    methods: Mapping[str, Mapping[str, Any]]
    max_array_size: int
    array_parallelism: int
    max_requeues: int
    path: str = ""  # the file it was read from (a profile is Python bench runs: say which)

    def params_for(self, method: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.default, **self.methods.get(method, {}), **overrides}


def profile_dirs() -> list[Path]:
    """`./slurm/profiles` (the user's checkout or working directory) first, then bench's own. A profile is a
    Python file that bench runs to read it (an mmengine config): one in the working directory's folder runs
    with a plain `--profile NAME`, so the file loaded is always named (`Profile.path`)."""
    from bench.core.resources import resource_dir

    return [Path.cwd() / "slurm" / "profiles", resource_dir("slurm_profiles")]


def load_profile(name: str) -> Profile:
    path = Path(name)
    if not path.suffix:
        path = next((d / f"{name}.py" for d in profile_dirs() if (d / f"{name}.py").is_file()), path)
    if not path.is_file():
        known = sorted({p.stem for d in profile_dirs() if d.is_dir() for p in d.glob("*.py")})
        raise unknown("SLURM profile", name, known)
    from bench.config.spec import read_config_file

    cfg = read_config_file(str(path), "SLURM profile")
    return Profile(name=path.stem, default=cfg.get("default", {}), methods=cfg.get("methods", {}),
                   max_array_size=int(cfg.get("max_array_size", 1000)),
                   array_parallelism=int(cfg.get("array_parallelism", 64)),
                   max_requeues=int(cfg.get("max_requeues", 3)), path=str(path.resolve()))


def validate_params(params: Mapping[str, Any]) -> None:
    """Refuse keys submitit does not know before anything is submitted, listing the valid ones."""
    from submitit.auto.auto import AutoExecutor
    from submitit.slurm.slurm import SlurmExecutor

    probe = AutoExecutor(folder=Path("/nonexistent/bench-validate"), cluster="debug")
    try:
        probe.update_parameters(**params)
    except (NameError, ValueError, TypeError) as err:
        shared = sorted(AutoExecutor._valid_parameters())
        slurm = sorted(f"slurm_{k}" for k in SlurmExecutor._valid_parameters())
        bad = next((k for k in params if k not in shared and k not in slurm), None)
        what = f"unknown SLURM option {bad!r}" if bad else f"bad SLURM options ({str(err).splitlines()[0]})"
        raise BenchError(f"{what}; valid options: {', '.join(shared + slurm)}") from None


# --------------------------------------------------------------------------- jobs

class SlurmRun(submitit.helpers.Checkpointable):
    """One run as a SLURM job. Requeued with the same arguments on timeout or preemption; the
    runner's per-step checkpoint makes the requeued job continue where this one stopped.

    It carries the plugin folders of the command that submitted it (`include`, pickled with it and
    with a requeue) and imports them, and its environment's entry points, before the run."""

    def __init__(self, include: Sequence[str | os.PathLike[str]] = ()) -> None:
        self.include = tuple(str(d) for d in include)

    def __call__(self, spec_json: str, results: str) -> str:
        from bench.registries import plugins
        from bench.protocol.runner import execute

        plugins.use(self.include)
        plugins.load()  # a broken plugin: one warning line in the job's log, and the run says which name

        # the run's compute threads are its own (`--threads`, set by the runner), not the node's cores;
        # what else sizes itself from the machine (image decoding) asks `numerics.available_cores()`,
        # which reads SLURM_CPUS_PER_TASK
        try:
            execute(RunSpec.from_json(spec_json), Path(results), echo=True)
        except RunBusy:
            end_job_without_teardown()
            return "busy"
        end_job_without_teardown()  # only after success: a failing job keeps its exit status
        return "done"


# --------------------------------------------------------------------------- manifest

def _manifest(results: Path) -> Path:
    return Path(results) / MANIFEST


def record(results: Path, entries: Iterable[Mapping[str, Any]]) -> None:
    with _manifest(results).open("a") as fh:
        for entry in entries:
            fh.write(json.dumps(entry, sort_keys=True) + "\n")


def latest_jobs(results: Path) -> dict[str, dict[str, Any]]:
    """The newest submission of every run id."""
    path = _manifest(results)
    latest: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                latest[entry["run_id"]] = entry
    return latest


# --------------------------------------------------------------------------- sacct

def sacct_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """State of each job id (`123` or `123_4`) from ONE sacct call; None if accounting is unavailable."""
    if not job_ids:
        return {}
    if shutil.which("sacct") is None:
        return None
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(arrays)],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    states: dict[str, str] = {}
    for line in out.stdout.splitlines():
        job, _, state = line.partition("|")
        state = state.split()[0] if state else "UNKNOWN"
        if "[" in job:  # a pending array range such as 123_[4-9%2]: expand it
            base, _, spec = job.partition("_[")
            for part in spec.rstrip("]").split("%")[0].split(","):
                lo, _, hi = part.partition("-")
                for i in range(int(lo), int(hi or lo) + 1):
                    states[f"{base}_{i}"] = state
        else:
            states[job] = state
    return states


def run_state(results: Path, spec: RunSpec, job: Mapping[str, Any] | None, sacct: Mapping[str, str] | None) -> str:
    out = run_dir(results, spec)
    if is_done(results, spec):
        return "done"
    if job is None:  # never submitted; a pull worker's claim (`bench worker`) makes it running
        return "failed" if (out / ERROR).exists() else "running" if (out / ATTEMPTS).exists() else "unsubmitted"
    state = (sacct or {}).get(job["job_id"])
    if job.get("packed") and spec.run_id in packing.skipped(results, job["job_id"]):
        return "cancelled"  # taken out of its packed task, which goes on with its other runs
    if job.get("packed") and state == "RUNNING" and packing.current_run(results, job["job_id"]) != spec.run_id:
        return "pending"  # its task runs another of its runs now; this one waits its turn
    if state in ACTIVE_SACCT:
        return "pending" if state in ("PENDING", "REQUEUED", "REQUEUE_HOLD") else "running"
    if state and state.startswith("CANCELLED"):
        return "cancelled"
    if (out / ERROR).exists() or state in ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
                                              "DEADLINE", "COMPLETED"):
        return "failed"
    if sacct is None:  # no accounting: the run directory is all we know
        return "running" if (out / "log.txt").exists() else "pending"
    return "pending"


@dataclass
class Status:
    states: dict[str, list[RunSpec]]
    accounting: bool

    def counts(self) -> dict[str, int]:
        return {state: len(self.states.get(state, [])) for state in STATES}


def status(results: Path, specs: Sequence[RunSpec]) -> Status:
    jobs = latest_jobs(results)
    ids = [jobs[s.run_id]["job_id"] for s in specs if s.run_id in jobs]
    sacct = sacct_states(ids)
    states: dict[str, list[RunSpec]] = defaultdict(list)
    for spec in specs:
        states[run_state(results, spec, jobs.get(spec.run_id), sacct)].append(spec)
    return Status(dict(states), accounting=sacct is not None)


# --------------------------------------------------------------------------- submit / cancel

@dataclass
class Submission:
    arrays: list[tuple[str, int, str, int]]  # (job id of the array, number of runs, profile summary, array tasks)
    skipped_active: int


def resources_line(params: Mapping[str, Any]) -> str:
    """A job array's resources in one line (`partition=gpu, gpus_per_node=1, …`), as submissions and plans say."""
    keys = ("slurm_partition", "gpus_per_node", "cpus_per_task", "mem_gb", "timeout_min")
    return ", ".join(f"{k.removeprefix('slurm_')}={params[k]}" for k in keys if k in params)


def plan(specs: Sequence[RunSpec], profile: Profile, overrides: Mapping[str, Any], *, pack: int | str | None = None,
         pack_hours: float = packing.DEFAULT_HOURS) -> list[tuple[dict[str, Any], list[list[RunSpec]]]]:
    """Group runs by resolved resources; in each group, the array tasks (one run each, or `pack`ed:
    `bench.execution.packing`), chunked to the cluster's array size. One (resources, tasks) per job array."""
    groups: dict[str, tuple[dict[str, Any], list[RunSpec]]] = {}
    for spec in specs:
        params = profile.params_for(spec.method, overrides)
        key = json.dumps(params, sort_keys=True, default=str)
        groups.setdefault(key, (params, []))[1].append(spec)
    for params, _ in groups.values():
        validate_params(params)
    chunks = []
    for params, members in groups.values():
        tasks = ([[s] for s in members] if pack is None else
                 packing.pack_runs(members, pack, hours=pack_hours, timeout_min=params.get("timeout_min")))
        for start in range(0, len(tasks), profile.max_array_size):
            chunks.append((params, tasks[start: start + profile.max_array_size]))
    return chunks


def submit(specs: Sequence[RunSpec], results: Path, profile: Profile, overrides: Mapping[str, Any],
           grid: str, *, pack: int | str | None = None, pack_hours: float = packing.DEFAULT_HOURS) -> Submission:
    """Submit every run not already queued or running, one job array per resource group (one run per task,
    or `pack`ed)."""
    missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
    if missing:
        raise BenchError(f"cannot submit to SLURM: {' and '.join(missing)} not on PATH (no SLURM client on this "
                         f"machine); run `bench run --cluster slurm` where it is installed, or use --cluster local")
    active = status(results, specs).states
    busy = {s.run_id for state in ("pending", "running") for s in active.get(state, [])}
    todo = [s for s in specs if s.run_id not in busy]
    folder = Path(results).resolve() / "submitit" / "%j"
    arrays = []
    for params, tasks in plan(todo, profile, overrides, pack=pack, pack_hours=pack_hours):
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm",
                                         slurm_max_num_timeout=profile.max_requeues)
        executor.update_parameters(name=f"bench-{grid}", slurm_array_parallelism=profile.array_parallelism,
                                   **params)
        jobs = _submit_array(executor, tasks, results, profile, params, packed=pack is not None)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        # a line per run naming its task (`packed` where the task holds several: status and cancel read it)
        record(results, ({"run_id": s.run_id, "job_id": j.job_id, "folder": str(folder).replace("%j", j.job_id),
                          "grid": grid, "submitted_at": now, **({"packed": True} if pack is not None else {})}
                         for task, j in zip(tasks, jobs) for s in task))
        arrays.append((jobs[0].job_id.split("_")[0], sum(map(len, tasks)), resources_line(params), len(tasks)))
    return Submission(arrays, skipped_active=len(specs) - len(todo))


def _submit_array(executor: submitit.AutoExecutor, tasks: Sequence[Sequence[RunSpec]], results: Path,
                  profile: Profile, params: Mapping[str, Any], *, packed: bool) -> list[Any]:
    """One job array; sbatch refusing it (resources the cluster cannot give, a wrong partition or
    account) or missing altogether is one line saying what it said and how to ask for less."""
    import contextlib
    import io

    chatter = io.StringIO()  # submitit echoes sbatch's stderr before raising: keep it for the one line
    try:
        with contextlib.redirect_stderr(chatter), executor.batch():
            where = str(Path(results).resolve())
            if packed:
                return [executor.submit(packing.SlurmPack(plugins.active_dirs()), [s.to_json() for s in task], where)
                        for task in tasks]
            job = SlurmRun(plugins.active_dirs())
            return [executor.submit(job, task[0].to_json(), where) for task in tasks]
    except submitit.core.utils.FailedJobError as err:
        said = [line.strip() for line in (str(err) or chatter.getvalue()).splitlines() if line.strip()]
        reason = (said[-1] if said else "no reason given").removeprefix("sbatch: error: ")
        raise BenchError(f"sbatch refused the job array: {reason}; profile {profile.name!r} asked for "
                         f"{resources_line(params) or 'its defaults'}; ask for what the cluster has with --profile NAME "
                         f"or --slurm-options key=value (e.g. mem_gb=16 gpus_per_node=1 slurm_partition=NAME)") from None


def cancel(results: Path, specs: Sequence[RunSpec]) -> list[str]:
    """scancel every queued or running job of these runs; returns the cancelled job ids. A packed task whose
    unfinished runs are not all among `specs` is not cancelled: the selected runs are taken out of it
    (`packing.skip`), and it goes on with the others."""
    jobs = latest_jobs(results)
    current = status(results, specs)
    active = [s for state in ("pending", "running") for s in current.states.get(state, [])]
    chosen = {s.run_id for s in active}
    ids, partial = [], defaultdict(list)
    for spec in active:
        job_id = jobs[spec.run_id]["job_id"]
        if jobs[spec.run_id].get("packed") and not _task_runs(results, jobs, job_id) <= chosen:
            partial[job_id].append(spec.run_id)
        elif job_id not in ids:
            ids.append(job_id)
    for job_id, run_ids in partial.items():
        packing.skip(results, job_id, run_ids)
    if ids:
        if shutil.which("scancel") is None:
            raise BenchError("scancel is not on PATH: run `bench cancel` on a machine with the SLURM client")
        subprocess.run(["scancel", *ids], check=True, capture_output=True, text=True, timeout=120)
    return ids


def _task_runs(results: Path, jobs: Mapping[str, Mapping[str, Any]], job_id: str) -> set[str]:
    """The unfinished runs of a packed task (by the manifest: its runs' newest submission is this task), less those
    already taken out of it."""
    return {run_id for run_id, entry in jobs.items() if entry["job_id"] == job_id
            and not (Path(results) / "runs" / run_id / DONE).exists()} - packing.skipped(results, job_id)


def wait(results: Path, specs: Sequence[RunSpec], progress: Callable[[str], None] = print,
         poll_s: float = 5.0) -> Status:
    """Follow the runs until none is pending or running, printing a line whenever the counts change."""
    last: dict[str, int] | None = None
    while True:
        current = status(results, specs)
        counts = current.counts()
        if counts != last:
            progress(" · ".join(f"{state} {n}" for state, n in counts.items() if n))
            last = counts
        if counts["pending"] == 0 and counts["running"] == 0:
            return current
        time.sleep(poll_s)


def format_counts(current: Status) -> str:
    counts = Counter({k: v for k, v in current.counts().items() if v})
    return ", ".join(f"{n} {state}" for state, n in counts.items())

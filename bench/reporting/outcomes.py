"""What a command says about finished runs: the leaderboard after a run, the failed runs and why,
the warnings about cells that average different versions. Shared by `bench run`, `bench status`,
`bench report` and their Python API (`bench.run`, `bench.report`)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from bench.config.spec import RunSpec
from bench.core.provenance import VERSION_COLUMNS

# a full disk: what was finished is kept (every write is atomic), so freeing space and running again is enough
DISK_FULL = ("no space left on device writing {}; free space there (or choose another --results DIR, or "
             "--cache-dir DIR / BENCH_CACHE_DIR for the banks) and run again: finished runs and files are kept")


def report_failures(results: Path, failed: Sequence[tuple[Any, str]]) -> int:
    """The failed runs and where their error.txt is, on stderr; the exit status that says so (0: none failed).
    A full disk is one line: every other run would have failed the same way."""
    from bench.runs.rundir import run_dir

    if not failed:
        return 0
    full = [reason for _, reason in failed if "No space left on device" in reason or "Errno 28" in reason]
    if full:  # one line: every other run would fail the same way
        print(f"bench: error: {DISK_FULL.format(full[0].split(': ', 1)[-1])}", file=sys.stderr)
        return 1
    print(f"\n{len(failed)} run(s) failed; their error.txt says why:", file=sys.stderr)
    for spec, reason in failed:
        print(f"  {run_dir(results, spec)}/error.txt  ({reason})", file=sys.stderr)
    return 1


def error_line(results: Path, spec: RunSpec) -> str:
    """The first line of a failed run's error.txt (a SLURM job killed before writing one says where to look)."""
    from bench.runs.rundir import ERROR, run_dir

    path = run_dir(results, spec) / ERROR
    return path.read_text().splitlines()[0] if path.exists() else "no error.txt: see the job's submitit log"


def run_dirs(results: Path, specs: Sequence[Any]) -> list[Path]:
    from bench.runs.rundir import run_dir

    return [run_dir(results, s) for s in specs]


def print_leaderboard(results: Path, specs: Sequence[Any], default_backbone: str) -> None:
    from bench.reporting.aggregate import backbone_label, final_scores
    from bench.reporting.load import load_metrics
    from bench.reporting.table import leaderboard

    frame = load_metrics(run_dirs(results, specs))
    if len(frame):
        # runs of another backbone than the grid's first are rows of their own, as in `bench report`
        frame["label"] = [backbone_label(l, b, default_backbone) for l, b in zip(frame["label"], frame["backbone"])]
        print()
        print(leaderboard(final_scores(frame), references=reference_labels(frame)))
        warn_mixed_versions(frame)
        warn_edited_methods(frame)


def warn_mixed_versions(frame: Any) -> None:
    """A warning per table cell that averages runs of different versions (torch, CUDA, weights...)."""
    from bench.reporting.aggregate import mixed_versions

    for line in mixed_versions(frame, VERSION_COLUMNS):
        print(f"bench: warning: {line}", file=sys.stderr)


def edited_methods(frame: Any) -> list[str]:
    """One line per method some of whose finished runs recorded other code than the method's files hold
    now (`method_sha256`): a run id names a configuration, not code, so an edited method's earlier runs
    are still `done`. Runs recorded before the column, rebuilt ones and unregistered methods say nothing."""
    from bench.core.provenance import files_sha256
    from bench.registries.catalogue import method_info

    if frame.empty or "method_sha256" not in frame:
        return []
    lines = []
    runs = frame[["method", "run_id", "method_sha256"]].astype(str).drop_duplicates("run_id")
    for method, group in runs.groupby("method", sort=True):
        info = method_info(method)  # its files from the catalogue: torch is not imported to read them
        try:
            now = files_sha256(info.source_files) if info is not None else ""
        except OSError:  # a file moved away since the catalogue was written: nothing to compare with
            now = ""
        if not now:
            continue
        stale = group[~group["method_sha256"].isin(["", "unknown", "nan", "None", "<NA>", now])]
        if len(stale):
            lines.append(f"{len(stale)} of {method}'s {len(group)} finished run(s) ran other code than its files "
                         f"hold now (method_sha256 {', '.join(sorted(stale['method_sha256'].str[:12].unique()))}, "
                         f"now {now[:12]}); `bench run --force --methods {method!r}` with the same selection "
                         f"computes them again")
    return lines


def warn_edited_methods(frame: Any) -> None:
    for line in edited_methods(frame):
        print(f"bench: warning: {line}", file=sys.stderr)


def reference_labels(frame: Any) -> tuple[str, ...]:
    """The frame's labels of the reference methods (K-means, the Joint methods): marked, never bold, as in
    the paper. Read from the frame, whose labels may name a backbone or a configuration after the method;
    a method no longer registered is not a reference (its runs still report)."""
    from bench.registries.catalogue import method_info

    pairs = frame[["label", "method"]].astype(str).drop_duplicates()
    return tuple(label for label, method in pairs.itertuples(index=False)
                 if (info := method_info(method)) is not None and info.sees_past_steps)


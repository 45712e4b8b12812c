"""`bench run --dry-run`: what would run, where, and what it would cost, before anything is spent: per resource
group (the local pool, or each SLURM job array) the runs, the array tasks it would submit and the GPU-hours the
cost model gives them (`bench.execution.cost`, whose assumed throughput every estimate names), then per method.
The first line names what runs as `bench.config.selection.Selection.label` does: the grid, and how the command
narrowed it."""
from __future__ import annotations

from typing import Any, Sequence

from bench.config.spec import RunSpec
from bench.execution import cost


def gpu_hours(specs: Sequence[RunSpec]) -> tuple[float, int]:
    """The modelled GPU-hours of `specs` (banks excluded) and how many of them are of unknown size (counted
    at the floor of a run on the feature bank)."""
    seconds = [cost.run_seconds(s) for s in specs]
    return sum(x if x is not None else cost.FLOOR_S for x in seconds) / 3600, sum(x is None for x in seconds)


def duration(seconds: float) -> str:
    """A run's modelled time as the dry run prints it (and docs/performance.md tabulates it)."""
    return f"{seconds:.0f} s" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def per_method(specs: Sequence[RunSpec]) -> list[str]:
    """A line per method of `specs`: its runs, the time the cost model gives one (a range where its runs differ)
    and their GPU-hours, the banks excluded."""
    seconds: dict[str, list[float]] = {}
    for spec in specs:
        priced = cost.run_seconds(spec)
        seconds.setdefault(spec.method, []).append(cost.FLOOR_S if priced is None else priced)
    width = max((len(m) for m in seconds), default=0)
    lines = []
    for method, each in sorted(seconds.items()):
        low, high = min(each), max(each)
        one = duration(low) if duration(low) == duration(high) else f"{duration(low)} to {duration(high)}"
        lines.append(f"    {method:<{width}}  {len(each):>4} run(s), {one} a run, est. {sum(each) / 3600:.2f} GPU-h")
    return lines


def _print_costs(pending: Sequence[RunSpec]) -> None:
    if pending:
        print("  per method, by the cost model:")
        print("\n".join(per_method(pending)))
        print(f"  ({assumption(pending)})")


def assumption(specs: Sequence[RunSpec]) -> str:
    """The line every estimate ends with: the banks' share and what the model assumes."""
    unknown = gpu_hours(specs)[1]
    sized = f"; {unknown} run(s) of datasets of unknown size counted at {cost.FLOOR_S:.0f} s" if unknown else ""
    return (f"GPU-hours by bench's cost model (bench.execution.cost): {cost.THROUGHPUT:.0f} ViT-B/16 images/s "
            f"(measured on an H200 in bf16), other backbones by their measured time or FLOPs; the banks they read "
            f"{cost.bank_seconds(specs) / 3600:.1f} GPU-h more, once per dataset and backbone{sized}")


def print_local(label: str, specs: Sequence[RunSpec], done: Sequence[RunSpec], pending: Sequence[RunSpec],
                workers: int | None, slots: Sequence[str]) -> None:
    """`label`: what runs (`grid demo, narrowed by --methods`); `workers`: `--workers` (None: one per available
    core); the pool's shape is the one `bench run` starts."""
    from bench.execution.workers import pool_shape

    workers, slots = pool_shape(len(pending), workers, slots)
    where = (f"{len(slots)} worker(s) on GPU slot(s) {', '.join(slots)}" if slots else f"{workers} worker process(es)")
    hours = gpu_hours(pending)[0]
    print(f"{label}: {len(specs)} runs, {len(done)} done, {len(pending)} would run on {where} "
          f"(est. {hours:.1f} GPU-h)")
    for spec in pending:
        print(f"  {spec.run_id}  {spec.describe()}")
    _print_costs(pending)


def print_slurm(label: str, specs: Sequence[RunSpec], pending: Sequence[RunSpec], chunks: Sequence[tuple[Any, Any]],
                profile: Any, seconds: float, pack: int | str | None, summary: Any) -> None:
    """`chunks`: `slurm.plan`'s (resources, array tasks) of each job array; `summary(resources)` its one line."""
    tasks = sum(len(t) for _, t in chunks)
    packed = "" if pack is None else f", packed {pack} runs per task" if pack != "auto" else ", packed by the cost model"
    print(f"{label}: {len(specs)} runs, {len(specs) - len(pending)} done, {len(pending)} would be submitted as "
          f"{len(chunks)} job array(s) of {tasks} array task(s){packed}, with profile {profile.name} ({profile.path}) "
          f"(planned in {seconds:.2f}s)")
    for params, array in chunks:
        members = [s for task in array for s in task]
        hours = gpu_hours(members)[0]
        print(f"  array of {len(members):>4} runs in {len(array):>4} task(s), est. {hours:7.1f} GPU-h: "
              f"{summary(params)}")
    _print_costs(pending)

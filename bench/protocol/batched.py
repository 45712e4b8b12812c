"""Several runs stepped together in one process (`bench tune --batch`; docs/performance.md#tuning-batched-trials):
runs that differ only in hyper-parameters their method declares `batchable` (the trials of one study: the same data,
seed, split and backbone) share each step's training, one batched computation (the method's `learn_batched`) in
place of one per run. Each is still an ordinary run: its own directory, lock, log, checkpoint after every step,
metrics and predictions, DONE, as `execute` would write them alone (to float rounding).

The loop is the step loop (`runner.run_steps`) with the runs in lockstep: at step t, each run's `Step` (the global
seed set as alone), one `learn_batched` over the methods, then each run's evaluation and record, the random state
put back before each to what its run alone would hold. A run's recorded time is its own: its share of the batched
learning and its own evaluation. Runs that cannot batch run one at a time (`execute`).
"""
from __future__ import annotations

import json
import random
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from bench.config.spec import RunSpec
from bench.core import numerics
from bench.protocol.feeding import sharing_banks
from bench.protocol.runner import Opened, after_learn, already_done, close_run, execute, failed, open_run, \
    seed_everything
from bench.protocol.step import epochs_recorded, record_epochs
from bench.runs.rundir import ERROR, run_dir
from bench.runs.runstore import Log, locked


def batch_keys(method: str) -> tuple[str, ...]:
    """The hyper-parameters in which runs of `method` may differ and still step together: what the method's own
    class declares (`batchable`, with `learn_batched`); a subclass that learns otherwise does not inherit them."""
    from bench.registries import METHODS

    cls = METHODS.get(method)
    keys = vars(cls).get("batchable", ()) if cls is not None else ()
    return tuple(keys) if keys and callable(getattr(cls, "learn_batched", None)) else ()


def _same_but(spec: RunSpec, keys: tuple[str, ...]) -> str:
    """What a run is but for its batchable method keys: runs equal in it may step together."""
    config = {**spec.config, "method": {k: v for k, v in spec.config["method"].items() if k not in keys}}
    return json.dumps([spec.method, spec.dataset, spec.split, spec.backbone, spec.seed, spec.n_steps, config,
                       spec.location], sort_keys=True, default=str)


def batches(specs: Sequence[RunSpec]) -> list[list[RunSpec]]:
    """`specs` (each run once) in groups that may step together, in the order given; a run that batches with no
    other is a group of one."""
    groups: dict[str, list[RunSpec]] = {}
    seen: set[str] = set()
    for spec in specs:
        if spec.run_id in seen:
            continue
        seen.add(spec.run_id)
        keys = batch_keys(spec.method)
        groups.setdefault(_same_but(spec, keys) if keys else spec.run_id, []).append(spec)
    return list(groups.values())


def execute_batch(specs: Sequence[RunSpec], results: Path, *, echo: bool = False) -> list[Path]:
    """Run `specs` to completion under `results/runs/`, those that may step together in one batch each
    (`batches`), the others one at a time (`execute`). The run directories, in the order of `specs`. A batch that
    fails records its error in each of its runs and raises it."""
    where: dict[str, Path] = {}
    for group in batches(specs):
        if len(group) == 1:
            where[group[0].run_id] = execute(group[0], results, echo=echo)
        else:
            where.update(_together(group, results, echo))
    return [where[spec.run_id] for spec in specs]


def _together(group: list[RunSpec], results: Path, echo: bool) -> dict[str, Path]:
    where: dict[str, Path] = {}
    with ExitStack() as held:
        todo: list[tuple[RunSpec, Path, Log]] = []
        for spec in group:
            out = where[spec.run_id] = run_dir(results, spec)
            out.mkdir(parents=True, exist_ok=True)
            held.enter_context(locked(out))
            log = Log(out / "log.txt", echo)
            if already_done(out, log):
                continue
            (out / ERROR).unlink(missing_ok=True)
            todo.append((spec, out, log))
        if len(todo) == 1:  # the others were done: no batch left
            held.close()
            execute(todo[0][0], results, echo=echo)
        elif todo:
            with numerics.restored(), sharing_banks():
                _step_together(todo)
    return where


def _rng() -> tuple[Any, ...]:
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _set_rng(state: tuple[Any, ...]) -> None:
    random.setstate(state[0])
    np.random.set_state(state[1])
    torch.set_rng_state(state[2])


def _step_together(todo: list[tuple[RunSpec, Path, Log]]) -> None:
    runs: list[Opened] = []
    # each run's own seconds (its share of what the runs did together), so that its recorded time is its own
    spent: list[float] = []
    try:
        for spec, out, log in todo:
            start = time.monotonic()
            runs.append(open_run(spec, out, log))
            spent.append(time.monotonic() - start)
        for run in runs:
            run.log(f"stepped in one process with {len(runs) - 1} other run(s) of the same data and seed "
                    f"(batched trials: {', '.join(batch_keys(run.spec.method))} may differ)")
        learn_batched = type(runs[0].parts.method).learn_batched  # type: ignore[attr-defined]
        for t in range(min(r.progress.next_step for r in runs), runs[0].spec.n_steps):
            active = [i for i, r in enumerate(runs) if r.progress.next_step <= t]  # a resumed run starts after its checkpoint
            handed = []
            for i in active:
                start = time.monotonic()
                seed_everything(runs[i].spec.seed * 1000 + t)
                handed.append(runs[i].steps.step(t, runs[i].progress.stored))
                spent[i] += time.monotonic() - start
            # the runs share their seed: each learns from the random state it would hold alone
            start = time.monotonic()
            loops = learn_batched([runs[i].parts.method for i in active], handed)
            for i in active:
                spent[i] += (time.monotonic() - start) / len(active)
            after = _rng()
            for i, step, own in zip(active, handed, loops):
                run = runs[i]
                _set_rng(after)
                with epochs_recorded() as losses:
                    for loop in own:
                        record_epochs(loop)
                run.clock = time.monotonic() - spent[i]  # its checkpoint records its own seconds
                after_learn(t, step, losses, run.parts.method, run.steps, run.progress, run.out, run.log, run.clock,
                            run.threads, run.tracking)
                spent[i] = time.monotonic() - run.clock
        for i, run in enumerate(runs):
            run.clock = time.monotonic() - spent[i]
            close_run(run, run.progress.rows + run.steps.summary(run.progress.rows))
    except Exception as err:
        for _, out, log in todo:
            failed(out, log, err)
        for run in runs:
            run.tracking.finish("failed")
        raise
    except BaseException as err:
        for _, _, log in todo:
            log(f"interrupted ({type(err).__name__}); the next attempt resumes from the last checkpoint")
        for run in runs:
            run.tracking.finish("interrupted")
        raise
    for run in runs:
        run.tracking.finish("finished")

"""`bench run`: run a grid's runs not yet done (bench.api.run behind the options: the selection's as one
`Selection`, the run's under their `RunOptions` names)."""
from __future__ import annotations

import argparse
from typing import Any

from bench.cli.common import add_selection, read_ahead, selection


def add_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run a grid (default: the embedded demo grid, locally)")
    add_selection(run)
    run.add_argument("--cluster", default="local",
                     help="local (warm worker processes, default), debug (in-process) or slurm (job arrays)")
    run.add_argument("--workers", "--jobs", dest="workers", type=int, default=None,
                     help="--cluster local: warm worker processes, i.e. runs at a time (default: one per available core)")
    run.add_argument("--gpus", metavar="LIST",
                     help="--cluster local: the GPUs to place workers on, one warm worker per GPU with its own "
                          "CUDA_VISIBLE_DEVICES (indices or names, e.g. 0,1,3; default: every visible GPU; none on a "
                          "machine without GPUs)")
    run.add_argument("--runs-per-gpu", type=int, default=1, metavar="N",
                     help="--cluster local: workers sharing each GPU, for runs small enough to share one (default 1)")
    run.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda if available); checked on this machine, except for --cluster slurm, whose jobs run on its nodes")
    run.add_argument("--threads", type=int, default=None,
                     help="CPU compute threads of each run (default 1, whatever the machine); part of what decides "
                          "its numbers, so a resumed run keeps the count it started with")
    run.add_argument("--read-ahead", choices=("on", "off"),
                     help="token bank: gather the next batch's stored views in a background thread "
                          "(default: on for a GPU, off for a CPU; changes no result)")
    run.add_argument("--weights-dir", help="directory holding the paper backbones' published weight files "
                     "(dino_vitbase16_pretrain.pth, dino_resnet50_pretrain.pth, ViT-B-16.pt; else $BENCH_WEIGHTS_DIR)")
    run.add_argument("--force", action="store_true", help="re-run runs that are already done")
    run.add_argument("--retry-failed", action="store_true", help="run only the runs that failed")
    run.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    run.add_argument("--profile", default="default",
                     help="SLURM resource profile: NAME (./slurm/profiles/NAME.py in the working directory first, then "
                          "bench's own) or a file; a profile is Python that bench runs to read it, and the file "
                          "loaded is named in the output (default: default)")
    run.add_argument("--slurm-options", nargs="+", default=[], metavar="K=V",
                     help="override profile keys, e.g. slurm_partition=gpu timeout_min=600")
    run.add_argument("--wait", action="store_true", help="with --cluster slurm: follow the jobs until they end")
    run.add_argument("--pack", metavar="N|auto",
                     help="with --cluster slurm: N runs per array task, run one after another by one warm process, or "
                          "auto: tasks of about --pack-hours by the cost model (default: one run per task)")
    run.add_argument("--pack-hours", type=float, default=4.0, metavar="H",
                     help="--pack auto: the target length of a task in GPU-hours (at most 80%% of the profile's "
                          "timeout_min; default 4)")
    run.add_argument("--tracker", action="append", dest="trackers", default=[], metavar="NAME",
                     help="also send each run's losses, metrics, config and final A/F to tensorboard, wandb or mlflow "
                          "(offline by default; repeatable; adds to the grid's `trackers`; each an extra: "
                          "pip install 'bench[wandb]')")


def command(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from bench.api import run
    from bench.execution.launch import RunOptions

    # each option's destination is its RunOptions field: what the parser reads is handed on by name, not by hand
    given = {f.name: getattr(args, f.name) for f in fields(RunOptions)}
    return run(selection(args), **{**given, "read_ahead": read_ahead(args)}).exit_code

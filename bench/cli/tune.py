"""`bench tune`: one method's hyper-parameters searched with Optuna on a tuning protocol that never reads the test
images (bench.api.tune; docs/settings.md#tuning)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.cli.common import add_selection, selection


def add_parser(sub: Any) -> None:
    tun = sub.add_parser("tune", help="tune a method's hyper-parameters without the test set (Optuna)")
    add_selection(tun)
    tun.add_argument("--trials", type=int, required=True, metavar="N",
                     help="the budget: trials in the study when the tuner stops (a resumed study counts its own)")
    tun.add_argument("--space", type=Path, metavar="FILE",
                     help="a JSON or YAML search space (default: the method's _search_space beside its presets)")
    tun.add_argument("--protocol", default="validation",
                     help="the tuning protocol: validation (held-out training images in place of the test set; "
                          "default) or transfer (another dataset, or another class order, with --transfer-from)")
    tun.add_argument("--transfer-from", metavar="DATASET|order:N",
                     help="transfer: the dataset the trials run on (scored on its test set), or order:N, class order "
                          "N of the selection's datasets (scored on held-out training images)")
    tun.add_argument("--no-final", dest="final", action="store_false",
                     help="do not run the selection with the best values after the study (by default it runs once, "
                          "marked as tuned by the study)")
    tun.add_argument("--holdout", type=float, default=0.2, metavar="F",
                     help="validation: the fraction of each class's training images held out (default: %(default)s)")
    tun.add_argument("--study", metavar="NAME", help="the study's name (default: grid-method-datasets-splits-protocol)")
    tun.add_argument("--storage", metavar="URL",
                     help="an RDB URL for the study (default: <results>/tuning/<study>.journal, Optuna's journal file)")
    tun.add_argument("--seed", type=int, default=0, help="the sampler's seed (default: %(default)s)")
    tun.add_argument("--batch", type=int, default=1, metavar="N",
                     help="ask for N trials at once and, for a method that learns them together (Baseline), run them "
                          "in this process as one batched computation (default: 1, one trial at a time)")
    tun.add_argument("--cluster", choices=("local", "debug", "slurm"), default="local",
                     help="where each trial's runs run, as `bench run --cluster` (default: %(default)s)")
    tun.add_argument("--workers", type=int, metavar="N", help="local worker processes, as `bench run --workers`")
    tun.add_argument("--profile", default="default", help="the SLURM profile, as `bench run --profile`")


def command(args: argparse.Namespace) -> int:
    from bench.api import tune

    outcome = tune(selection(args), trials=args.trials, space=args.space, protocol=args.protocol,
                   holdout=args.holdout, storage=args.storage, study=args.study, seed=args.seed, cluster=args.cluster,
                   workers=args.workers, profile=args.profile, batch=args.batch, transfer_from=args.transfer_from,
                   final=args.final)
    return 0 if outcome.best is not None else 1

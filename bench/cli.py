"""The `bench` command: run, list and report.

Every user error (unknown names, bad options, missing data, unwritable directories) is a
`BenchError` and is printed as one line on stderr with exit status 2; no traceback.
"""
from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from bench.errors import BenchError, disk_full
from bench.provenance import VERSION_COLUMNS

# a full disk: what was finished is kept (every write is atomic), so freeing space and running again is enough
DISK_FULL = ("no space left on device writing {}; free space there (or choose another --results DIR, or "
             "--cache-dir DIR / BENCH_CACHE_DIR for the banks) and run again: finished runs and files are kept")

DEFAULT_RESULTS = Path("results")
LIST_KINDS = ("methods", "datasets", "splits", "backbones", "grids")


def _parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """`k=v` pairs; values parsed as Python literals where possible (`3`, `1e-4`, `True`, `[1,2]`)."""
    import ast

    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise BenchError(f"bad --cfg-options item {pair!r}: use section.key=value, e.g. method.epochs=10")
        try:
            options[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            options[key] = raw
    return options


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", default="demo", help="grid name (see `bench list grids`); default: demo")
    p.add_argument("--methods", nargs="+", metavar="M",
                   help="methods to run, optionally with a preset: Baseline:equations (default: code)")
    p.add_argument("--datasets", nargs="+", metavar="D")
    p.add_argument("--splits", nargs="+", metavar="S")
    p.add_argument("--seeds", nargs="+", type=int, metavar="N")
    p.add_argument("--backbone", nargs="+", dest="backbones", metavar="B",
                   help="backbone(s): pixels, timm:<model> (e.g. timm:vit_base_patch16_224.dino)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results root (default: ./results)")
    p.add_argument("--data-root", help="directory holding the datasets (else $BENCH_DATA_ROOT)")
    p.add_argument("--cache-dir", help="feature-bank cache (else $BENCH_CACHE_DIR, else <results>/cache)")
    p.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V",
                   help="override config keys, e.g. method.epochs=10 features.views=4")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="class-iNCD benchmark harness")
    sub = parser.add_subparsers(dest="command", metavar="{run,status,cancel,report,metrics,list,data,cache}")

    run = sub.add_parser("run", help="run a grid (default: the embedded demo grid, locally)")
    _add_selection(run)
    run.add_argument("--cluster", default="local",
                     help="local (warm worker processes, default), debug (in-process) or slurm (job arrays)")
    run.add_argument("--workers", "--jobs", dest="workers", type=int, default=None,
                     help="--cluster local: warm worker processes, i.e. runs at a time (default: one per available core)")
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
    run.add_argument("--profile", default="default", help="SLURM resource profile in slurm/profiles/ (default: default)")
    run.add_argument("--slurm-options", nargs="+", default=[], metavar="K=V",
                     help="override profile keys, e.g. slurm_partition=gpu timeout_min=600")
    run.add_argument("--wait", action="store_true", help="with --cluster slurm: follow the jobs until they end")

    st = sub.add_parser("status", help="what of a grid is pending, running, done, failed, cancelled")
    _add_selection(st)
    cancel = sub.add_parser("cancel", help="cancel a grid's queued and running SLURM jobs")
    _add_selection(cancel)

    lst = sub.add_parser("list", help="show what is registered")
    lst.add_argument("kind", choices=LIST_KINDS)

    data = sub.add_parser("data", help="inspect a dataset")
    data.add_argument("action", choices=("summary",))
    data.add_argument("dataset")
    data.add_argument("--data-root", help="directory holding the dataset (else $BENCH_DATA_ROOT)")
    data.add_argument("--split", default="2-step", help="2-step, 5-step or 10-step (default: 2-step)")
    data.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="where partitions are persisted")
    data.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V", help="dataset options, e.g. dataset.root=DIR")

    cache = sub.add_parser("cache", help="list or remove feature banks")
    cache.add_argument("action", choices=("list", "remove"))
    cache.add_argument("keys", nargs="*", help="with remove: the bank keys to remove")
    cache.add_argument("--all", action="store_true", help="with remove: every bank")
    cache.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    cache.add_argument("--cache-dir", help="the cache (else $BENCH_CACHE_DIR, else <results>/cache)")

    met = sub.add_parser("metrics", help="recompute finished runs' metrics from their stored predictions")
    met.add_argument("action", choices=("recompute",))
    _add_selection(met)
    met.set_defaults(grid=None)  # no grid named: every finished run under the results root
    met.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")

    rep = sub.add_parser("report", help="tables and plots of a grid's finished runs")
    _add_selection(rep)
    rep.set_defaults(grid=None)  # no grid named: every finished run under the results root
    rep.add_argument("--format", default="latex", choices=("latex", "markdown", "csv"))
    rep.add_argument("--out", type=Path, help="output directory (default: <results>/reports/<grid>, "
                     "or <results>/reports/all without --grid)")
    rep.add_argument("--pool-orders", action="store_true",
                     help="average runs of different class orders (split.class_order_seed) together, with the seeds")
    rep.add_argument("--by", choices=VERSION_COLUMNS, metavar="COLUMN",
                     help="split every row by a version column of the runs (one of: %(choices)s), so that runs "
                          "of different versions are never averaged together")
    rep.add_argument("--compare", nargs="+", metavar="WHAT",
                     help="paper: the paper's numbers beside the measured ones; A B: the paired difference of two "
                          "methods (labels as the tables show them) over the seeds they share")
    return parser


def _expand(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from bench.spec import expand, load_grid

    grid = load_grid(args.grid)
    negative = [seed for seed in args.seeds or () if seed < 0]
    if negative:
        raise BenchError(f"--seeds {negative[0]}: a seed must be an integer >= 0")
    location = {"data_root": _data_root(args),
                "cache_dir": str(Path(args.cache_dir).resolve()) if args.cache_dir else None}
    if getattr(args, "device", None):
        location["device"] = args.device
    if getattr(args, "read_ahead", None):
        location["read_ahead"] = args.read_ahead == "on"
    if getattr(args, "threads", None) is not None:  # not in the run id: where it runs, as the device
        location["threads"] = args.threads
    weights_dir = getattr(args, "weights_dir", None) or os.environ.get("BENCH_WEIGHTS_DIR")
    if weights_dir:
        location["weights_dir"] = str(Path(weights_dir).expanduser().resolve())
    specs = expand(grid, methods=args.methods, datasets=args.datasets, splits=args.splits, seeds=args.seeds,
                   backbones=args.backbones, options=_parse_options(args.cfg_options), location=location)
    return grid, specs


def _data_root(args: argparse.Namespace) -> str | None:
    """Where the datasets are: --data-root, else $BENCH_DATA_ROOT, as an absolute path (recorded in
    each run's spec); None leaves it to the config's per-dataset `dataset.root`."""
    root = args.data_root or os.environ.get("BENCH_DATA_ROOT")
    return str(_usable_path(Path(root).expanduser().resolve(), "--data-root (or $BENCH_DATA_ROOT)")) if root else None


def _usable_path(path: Path, option: str) -> Path:
    """`path`, or one line when the file system cannot even look it up (longer than its limits: 255
    bytes a name, 4096 a path on Linux); whether it exists is checked where it is used."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise BenchError(f"{option} {_shortened(path)} is too long for the file system ({len(str(path))} "
                             f"characters; {err.strerror}); give a shorter path") from None
    return path


def _shortened(path: Path | str, keep: int = 60) -> str:
    """A path short enough for a one-line message."""
    text = str(path)
    return text if len(text) <= 2 * keep else f"{text[:keep]}…{text[-keep:]}"


def _check_splits(specs: Sequence[Any]) -> None:
    """A split the dataset's classes cannot fill (more tasks than classes, or an empty last task
    under the authors' ceil(K/T) rule) is refused before anything runs."""
    from bench.data import declared_num_classes
    from bench.evaluate import TaskLayout

    for spec in specs:
        n = declared_num_classes(spec.dataset, spec.config["dataset"])
        if n is None:
            continue
        try:
            TaskLayout.contiguous(n, spec.n_steps)
        except ValueError as err:
            raise BenchError(f"split {spec.split!r} does not fit dataset {spec.dataset!r} ({n} classes): {err}") from None


def _check_tail_backbones(specs: Sequence[Any]) -> None:
    """A method that trains a ViT's last blocks on a backbone without blocks, or with fewer blocks than
    it unfreezes, is refused before anything runs."""
    from bench.spec import first_trainable_block
    from bench.weights import PAPER_BACKBONES
    from bench.registries.catalogue import backbone_depth, method_info

    depths: dict[str, int] = {}
    for spec in specs:
        if not method_info(spec.method).runs_on.trains_blocks:
            continue
        key = f"{spec.backbone} {sorted(spec.config['backbone']['kwargs'].items())}"
        if key not in depths:
            depths[key] = backbone_depth(spec.backbone, spec.config["backbone"])
        if not depths[key]:
            vits = [name for name in PAPER_BACKBONES if backbone_depth(name, {})]
            raise BenchError(f"{spec.method} trains a ViT's last blocks; backbone {spec.backbone!r} has none; choose a "
                             f"ViT backbone: {', '.join(vits)} or timm:<a ViT model>")
        try:
            first_trainable_block(depths[key], spec.config["method"]["unfreeze"])
        except ValueError as err:
            raise BenchError(f"{spec.describe()}: method.unfreeze: {err}") from None


def _check_timm_models(specs: Sequence[Any]) -> None:
    """A `timm:<model>` backbone timm does not know is refused before anything runs, with the closest
    names timm has (every run would otherwise fail as it builds its backbone)."""
    import difflib

    names = sorted({s.backbone.split(":", 1)[1] for s in specs if s.backbone.startswith("timm:")})
    if not names:
        return
    import timm

    for name in names:
        arch = name.split(".", 1)[0]  # the part before a pretrained tag (vit_base_patch16_224.dino)
        if not timm.is_model(arch):
            close = difflib.get_close_matches(arch, timm.list_models(), n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise BenchError(f"unknown timm model {name!r} in backbone 'timm:{name}'; {hint}"
                             f"valid names are timm.list_models() (e.g. vit_base_patch16_224)")


def _check_device(device: str | None, cluster: str) -> None:
    """`--device` names a device of the machine that runs the jobs: this one, except for SLURM, whose
    jobs run on the cluster's nodes (a GPU-less submit host may ask for cuda)."""
    if not device:
        return
    import torch

    try:
        wanted = torch.device(device)
    except RuntimeError:
        raise BenchError(f"unknown --device {device!r}; use cpu, cuda or cuda:N") from None
    if wanted.type not in ("cpu", "cuda"):
        raise BenchError(f"unsupported --device {device!r}; use cpu, cuda or cuda:N")
    if cluster == "slurm" or wanted.type == "cpu":
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if wanted.index is None and count or wanted.index is not None and wanted.index < count:
        return
    available = ", ".join(["cpu", *(f"cuda:{i}" for i in range(count))])
    why = "no CUDA device is available on this machine" if not count else f"this machine has {count} CUDA device(s)"
    raise BenchError(f"--device {device}: {why}; available here: {available}")


def _preflight(specs: Sequence[Any]) -> None:
    """What every run of the grid will read, checked once before anything is started or submitted:
    the datasets' files (located, not loaded) and the backbone weight files. One line on failure,
    instead of every run starting, failing and writing its own error."""
    import json

    from bench.data import make_reader
    from bench.weights import check_weights_file, resolve_pretrained

    seen: set[str] = set()
    for spec in specs:
        dataset = json.dumps([spec.dataset, spec.config["dataset"], spec.location.get("data_root")], sort_keys=True,
                             default=str)
        if dataset not in seen:
            seen.add(dataset)
            reader = make_reader(spec.dataset, spec.config["dataset"], spec.location.get("data_root"))
            if hasattr(reader, "check"):
                reader.check()
        weights = json.dumps([spec.backbone, spec.config["backbone"]["pretrained"], spec.location.get("weights_dir")],
                             default=str)
        if weights not in seen:
            seen.add(weights)
            pretrained = resolve_pretrained(spec.backbone, spec.config["backbone"]["pretrained"],
                                            spec.location.get("weights_dir"))
            if isinstance(pretrained, str):
                check_weights_file(pretrained)


def _check_caches(results: Path, specs: Sequence[Any]) -> None:
    """Refuse a cache the pending runs' missing banks cannot be written to (read-only, too little space)."""
    import json

    from bench.bank import (DATASET_IMAGES, FEATURE_DIMS, TOKENS, bank_bytes_bound, check_cache,
                            default_cache_dir, list_banks)
    from bench.registries.catalogue import method_info

    needed: dict[Path, dict[tuple[Any, ...], int]] = {}
    for spec in specs:
        feat, data = spec.config["features"], spec.config["dataset"]
        tokens = method_info(spec.method).inputs == "tokens"
        if tokens and not (feat["mode"] == "bank" and feat.get("tokens") == "bank"):
            continue  # live tokens: no bank
        views = feat["views"] if feat["mode"] == "bank" else 0
        images = DATASET_IMAGES.get(spec.dataset) or (data.get("num_classes", 10) * (
            data.get("train_per_class", 100) + data.get("test_per_class", 100)))
        side, channels = data.get("image_size", 224), data.get("channels", 3)
        dim = FEATURE_DIMS.get(spec.backbone, side * side * channels if spec.backbone == "pixels" else 2048)
        cache = Path(spec.location.get("cache_dir") or default_cache_dir(results))
        what = (spec.dataset, spec.backbone, views, tokens, json.dumps(data, sort_keys=True, default=str))
        needed.setdefault(cache, {})[what] = bank_bytes_bound(images, views, dim, TOKENS if tokens else 1)
    for cache, banks in needed.items():
        present = {(b.fields.get("dataset"), b.fields.get("backbone"), b.fields.get("views"), b.kind == "token bank",
                    json.dumps(b.fields.get("dataset_options"), sort_keys=True, default=str))
                   for b in (list_banks(cache) if cache.exists() else [])}
        missing = {what: size for what, size in banks.items() if what not in present}
        if missing:
            names = ", ".join(sorted({f"{d}/{b} V={v}" for d, b, v, _, _ in missing}))
            check_cache(cache, sum(missing.values()), f"{len(missing)} bank(s): {names}")


def cmd_run(args: argparse.Namespace) -> int:
    from bench.rundir import DONE, ERROR, check_writable, invalidate, is_done, run_dir, unreadable
    from bench.numerics import check_threads
    from bench.workers import CLUSTERS

    args.started = time.monotonic()
    clusters = (*CLUSTERS, "slurm")
    if args.cluster not in clusters:
        raise BenchError(f"unknown cluster {args.cluster!r}; choose from {', '.join(clusters)}")
    if args.workers is not None and args.workers < 1:
        raise BenchError(f"--workers {args.workers}: must be an integer >= 1 (worker processes for --cluster local)")
    if args.threads is not None:
        check_threads(args.threads)
    _check_device(args.device, args.cluster)
    grid, specs = _expand(args)
    _check_splits(specs)
    _check_tail_backbones(specs)
    _check_timm_models(specs)
    done = [s for s in specs if is_done(args.results, s)]
    for spec in specs if not args.dry_run else ():
        out = run_dir(args.results, spec)
        if spec not in done and (out / DONE).exists() and _rebuild_metrics(out):
            done.append(spec)
    finished = {s.run_id for s in done}
    for spec in specs:
        out = run_dir(args.results, spec)
        if spec.run_id not in finished and (out / DONE).exists():  # marked done, but cannot be read back
            bad = "; ".join(f"{out / name}: {why}" for name, why in unreadable(out).items())
            print(f"bench: warning: run {spec.run_id} ({spec.describe()}) is marked done but cannot be read back "
                  f"({bad}); it runs again, its damaged files kept aside in the run directory", file=sys.stderr)
    if args.force:
        pending = specs
    elif args.retry_failed:
        pending = [s for s in specs if s.run_id not in finished and (run_dir(args.results, s) / ERROR).exists()]
    else:
        pending = [s for s in specs if s.run_id not in finished]
    if not args.dry_run:
        _preflight(pending)
        _check_caches(args.results, pending)
    if args.cluster == "slurm":
        return _run_slurm(args, grid, specs, pending)
    if args.dry_run:
        print(f"grid {grid.name}: {len(specs)} runs, {len(done)} done, {len(pending)} would run")
        for spec in pending:
            print(f"  {spec.run_id}  {spec.describe()}")
        return 0
    check_writable(args.results)
    if not pending:
        what = "no failed runs to retry" if args.retry_failed else "nothing to run (--force re-runs them)"
        print(f"grid {grid.name}: {len(done)} of {len(specs)} runs already done, {what}"
              if len(done) < len(specs) else f"grid {grid.name}: all {len(specs)} runs already done, {what}")
        _print_leaderboard(args.results, specs, _default_backbone(args, grid))
        return 0
    for spec in pending if args.force else ():
        invalidate(args.results, spec)
    print(f"grid {grid.name}: {len(specs)} runs, {len(specs) - len(pending)} already done, "
          f"running {len(pending)} on {args.cluster}")
    start = time.monotonic()
    from bench.scheduler import run_specs
    from bench.workers import sigterm_stops

    with sigterm_stops():  # a closed session's or `timeout`'s SIGTERM stops the runs as Ctrl-C does
        outcome = run_specs(pending, args.results, cluster=args.cluster, max_parallel=args.workers)
    busy = f", {len(outcome.busy)} skipped (being run elsewhere)" if outcome.busy else ""
    print(f"{len(outcome.done)} done, {len(outcome.failed)} failed{busy} in {time.monotonic() - start:.1f}s")
    _print_leaderboard(args.results, specs, _default_backbone(args, grid))
    return _report_failures(args.results, outcome.failed)


def _rebuild_metrics(out: Path) -> bool:
    """A finished run whose metrics.parquet alone is unreadable gets it back from its stored
    predictions, here and now (seconds on the CPU), instead of running again (GPU-hours)."""
    from bench.predictions import PREDICTIONS
    from bench.rundir import METRICS, RunBusy, unreadable

    if set(unreadable(out)) != {METRICS} or not (out / PREDICTIONS).exists():
        return False  # nothing to rebuild from: no torch imported for it
    from bench.runner import rebuild_metrics

    try:
        why = rebuild_metrics(out)
    except RunBusy:
        return False
    if why is not None:
        print(f"bench: warning: run {out.name}: {out / METRICS} could not be read ({why}); rebuilt from its "
              f"{PREDICTIONS} without running again, the damaged file kept aside in the run directory", file=sys.stderr)
    return why is not None


def _report_failures(results: Path, failed: Sequence[tuple[Any, str]]) -> int:
    from bench.rundir import run_dir

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


def _run_slurm(args: argparse.Namespace, grid: Any, specs: Sequence[Any], pending: Sequence[Any]) -> int:
    from bench import slurm
    from bench.rundir import check_writable, invalidate

    profile = slurm.load_profile(args.profile)
    overrides = _parse_options(args.slurm_options)
    start = args.started  # the plan's time includes expanding the grid
    chunks = slurm.plan(pending, profile, overrides)
    if args.dry_run:
        print(f"grid {grid.name}: {len(specs)} runs, {len(specs) - len(pending)} done, {len(pending)} would be "
              f"submitted as {len(chunks)} job array(s) with profile {profile.name} "
              f"(planned in {time.monotonic() - start:.2f}s)")
        for params, members in chunks:
            print(f"  array of {len(members):>4} runs: {slurm._summary(params)}")
        return 0
    check_writable(args.results)
    if not pending:
        print(f"grid {grid.name}: all {len(specs)} runs already done, nothing to submit")
        _print_leaderboard(args.results, specs, _default_backbone(args, grid))
        return 0
    for spec in pending if args.force else ():
        invalidate(args.results, spec)
    sub = slurm.submit(pending, args.results, profile, overrides, grid.name)
    submitted = sum(n for _, n, _ in sub.arrays)
    print(f"grid {grid.name}: submitted {submitted} runs in {len(sub.arrays)} job array(s) "
          f"({sub.skipped_active} already queued or running) in {time.monotonic() - start:.1f}s")
    for job_id, n, summary in sub.arrays:
        print(f"  job {job_id}: {n} runs ({summary})")
    if not args.wait:
        print(f"follow with: bench status --grid {grid.name}" + (f" --results {args.results}" if args.results != DEFAULT_RESULTS else ""))
        return 0
    final = slurm.wait(args.results, specs)
    _print_leaderboard(args.results, specs, _default_backbone(args, grid))
    failed = [(s, _error_line(args.results, s)) for s in final.states.get("failed", [])]
    return _report_failures(args.results, failed)


def _error_line(results: Path, spec: Any) -> str:
    from bench.rundir import ERROR, run_dir

    path = run_dir(results, spec) / ERROR
    return path.read_text().splitlines()[0] if path.exists() else "no error.txt: see the job's submitit log"


def cmd_status(args: argparse.Namespace) -> int:
    from bench import slurm
    from bench.rundir import run_dir

    grid, specs = _expand(args)
    current = slurm.status(args.results, specs)
    counts = current.counts()
    print(f"grid {grid.name}: {len(specs)} runs: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    if not current.accounting:
        print("(no SLURM accounting reachable: states come from the run directories)")
    failed = current.states.get("failed", [])
    if failed:
        from tabulate import tabulate

        jobs = slurm.latest_jobs(args.results)
        rows = [(s.describe(), jobs.get(s.run_id, {}).get("job_id", "-"), _error_line(args.results, s),
                 str(run_dir(args.results, s) / "log.txt")) for s in failed]
        print(tabulate(rows, headers=("failed run", "job", "error", "log"), tablefmt="github"))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from bench import slurm

    grid, specs = _expand(args)
    ids = slurm.cancel(args.results, specs)
    print(f"grid {grid.name}: cancelled {len(ids)} job(s)" + (f": {', '.join(ids)}" if ids else ""))
    return 0


def _default_backbone(args: argparse.Namespace, grid: Any) -> str:
    """The backbone whose rows need no backbone in their label: the first selected, else the grid's first."""
    return (args.backbones or grid.backbones)[0]


def _run_dirs(results: Path, specs: Sequence[Any]) -> list[Path]:
    from bench.rundir import run_dir

    return [run_dir(results, s) for s in specs]


def _print_leaderboard(results: Path, specs: Sequence[Any], default_backbone: str) -> None:
    from bench.report.aggregate import backbone_label, final_scores
    from bench.report.load import load_metrics
    from bench.report.table import leaderboard

    frame = load_metrics(_run_dirs(results, specs))
    if len(frame):
        # runs of another backbone than the grid's first are rows of their own, as in `bench report`
        frame["label"] = [backbone_label(l, b, default_backbone) for l, b in zip(frame["label"], frame["backbone"])]
        print()
        print(leaderboard(final_scores(frame), references=_references(frame)))
        _warn_mixed_versions(frame)


def _warn_mixed_versions(frame: Any) -> None:
    """A warning per table cell that averages runs of different versions (torch, CUDA, weights...)."""
    from bench.report.aggregate import mixed_versions

    for line in mixed_versions(frame, VERSION_COLUMNS):
        print(f"bench: warning: {line}", file=sys.stderr)


def _references(frame: Any) -> tuple[str, ...]:
    """The frame's labels of the reference methods (K-means, the Joint methods): marked, never bold, as in
    the paper. Read from the frame, whose labels may name a backbone or a configuration after the method;
    a method no longer registered is not a reference (its runs still report)."""
    from bench.registries.catalogue import method_info

    pairs = frame[["label", "method"]].astype(str).drop_duplicates()
    return tuple(label for label, method in pairs.itertuples(index=False)
                 if (info := method_info(method)) is not None and info.sees_past_steps)


def cmd_list(args: argparse.Namespace) -> int:
    from bench.spec import SPLITS, grid_names, load_grid
    from bench.registries import DATASETS
    from bench.registries.catalogue import catalogue, method_info, method_names

    if args.kind == "methods":
        from bench.spec import _read_config, preset_names
        from bench.registries import PRESETS_DIR

        for name in method_names():
            info = method_info(name)
            role = "reference, sees past steps" if info.sees_past_steps else "incremental"
            presets = preset_names(_read_config(str(PRESETS_DIR / f"{info.preset_file}.py")))
            print(f"{name:<18} {info.inputs:<9} {role}; presets: {', '.join(presets)}")
    elif args.kind == "datasets":
        DATASETS.import_from_location()
        for name, cls in sorted(DATASETS.module_dict.items()):
            print(f"{name:<14} {_first_doc_line(cls)}")
    elif args.kind == "splits":
        for name, n in SPLITS.items():
            print(f"{name:<9} {n} tasks of contiguous classes in the dataset's canonical order")
    elif args.kind == "backbones":
        for name, doc in sorted(catalogue()["backbone_docs"].items()):
            shown = "timm:<model name>" if name == "timm" else name
            print(f"{shown:<20} {doc}")
    else:
        from bench.spec import expand

        for name in grid_names():
            g = load_grid(name)
            n = len(expand(g))
            print(f"{name:<8} {n:>4} runs: {', '.join(g.methods)} on {', '.join(g.datasets)}; "
                  f"{', '.join(g.splits)}; {', '.join(g.backbones)}; seeds {', '.join(map(str, g.seeds))}")
    return 0


def _first_doc_line(obj: Any) -> str:
    return (obj.__doc__ or "").strip().splitlines()[0] if obj.__doc__ else ""


def cmd_data(args: argparse.Namespace) -> int:
    from bench.data import build_dataset
    from bench.data.summary import summary_table
    from bench.spec import n_steps_of
    from bench.registries import load_all

    load_all()
    options = {}
    for key, value in _parse_options(args.cfg_options).items():
        if not key.startswith("dataset."):
            raise BenchError(f"bench data takes dataset options only (dataset.key=value), got {key!r}")
        options[key.split(".", 1)[1]] = value
    n_steps = n_steps_of(args.split)
    data = build_dataset(args.dataset, options, _data_root(args), str(Path(args.results).resolve() / "partitions"))
    try:
        print(summary_table(data.name, data.train.labels, data.test.labels, data.num_classes, n_steps,
                            len(data.val) if data.val is not None else 0, root=data.root))
    except ValueError as err:
        raise BenchError(f"split {args.split!r} does not fit dataset {args.dataset!r}: {err}") from None
    return 0


def _compare_methods(frame: Any, labels: Sequence[str], out: Path, suffix: str) -> Path:
    """`bench report --compare A B`: A − B per cell over the seeds both ran, with its 95% CI."""
    from tabulate import tabulate

    from bench.report.aggregate import seed_values
    from bench.report.stats import paired_differences
    from bench.storage import write_atomic

    values = seed_values(frame)
    known = list(dict.fromkeys(values["label"]))
    if len(labels) != 2 or any(label not in known for label in labels):
        raise BenchError(f"--compare takes `paper` or two method labels of the report; got {' '.join(labels)}; "
                         f"labels: {', '.join(known)}")
    first, second = labels
    table = paired_differences(values, first, second)
    path = out / f"compare_{first}_vs_{second}.{suffix}".replace(" ", "_").replace("/", "_")
    if suffix == "csv":
        write_atomic(path, table.to_csv(index=False, float_format="%.4f"))
    else:
        rows = [(r.split, r.dataset, r.metric, r.n, f"{r.diff:+.1f}",
                 "--" if r.n < 2 else f"{r.ci_low:+.1f} … {r.ci_high:+.1f}",
                 "yes" if r.beyond_noise else "no") for r in table.itertuples()]
        text = tabulate(rows, headers=("split", "dataset", "metric", "shared seeds", f"{first} − {second}", "95% CI",
                                       "beyond noise"), tablefmt="latex_booktabs" if suffix == "tex" else "github",
                        disable_numparse=True)
        write_atomic(path, text + "\n")
        print(text)
    return path


def cmd_metrics(args: argparse.Namespace) -> int:
    """`bench metrics recompute`: every finished run of the grid (or under the results root)."""
    from bench.recompute import finished_runs, recompute_run
    from bench.rundir import run_dir

    if args.grid:
        _, specs = _expand(args)
        runs = [run_dir(args.results, s) for s in specs if (run_dir(args.results, s) / "DONE").exists()]
    else:
        runs = finished_runs(args.results)
    if not runs:
        raise BenchError(f"no finished runs under {args.results}" + (f" of grid {args.grid!r}" if args.grid else ""))
    outcomes = [recompute_run(run, write=not args.dry_run) for run in runs]
    for outcome in outcomes:
        if outcome.status == "changed":
            print(f"{outcome.run.name}: {outcome.n_changed} value(s) {'would change' if args.dry_run else 'changed'}, e.g. "
                  + "; ".join(outcome.changed[:3]))
        elif outcome.status == "rebuilt":
            print(f"{outcome.run.name}: {outcome.changed[0]} from its stored predictions")
        elif outcome.status == "not rebuilt":
            print(f"{outcome.run.name}: {outcome.changed[0]}")
        elif outcome.status == "skipped":
            print(f"{outcome.run.name}: skipped: {outcome.changed[0]}")
        elif outcome.status != "unchanged":
            print(f"{outcome.run.name}: skipped, {outcome.status} (recorded before runs kept them); left as it is")
    counts = {status: sum(o.status == status for o in outcomes)
              for status in ("changed", "unchanged", "rebuilt", "not rebuilt", "skipped", "no stored predictions")}
    print(f"recomputed {len(runs)} finished run(s): {counts['changed']} changed, {counts['unchanged']} unchanged, "
          f"{counts['rebuilt']} rebuilt, " + (f"{counts['not rebuilt']} not rebuilt, " if counts["not rebuilt"] else "")
          + (f"{counts['skipped']} skipped (their predictions unreadable or another run's), " if counts["skipped"] else "")
          + f"{counts['no stored predictions']} without stored predictions")
    return 1 if counts["not rebuilt"] or counts["skipped"] else 0


def cmd_cache(args: argparse.Namespace) -> int:
    from datetime import datetime

    from tabulate import tabulate

    from bench.bank import default_cache_dir, list_folders, remove_banks

    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir(args.results)
    if args.action == "list":
        folders = list_folders(cache)  # damaged and incomplete ones too, with their status
        banks = [b for b in folders if b.status == "ok"]
        rows = [(b.key, b.kind + (f" (prefix {b.fields['prefix_blocks']} blocks)" if "prefix_blocks" in b.fields else ""),
                 b.fields.get("dataset"), b.fields.get("backbone"), b.fields.get("views"),
                 f"{b.size_bytes / 2**20:.1f}", datetime.fromtimestamp(b.last_used).strftime("%Y-%m-%d %H:%M"), b.status)
                for b in folders]
        others = f"; {len(folders) - len(banks)} damaged or incomplete folder(s), `bench cache remove NAME` frees them" \
            if len(folders) > len(banks) else ""
        print(f"{len(banks)} bank(s) in {cache}, {sum(b.size_bytes for b in folders) / 2**20:.1f} MiB{others}")
        if rows:
            print(tabulate(rows, headers=("key", "kind", "dataset", "backbone", "views", "MiB", "last used", "status"),
                           tablefmt="github"))
        return 0
    if not args.keys and not args.all:
        raise BenchError("bench cache remove needs bank keys (see `bench cache list`) or --all")
    removed = remove_banks(cache, None if args.all else args.keys)
    print(f"removed {len(removed)} bank(s) from {cache}")
    return 0


def _finished_runs(args: argparse.Namespace) -> tuple[Any, list[Any], list[Path]]:
    """`bench report` without --grid: every finished run under the results root (what the user just
    ran, whatever grid or options it came from), narrowed by --methods, --datasets, --splits, --seeds
    and --backbone, as one grid named `all`; with the directories to read. A directory whose spec.json
    cannot be read is among them whatever the selection (what it holds is unknown): the report names it."""
    from collections import Counter

    from bench.rundir import DONE
    from bench.spec import Block, Grid, RunSpec, parse_method

    if args.cfg_options:
        raise BenchError("--cfg-options selects runs of a grid: name it with --grid (without --grid, bench report "
                         "reports every finished run under the results root)")
    selected = {parse_method(entry) for entry in args.methods or ()}
    specs, directories = [], []
    for directory in sorted((Path(args.results) / "runs").glob("*/")):
        if not (directory / DONE).exists():
            continue
        try:
            spec = RunSpec.from_json((directory / "spec.json").read_text())
        except Exception:  # not JSON, not a spec's fields (a list has no .pop): `load_runs` says which
            directories.append(directory)
            continue
        if ((args.methods and (spec.method, spec.preset) not in selected)  # `Baseline:equations` names a preset, as in grids
                or (args.datasets and spec.dataset not in args.datasets) or (args.splits and spec.split not in args.splits)
                or (args.seeds and spec.seed not in args.seeds) or (args.backbones and spec.backbone not in args.backbones)):
            continue
        specs.append(spec)
        directories.append(directory)  # its own: an edited spec.json's run id names another directory
    specs.sort(key=lambda s: (s.method, s.preset, s.dataset, s.n_steps, s.backbone, s.seed))
    backbones = [b for b, _ in Counter(s.backbone for s in specs).most_common()]  # the usual one first
    axis = {name: tuple(dict.fromkeys(getattr(s, name) for s in specs)) for name in ("dataset", "split")}
    block = Block(tuple(dict.fromkeys(Block._entry(s) for s in specs)), axis["dataset"], axis["split"], tuple(backbones))
    print(f"no --grid given: reporting the {len(directories)} finished run(s) under {Path(args.results) / 'runs'}"
          + (f" ({', '.join(dict.fromkeys(s.label for s in specs))} on {', '.join(axis['dataset'])})" if specs else ""))
    grid = Grid(name="all", blocks=(block,), seeds=tuple(sorted({s.seed for s in specs})), cfg={})
    return grid, specs, directories


def cmd_report(args: argparse.Namespace) -> int:
    from bench.report import steps_figures, write_report
    from bench.report.aggregate import backbone_label, final_scores, split_by
    from bench.report.load import load_runs
    from bench.report.table import render_table
    from bench.storage import write_atomic

    if args.grid:
        grid, specs = _expand(args)
        directories = _run_dirs(args.results, specs)
    else:
        grid, specs, directories = _finished_runs(args)
    frame, unplaced = load_runs(directories, pool_orders=args.pool_orders)
    if not len(frame):
        if not args.grid:
            raise BenchError(f"no finished runs under {args.results} match the selection; `bench run` makes some")
        raise BenchError(f"no finished runs of grid {grid.name!r} under {args.results}; run `bench run --grid {grid.name}` first")
    out = args.out or Path(args.results) / "reports" / grid.name
    _check_report_dir(out)
    default_backbone = _default_backbone(args, grid)
    labelled = frame.assign(label=[backbone_label(l, b, default_backbone) for l, b in zip(frame["label"], frame["backbone"])])
    # --pool-orders: load_runs made each (class order, seed) one sample of the cell, as mammoth and PyCIL
    # average orders, before it told configurations apart
    labels = _row_order(labelled, specs)
    if args.by:  # each label's rows by version, next to each other in the labels' order
        labelled = split_by(labelled, args.by, VERSION_COLUMNS)
        labels = [split for label in labels for split in sorted(set(labelled["label"]))
                  if split.startswith(f"{label} · {args.by}=")]
    _warn_mixed_versions(labelled)
    order = {"split": list(dict.fromkeys(s.split_label for s in specs)),
             "dataset": list(dict.fromkeys(s.dataset for s in specs)), "label": labels}
    references = _references(labelled)
    paths = write_report(labelled, out, args.format, title=f"grid {grid.name}", order=order,
                         exclude_from_best=references)
    suffix = {"latex": "tex", "markdown": "md", "csv": "csv"}[args.format]
    for block in grid.blocks if len(grid.blocks) > 1 else ():
        mine = sorted((s for s in specs if block.contains(s)), key=block.position)
        part = labelled[labelled["run_id"].isin({s.run_id for s in mine})]
        if block.name and len(part):
            path = out / f"table_{block.name}.{suffix}"
            block_order = {**order, "label": _row_order(part, mine)}
            write_atomic(path, render_table(final_scores(part, block_order), args.format, layout=block.layout,
                                            exclude_from_best=references, caption=f"grid {grid.name}, {block.name}."))
            paths.append(path)
            paths += steps_figures(part, out, f"steps_{block.name}", block_order)  # the appendix's figures
    if args.compare and args.compare != ["paper"]:
        paths.append(_compare_methods(labelled, args.compare, out, suffix))
    elif args.compare:
        from bench.report.compare import compare, paper_reference, render_compare

        # score the relabelled frame, so that runs of different backbones are never averaged together,
        # then give the rows their method label back: the backbone is a column of its own
        scores = final_scores(labelled, order)
        scores["label"] = scores["label"].astype(str).str.split(" · ").str[0]
        table = compare(scores, paper_reference(default_backbone="dino-vitb16"))
        path = out / f"compare_paper.{suffix}"
        write_atomic(path, render_compare(table, args.format))
        paths.append(path)
    finished = frame["run_id"].nunique() + len(unplaced)
    left_out = (f", {len(unplaced)} of them in no row ({', '.join(u.run for u in unplaced)}: see the warnings above)"
                if unplaced else "")
    print(f"report of grid {grid.name}: {finished}/{len(directories)} runs finished{left_out}; "
          f"wrote {len(paths)} files to {out}")
    for path in paths:
        print(f"  {path}")
    return 0


def _check_report_dir(out: Path) -> None:
    """One line, before anything is computed, when the report cannot be written to `out` (a read-only
    mount, a file of that name, a file where a parent directory should be)."""
    from bench.storage import unwritable

    err = unwritable(_usable_path(Path(out), "--out"))
    if err is None or disk_full(err):  # a full disk: the writes say so in their own line, naming the file
        return
    why = {errno.EEXIST: "a file of that name exists", errno.ENOTDIR: "a part of the path is a file"}.get(
        err.errno, err.strerror)
    raise BenchError(f"cannot write the report to {_shortened(out)} ({why}); choose another directory with --out DIR")


def _row_order(frame: Any, specs: Sequence[Any]) -> list[str]:
    """The frame's row labels in the order of the runs they hold (`specs`, the grid's order): one
    method's rows (its backbones, configurations) stay together."""
    label_of = dict(zip(frame["run_id"], frame["label"].astype(str)))
    return list(dict.fromkeys(label_of[s.run_id] for s in specs if s.run_id in label_of))


class _ReaderMayLeave:
    """stdout for `bench ... | head`: once the reader has gone, what is written is discarded instead of
    raising BrokenPipeError, so that no run fails over it and the exit status still says whether
    every run finished."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        # point the file descriptor at /dev/null: later writes and the interpreter's last flush succeed
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """`bench ARGS`: the command's exit status. From the command line (no `argv`), the process then
    ends without the interpreter's teardown (`_exit_now`); a caller that passes `argv` goes on."""
    stdout, stderr = sys.stdout, sys.stderr
    # both: `bench run 2>&1 | head` closes stderr too, and a warning or the list of failed runs written
    # there must not end the command nor turn its exit status into another
    sys.stdout, sys.stderr = _ReaderMayLeave(stdout), _ReaderMayLeave(stderr)
    try:
        code = _main(argv)
        if argv is None:
            _exit_now(code)  # flushes through _ReaderMayLeave: a reader that left costs nothing
        return code
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _exit_now(code: int) -> None:
    """Do what the interpreter's exit does first (join threads, as idle executors' are told to end;
    run the atexit handlers: worker pools, logging), flush, and end the process without the
    interpreter's teardown: its final garbage collection of what torch allocated takes 1.4 s of a
    light command's 1.5, and it is where nanobind (triton's bindings: torchvision.ops imports
    torch._dynamo, which imports triton) prints ~30 lines of "nanobind: leaked ..." when objects
    outlive it, as they did under the gc.freeze() that skipped that collection before."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # CPython's own first step of Py_FinalizeEx
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`bench ... | head`): nothing more to say
            pass
    os._exit(code)


def _main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv or ["run"])
    if args.command is None:
        args = parser.parse_args(["run", *argv])
    try:
        commands = {"run": cmd_run, "status": cmd_status, "cancel": cmd_cancel, "list": cmd_list,
                    "report": cmd_report, "cache": cmd_cache, "data": cmd_data, "metrics": cmd_metrics}
        return commands[args.command](args)
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:  # a path option, or a path built from one, beyond the file system's limits
            print(f"bench: error: a path is too long for the file system ({err.strerror}): "
                  f"{_shortened(err.filename or err)}; give shorter paths", file=sys.stderr)
            return 2
        if not disk_full(err):
            raise
        print(f"bench: error: {DISK_FULL.format(err.filename or err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: every run checkpoints after each step
        from bench.workers import INTERRUPTED, STOP_SIGNALS, exit_at_once

        for sig in STOP_SIGNALS if command_line and threading.current_thread() is threading.main_thread() else ():
            signal.signal(sig, exit_at_once)  # a second one ends bench now, whatever exiting still waits for
        print(INTERRUPTED, file=sys.stderr)
        return 128 + getattr(err, "signum", signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())

"""One job = one RunSpec: build the task sequence, the features and the method, then learn and
evaluate step by step, checkpointing after every step so that a killed or requeued run resumes
from its last finished step with the same final metrics.

The protocol is enforced here: a method receives `Step`s holding the unlabelled training data of
the current step (and earlier steps only if it declares `sees_past_steps`); labels stay with the
evaluator.
"""
from __future__ import annotations

import fcntl
import os
import pickle
import random
import socket
import subprocess
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
import torch
from mmengine.config import Config

import bench
from bench.backbones import build_backbone
from bench.data import ImageSet, build_dataset
from bench.errors import BenchError, first_line
from bench.evaluate import Evaluator, MetricRow, TaskLayout
from bench.bank import default_cache_dir, load_or_build, weights_identity
from bench.features import Encoder, FeatureViews, LiveViews, extract
from bench.tokens import LiveTokens, Prefix
from bench import numerics, predictions
from bench.provenance import VERSION_COLUMNS, provenance as versions
from bench.rundir import (CHECKPOINT, DONE, ERROR, METRICS, RunBusy, check_writable, invalidate,  # noqa: F401
                          is_done, run_dir, set_aside, unreadable)
from bench.spec import FEATURE_MODES, RunSpec, features_protocol
from bench.storage import atomic_path, write_atomic

def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(bench.__file__).parent, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _device(spec: RunSpec) -> torch.device:
    wanted = spec.location.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(wanted)


class Log:
    """Appends timestamped lines to the run's log.txt (and echoes them for the job's stdout)."""

    def __init__(self, path: Path, echo: bool) -> None:
        self.path, self.echo = path, echo

    def __call__(self, message: str) -> None:
        line = f"{_now()} {message}"
        with self.path.open("a") as fh:
            fh.write(line + "\n")
        if self.echo:
            try:
                print(line, flush=True)
            except BrokenPipeError:  # `bench run | head`: the reader left; the run goes on, log.txt has it all
                self.echo = False


def execute(spec: RunSpec, results: Path, *, echo: bool = False) -> Path:
    """Run `spec` to completion under `results/runs/<run_id>/`, resuming from a checkpoint if one
    exists. On failure the error and traceback go to `error.txt` and the exception propagates.

    An exclusive lock on the run directory keeps two processes from running the same run at once;
    the second raises `RunBusy` and touches nothing. A run already DONE is not run again."""
    out = run_dir(results, spec)
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out):
        log = Log(out / "log.txt", echo)
        if (out / DONE).exists():
            bad = unreadable(out)
            if not bad or _rebuilt(out, bad, log):
                return out
            aside = set_aside(out, bad)
            log(f"results unreadable ({'; '.join(f'{k}: {v}' for k, v in bad.items())}): moved to {aside.name}/, "
                f"running again")
        (out / ERROR).unlink(missing_ok=True)
        try:
            with numerics.restored():  # an in-process caller gets its own threads and kernels back
                _run(spec, out, log)
        except Exception as err:
            try:
                write_atomic(out / ERROR, f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}")
                log(f"FAILED: {type(err).__name__}: {err}")
            except OSError:  # a full disk: the run's own error still reaches the caller
                pass
            raise
        except BaseException as err:  # SystemExit from submitit's requeue handler, Ctrl-C: not a failure
            log(f"interrupted ({type(err).__name__}); the next attempt resumes from the last checkpoint")
            raise
    return out


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """An exclusive lock on the run directory, or `RunBusy` at once."""
    with (out / ".lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"run {out.name} is being run by another process") from None
        yield


def rebuild_metrics(out: Path) -> str | None:
    """`metrics.parquet` of the finished run `out` rebuilt from its `predictions.npz` when the metrics
    are its only unreadable file; None when it is readable or cannot be rebuilt (the run must run again)."""
    with _locked(out):
        bad = unreadable(out) if (out / DONE).exists() else {}
        log = Log(out / "log.txt", echo=False)
        return bad.get(METRICS) if bad and _rebuilt(out, bad, log) else None


def _rebuilt(out: Path, bad: dict[str, str], log: Log) -> bool:
    """A finished run whose only unreadable file is `metrics.parquet` gets it back from what its
    evaluator was given (`predictions.npz`), without running again: a re-run costs GPU-hours."""
    if set(bad) != {METRICS} or not (out / predictions.PREDICTIONS).exists():
        return False
    try:
        frame = rebuilt_frame(out)
    except Exception as err:  # damaged predictions too: numpy and zipfile raise many types
        log(f"cannot rebuild {METRICS} from {predictions.PREDICTIONS} ({first_line(err)}); running again")
        return False
    aside = set_aside(out, [METRICS])  # the DONE marker goes with it, and comes back below
    _write_metrics(out, frame)
    write_atomic(out / DONE, _now() + "\n")
    log(f"{METRICS} unreadable ({bad[METRICS]}): moved to {aside.name}/, rebuilt from {predictions.PREDICTIONS} "
        f"without running again")
    return True


def rebuilt_frame(out: Path) -> pd.DataFrame:
    """The metrics frame of a finished run from its spec.json and predictions.npz. What the damaged
    file alone knew of the training (its host, device, SLURM job, versions, times) is lost: those columns say
    `unknown` (duration NaN, started/ended the rebuild's time) and `rebuilt_from` names the source.
    Predictions that name another run (copied in) raise `ForeignFile`; ones written before predictions
    named their run are accepted as before."""
    spec = RunSpec.from_json((out / "spec.json").read_text())
    predictions.check_owner(out / predictions.PREDICTIONS, spec.run_id)  # another run's: refused, not its metrics
    rows = predictions.replay(out / predictions.PREDICTIONS)
    frame = _frame(spec, rows, torch.device("cpu"), _now(), float("nan"), _mapping_images(out))
    # the version columns (the device among them) are the training's, not the rebuild's
    return frame.assign(host="unknown", slurm_job_id="unknown", **dict.fromkeys(VERSION_COLUMNS, "unknown"),
                        rebuilt_from=predictions.PREDICTIONS)


def _mapping_images(out: Path) -> str:
    """Which images froze the task mappings, as the run logged it ("unknown" without its log)."""
    path = out / "log.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    said = [line for line in lines if "task mappings frozen on the " in line]
    return ("val" if "held-out validation" in said[-1] else "train") if said else "unknown"


def _write_metrics(out: Path, frame: pd.DataFrame) -> None:
    with atomic_path(out / METRICS) as tmp:  # removed if the write fails (a full disk)
        frame.to_parquet(tmp, index=False)


def _run(spec: RunSpec, out: Path, log: Log) -> None:
    from bench.methods.base import Step
    from bench.registries import METHODS

    write_atomic(out / "spec.json", spec.to_json())
    Config(dict(spec.config)).dump(str(out / "config.py"))
    device = _device(spec)
    clock = time.monotonic()
    state = _read_checkpoint(out, log)  # first: the steps it holds ran with its thread count, the rest must too
    threads = _threads(spec, state, log)
    log(f"run {spec.run_id}: {spec.describe()} on {device}, process {os.getpid()}, {threads} thread(s)")
    log(f"numerics: {'; '.join(numerics.fix(threads, device))}")

    data = build_dataset(spec.dataset, spec.config["dataset"], spec.location.get("data_root"),
                         spec.location.get("partitions_dir") or str(out.parent.parent / "partitions"))
    order_seed = spec.config.get("split", {}).get("class_order_seed")
    data = data.with_class_order(order_seed)
    if order_seed is not None:
        log(f"class order {order_seed}: the canonical classes in the order {data.extra['class_order']}")
    layout = TaskLayout.contiguous(data.num_classes, spec.n_steps)
    backbone = build_backbone(spec.backbone, spec.config["backbone"], data.train.image_shape,
                              spec.location.get("weights_dir")).to(device)
    val_images = data.val_or_train()
    mapping_images = "val" if data.val is not None else "train"
    log(f"task mappings frozen on the {'held-out validation' if mapping_images == 'val' else 'training'} images")
    without_val = sorted(set(range(data.num_classes)) - set(val_images.labels.tolist()))
    if without_val:
        log(f"WARNING: {len(without_val)} class(es) have no {mapping_images} image to freeze the task mapping from "
            f"(e.g. class {without_val[0]} {data.class_names[without_val[0]]!r}); their test images never count "
            f"as correct in the task-agnostic (wo) flavour")

    method = METHODS.build(dict(type=spec.method, feature_dim=backbone.feature_dim, seed=spec.seed,
                                **spec.config["method"]))
    # what tail methods copy and fine-tune, and in which precision, also after a resume
    method.bind(backbone, spec.config.get("precision", {}).get("tails", "fp32"))
    train = val = test = None  # the feature bank, built (or read) only for a method that reads features
    if method.reads_features():
        train, val, test = features_for(spec, data, backbone, device, spec.config["features"]["views"], log,
                                        results=out.parent.parent)
        log(f"features ({spec.config['features']['mode']}): train {tuple(train.plain.shape)} with "
            f"{train.views.shape[1]} stored views, test {tuple(test.plain.shape)}, {time.monotonic() - clock:.1f}s")
    inputs = INPUTS[method.inputs](method=method, backbone=backbone, data=data, device=device, spec=spec,
                                   features=(train, val, test), val_images=val_images, log=log,
                                   results=out.parent.parent)
    evaluator = Evaluator(layout)
    rows: list[MetricRow] = []
    stored: dict[str, np.ndarray] = {}  # what the evaluator was given (bench.predictions)
    first_step, started_at, spent = 0, _now(), 0.0
    if state is not None:
        method.load_state_dict(state["method"])
        evaluator.load_state_dict(state["evaluator"])
        rows = [MetricRow(**r) for r in state["rows"]]
        stored = dict(state.get("predictions", {}))
        first_step, started_at, spent = state["step"] + 1, state["started_at"], state["duration_s"]
        log(f"resuming after step {state['step']}")

    train_task = layout.task_of(data.train.labels)
    test_task = layout.task_of(data.test.labels)
    val_task = layout.task_of(val_images.labels)
    for t in range(first_step, spec.n_steps):
        seed_everything(spec.seed * 1000 + t)
        offset, n_classes = layout.offsets[t], layout.sizes[t]
        of_task = [step_order(np.flatnonzero(train_task == s), spec.seed, s) for s in range(t + 1)]
        def features_of(rows: np.ndarray) -> FeatureViews | None:
            return train.subset(rows).to(device) if train is not None else None

        step = Step(index=t, n_classes=n_classes, offset=offset, train=features_of(of_task[t]),
                    last=t == spec.n_steps - 1, device=device,
                    past=[features_of(rows) for rows in of_task[:t]] if method.sees_past_steps else [],
                    **inputs.step_fields(of_task, method.sees_past_steps))
        method.learn(step)

        val_pred = {s: _task_predictions(method, inputs, s, np.flatnonzero(val_task == s)) for s in range(t + 1)}
        val_labels = {s: val_images.labels[val_task == s] for s in range(t + 1)}
        evaluator.freeze_mapping(t, val_labels[t], val_pred[t])
        refit = {s: evaluator.fit_mapping(s, val_labels[s], val_pred[s]) for s in range(t)}
        seen = np.flatnonzero(test_task <= t)
        unified, task_pred = _predict(method, inputs.batches("test", seen), t, test_task[seen] == t)
        step_rows = evaluator.evaluate(t, data.test.labels[seen], unified, task_pred, refit=refit)
        rows.extend(step_rows)
        predictions.record(stored, t, val_labels=val_labels[t], val_pred=val_pred[t],
                           test_labels=data.test.labels[seen], unified=unified, task_pred=task_pred,
                           mapping=evaluator.mappings[t], refit_pred=[val_pred[s] for s in range(t)])
        acc = {(r.group, r.flavour): r.value for r in step_rows if r.metric == "acc"}
        log(f"step {t + 1}/{spec.n_steps}: task-specific {acc[(f'task_{t}', 'task')]:.1f}, "
            f"all wo {acc[('all', 'wo')]:.1f}, all w {acc[('all', 'w')]:.1f}")
        state = {"step": t, "method": method.state_dict(), "evaluator": evaluator.state_dict(),
                 "rows": [asdict(r) for r in rows], "predictions": stored, "started_at": started_at,
                 "duration_s": spent + time.monotonic() - clock, "threads": threads}
        _save_checkpoint(out / CHECKPOINT, state)

    rows.extend(evaluator.summary(rows, spec.n_steps))
    frame = _frame(spec, rows, device, started_at, spent + time.monotonic() - clock, mapping_images,
                   weights=backbone.weights)
    predictions.write(out, layout, stored, spec.run_id)
    _write_metrics(out, frame)
    write_atomic(out / DONE, _now() + "\n")
    (out / CHECKPOINT).unlink(missing_ok=True)
    summary = {(r.flavour, r.metric): r.value for r in rows if r.group == "summary"}
    shown = {name: f"{name}={summary[source]:.1f} ({'/'.join(source)})" for name, source in method.reported.items()}
    log(f"done: {shown['A']} {shown['F']}")


def _threads(spec: RunSpec, state: Mapping[str, Any] | None, log: Log) -> int:
    """The run's CPU compute threads: its checkpoint's where it resumes (the finished steps' numbers
    were computed with them), else what the command asked for (`--threads`), else the default."""
    asked = int(spec.location.get("threads") or numerics.DEFAULT_THREADS)
    stored = state.get("threads") if state is not None else None
    if stored is None:
        if state is not None:  # a checkpoint from before runs kept their count: its steps used the pool's
            log(f"WARNING: the checkpoint does not say how many threads its finished steps ran with; resuming "
                f"with {asked}: its metrics may differ in the last digits from an uninterrupted run's")
        return asked
    if int(stored) != asked:
        log(f"resuming with {stored} thread(s), the count its finished steps ran with, not the {asked} asked for")
    return int(stored)


def step_order(indices: np.ndarray, seed: int, step: int) -> np.ndarray:
    """A step's training images in a seeded random order (the same for every method of a run seed).
    Readers deliver them grouped by class (TinyImageNet, CUB, Herbarium): a method that did not
    shuffle could otherwise read the labels off the order."""
    return indices[np.random.default_rng([seed, step]).permutation(len(indices))]


def bank_fields(spec: RunSpec, data: Any, backbone: Any) -> dict[str, Any]:
    """What a bank's content depends on besides its views (the feature and token banks' keys)."""
    feat = spec.config["features"]
    return {"dataset": spec.dataset, "dataset_options": spec.config["dataset"], "data_root": str(data.root),
            "classes": data.num_classes,
            "sizes": [len(data.train), len(data.test), len(data.val) if data.val is not None else 0],
            "backbone": spec.backbone, "pretrained": weights_identity(backbone.weights),
            "backbone_kwargs": spec.config["backbone"]["kwargs"], "policy": [data.augmentation, feat["policy"]],
            "bank_seed": feat["bank_seed"]}


def cache_of(spec: RunSpec, results: Path) -> Path:
    return Path(spec.location.get("cache_dir") or default_cache_dir(results))


def features_for(spec: RunSpec, data: Any, backbone: Any, device: torch.device, views: int,
                 log: Log, results: Path) -> tuple[FeatureViews, FeatureViews, FeatureViews]:
    """Train, val and test features for a run.

    `bank` mode reads them from the shared feature bank (built on first use): V stored views per
    training image, drawn with `features.bank_seed`, so every seed and method shares one bank.
    `exact` mode reads only the plain features from the bank and draws fresh augmented views
    through the backbone at every epoch (`LiveViews`), as the paper does.
    """
    feat = spec.config["features"]
    mode = feat["mode"]
    if mode not in FEATURE_MODES:
        raise BenchError(f"unknown features.mode {mode!r}; choose from {', '.join(FEATURE_MODES)}")
    encoder = Encoder(backbone, data, device, feat["policy"])
    stored_views = views if mode == "bank" else 0
    fields = {"format": 1, **bank_fields(spec, data, backbone), "views": stored_views}

    def build() -> dict[str, torch.Tensor]:
        batch = feat["batch_size"]
        train = extract(encoder, data.train, views=stored_views, seed=feat["bank_seed"], batch_size=batch)
        tensors = {"train_plain": train.plain, "train_views": train.views,
                   "test_plain": extract(encoder, data.test, views=0, seed=0, batch_size=batch).plain}
        if data.val is not None:
            tensors["val_plain"] = extract(encoder, data.val, views=0, seed=0, batch_size=batch).plain
        return tensors

    bank = {k: v.float() for k, v in load_or_build(cache_of(spec, results), fields, build, log).items()}
    if mode == "bank":
        train = FeatureViews(bank["train_plain"], bank["train_views"])
    else:
        # the images without their labels: exact mode draws fresh views, never sees a label
        unlabelled = ImageSet(data.train.images, np.full(len(data.train), -1))
        train = LiveViews(bank["train_plain"], unlabelled, encoder)
    def plain_only(x: torch.Tensor) -> FeatureViews:
        return FeatureViews(x, x.new_empty(len(x), 0, x.shape[1]))

    val = train if data.val is None else plain_only(bank["val_plain"])
    return train, val, plain_only(bank["test_plain"])


class FeatureInputs:
    """Methods on frozen features (`inputs = "features"`): trained and evaluated on the feature bank."""

    def __init__(self, *, features: tuple[FeatureViews, FeatureViews, FeatureViews], device: torch.device,
                 **_: Any) -> None:
        self.sources = dict(zip(("train", "val", "test"), features))
        self.device = device

    def step_fields(self, of_task: list[np.ndarray], sees_past: bool) -> dict[str, Any]:
        return {}  # the features are every Step's `train`

    def batches(self, split: str, index: np.ndarray) -> Iterator[torch.Tensor]:
        plain = self.sources[split].plain[torch.as_tensor(index, dtype=torch.long)]
        return (plain[i: i + 4096].to(self.device) for i in range(0, len(plain), 4096))


class TokenInputs:
    """Methods that train tails (`inputs = "tokens"`): the frozen prefix's tokens of the images, up
    to the method's first trainable block, computed now (`bench.tokens.LiveTokens`) or, with
    `features.tokens=bank` in bank mode, read from the token bank (`bench.token_bank`)."""

    def __init__(self, *, method: Any, backbone: Any, data: Any, device: torch.device, spec: RunSpec,
                 val_images: ImageSet, log: Log, results: Path, **_: Any) -> None:
        feat = spec.config["features"]
        encoder = Encoder(backbone, data, device, feat["policy"])
        prefix = Prefix(backbone, method.first_trainable)
        self.sources = {"train": LiveTokens(data.train, encoder, prefix), "val": LiveTokens(val_images, encoder, prefix),
                        "test": LiveTokens(data.test, encoder, prefix)}
        self.batch_size = int(spec.config["backbone"]["batch_size"])
        if feat["mode"] == "bank" and feat["tokens"] == "bank":
            from bench.token_bank import BankTokens, build_token_bank, resident_copy

            fields = {"format": 1, "kind": "tokens", **bank_fields(spec, data, backbone),
                      "prefix_blocks": method.first_trainable, "views": feat["views"], "dtype": feat["token_dtype"],
                      "val": "held-out" if data.val is not None else "train"}
            # the val images are the training images where a dataset has no held-out split: stored once
            stored = {k: v for k, v in self.sources.items() if k != "val" or data.val is not None}
            arrays = build_token_bank(cache_of(spec, results), fields, stored, feat["views"], feat["bank_seed"],
                                      feat["batch_size"], feat["token_dtype"], log)
            resident = resident_copy(arrays, device)
            # reading ahead changes no result, so it is a setting of the machine (location), not of the
            # run; by default on a GPU only, where the host is otherwise idle (on a CPU it measured slower)
            read_ahead = bool(spec.location.get("read_ahead", device.type == "cuda"))
            self.sources = {split: BankTokens(arrays, split if split in stored else "train", np.arange(len(live)), live,
                                              device, feat["token_dtype"], resident, read_ahead)
                            for split, live in self.sources.items()}

    def step_fields(self, of_task: list[np.ndarray], sees_past: bool) -> dict[str, Any]:
        train = self.sources["train"]
        return {"tokens": train.subset(of_task[-1]),
                "past_tokens": [train.subset(rows) for rows in of_task[:-1]] if sees_past else []}

    def batches(self, split: str, index: np.ndarray) -> Iterator[torch.Tensor]:
        return self.sources[split].subset(index).batches(self.batch_size)


INPUTS: dict[str, Any] = {"features": FeatureInputs, "tokens": TokenInputs}


@torch.no_grad()
def _predict(method: Any, batches: Iterator[torch.Tensor], task: int, current: np.ndarray,
             unified: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Argmax of the unified head on every batch (unless `unified` is False), and of task `task`'s
    head on the rows where `current` holds: both read the same batch, so each image's prefix runs once."""
    unified_pred, task_pred, start = [], [], 0
    for x in batches:
        rows = torch.as_tensor(current[start: start + len(x)], device=x.device)
        if unified:
            unified_pred.append(method.logits(x).argmax(1).cpu())
        if rows.any():
            task_pred.append(method.task_logits(x[rows], task).argmax(1).cpu())
        start += len(x)
    empty = torch.empty(0, dtype=torch.long)
    return torch.cat(unified_pred or [empty]).numpy(), torch.cat(task_pred or [empty]).numpy()


def _task_predictions(method: Any, inputs: Any, task: int, index: np.ndarray) -> np.ndarray:
    """Task `task`'s head, read through the encoder as it is now, on the val images `index` (the same
    head and images that froze its map at its own step: at a later step they re-fit it)."""
    return _predict(method, inputs.batches("val", index), task, np.ones(len(index), dtype=bool), unified=False)[1]


def _numpy_data_globals() -> list[Any]:
    """What a checkpoint written before numpy values were stored as tensors needs to be read: numpy's
    array and scalar constructors and dtypes. They build data from bytes and run nothing else, so
    allowing them keeps `weights_only`'s guarantee (torch's documentation allows them the same way)."""
    core = getattr(np, "_core", None) or np.core  # numpy 2 moved `core` to `_core`
    dtypes = {type(np.dtype(t)) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                          np.uint32, np.uint64, np.float16, np.float32, np.float64)}
    return [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype, *dtypes]


def _load_weights_only(path: Path) -> Any:
    """`torch.load(weights_only=True)`, with numpy's data constructors allowed for the checkpoints of runs
    in progress when bench began storing numpy values as tensors: those runs resume instead of
    starting over."""
    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError:
        with torch.serialization.safe_globals(_numpy_data_globals()):
            return torch.load(path, weights_only=True)


def _read_checkpoint(out: Path, log: Log) -> dict[str, Any] | None:
    """The last step's checkpoint, or None; one that cannot be read, or that names another run than
    this one (`out`'s name is the run id: another seed's checkpoint copied in), is set aside and the
    run starts over. A checkpoint written before checkpoints named their run is resumed from as before."""
    if not (out / CHECKPOINT).exists():
        return None
    try:
        # weights_only: reading a checkpoint never runs code from it (a pickle can name any callable)
        state = _from_safe(_load_weights_only(out / CHECKPOINT))
        if not isinstance(state, dict) or not {"step", "method", "evaluator", "rows"} <= set(state):
            raise ValueError("not a bench checkpoint")
    except Exception as err:  # torch raises many types for damaged files
        aside = set_aside(out, [CHECKPOINT])
        log(f"checkpoint unreadable ({first_line(err)}): moved to {aside.name}/, starting from step 1")
        return None
    refused = predictions.foreign(out / CHECKPOINT, state.get("run_id"), out.name)
    if refused is not None:  # resuming it would finish this run with another run's training
        aside = set_aside(out, [CHECKPOINT])
        log(f"{refused}: moved to {aside.name}/, starting from step 1")
        return None
    return state


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write `state` with the run it belongs to (the run directory's name, its run id)."""
    with atomic_path(path) as tmp:
        torch.save(_to_safe({**state, "run_id": path.parent.name}), tmp)


NUMPY = "__bench_numpy__"  # the tag of a numpy value stored as a tensor in a checkpoint


def _to_safe(obj: Any) -> Any:
    """`obj` with every numpy array or scalar (stored predictions, buffers, metric values) as a tagged
    tensor: numpy types are globals that `torch.load(weights_only=True)` refuses to import."""
    if isinstance(obj, (np.ndarray, np.generic)):
        array = np.asarray(obj)
        if array.dtype.hasobject:
            raise TypeError(f"cannot checkpoint a numpy array of Python objects (shape {array.shape})")
        return {NUMPY: torch.from_numpy(np.ascontiguousarray(array).copy()), "scalar": isinstance(obj, np.generic)}
    if isinstance(obj, dict):
        return type(obj)((k, _to_safe(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(_to_safe(v) for v in obj)
    return obj


def _from_safe(obj: Any) -> Any:
    """What `_to_safe` was given: the tagged tensors back as numpy arrays and scalars of their dtype."""
    if isinstance(obj, dict):
        if NUMPY in obj:
            array = obj[NUMPY].numpy()
            return array[()] if obj["scalar"] else array
        return type(obj)((k, _from_safe(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(_from_safe(v) for v in obj)
    return obj


def tail_precision(spec: RunSpec, inputs: str, device: torch.device) -> str:
    """What the trained blocks computed in: `precision.tails` on CUDA, fp32 on the CPU, "" for a method
    without trained blocks. Runs finished on CUDA before the key existed computed in bf16 and keep
    their ids (the key is left out of them at fp32): this column tells them apart."""
    if inputs != "tokens":
        return ""
    return spec.config.get("precision", {}).get("tails", "fp32") if device.type == "cuda" else "fp32"


def reported_sources(declared: Mapping[str, tuple[str, str]], rows: list[MetricRow]) -> dict[str, str]:
    """"flavour/metric" of the summary row each reported metric is: what the method declares, or its
    frozen-map `wo` row where the run has no `wo_refit` rows (stored predictions recorded before the
    re-fitted maps were kept, rebuilt into a metrics file)."""
    present = {(r.flavour, r.metric) for r in rows if r.group == "summary"}
    return {name: "/".join(source if source in present else ("wo", source[1])) for name, source in declared.items()}


def _frame(spec: RunSpec, rows: list[MetricRow], device: torch.device, started_at: str, duration: float,
           mapping_images: str, weights: Any = False) -> pd.DataFrame:
    """The run's metrics.parquet: its rows, what identifies the run, and its provenance, including the
    versions that decide its numbers (`bench.provenance`; `weights`: what the backbone was loaded from)."""
    from bench.registries import METHODS

    frame = pd.DataFrame([asdict(r) for r in rows])
    cls = METHODS.get(spec.method)
    reported = reported_sources(cls.reported, rows)
    identity = dict(run_id=spec.run_id, method=spec.method, preset=spec.preset, label=spec.label,
                    dataset=spec.dataset, split=spec.split_label, n_steps=spec.n_steps, backbone=spec.backbone,
                    seed=spec.seed, reported_A=reported["A"], reported_F=reported["F"],
                    features=features_protocol(spec.config, inputs=cls.inputs, trains_on_views=cls.trains_on_views,
                                               warms_up_on_features=cls.warms_up_on_features),
                    mapping_images=mapping_images)
    provenance = dict(
        bench_version=bench.__version__, git_commit=_git_commit(), host=socket.gethostname(),
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
        slurm_job_id=_slurm_job_id(), started_at=started_at, ended_at=_now(), duration_s=float(duration),
        **versions(device, weights), tail_precision=tail_precision(spec, cls.inputs, device),
        threads=str(torch.get_num_threads()))  # the run's own (bench.numerics.fix): a sum's order follows it
    for key, value in {**identity, **provenance}.items():
        frame[key] = value
    frame = frame[list(identity) + ["step", "group", "flavour", "metric", "value"] + list(provenance)]
    return frame.astype({"step": "int64", "n_steps": "int64", "seed": "int64", "value": "float64"})


def _slurm_job_id() -> str:
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        return f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return os.environ.get("SLURM_JOB_ID", "")

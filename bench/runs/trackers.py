"""Trackers: what a run sends, as it runs, to TensorBoard, Weights & Biases or MLflow beside its own files
(`bench run --tracker NAME`, a grid's `trackers` key; docs/results.md#trackers).

Each tracker gets, under the name `<label>-<run_id>` and grouped by the run's grid: the run's identity and
configuration when it starts, every training loop's loss per epoch and every metric row of a step when the step
is evaluated, and when the run is finished its summary rows, its A and F and its provenance. The keys:
`loss/step_<t>/loop_<i>` (x: the epoch, as `epoch_loss_<t>_<i>` of predictions.npz), `eval/<group>/<flavour>/<metric>`
(x: the step, as in metrics.parquet), `summary/<flavour>/<metric>`, `A` and `F`.

Each tracker is an optional extra whose library is imported only by a run that uses it; a tracker whose extra is
not installed is refused before anything runs (`check_trackers`). A tracker that fails while a run goes on is
written once to the run's log and sent nothing more in that run (`Tracking`): a tracker never fails a run, and a
run's own files are written before its final numbers are sent.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence
from urllib.parse import urlparse

from bench.config.spec import RunSpec
from bench.errors import BenchError, first_line, unknown
from bench.runs.provenance_file import provenance_of
from bench.runs.rows import MetricRow

# name -> (the module it imports, the extra that installs it)
TRACKERS: dict[str, tuple[str, str]] = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb"),
                                        "mlflow": ("mlflow", "mlflow")}
# The values W&B takes in WANDB_MODE (its `Settings.mode`; a test compares them with the installed wandb's). W&B
# refuses any other, the empty string included, with a bare validation error of its settings.
WANDB_MODES = ("online", "offline", "shared", "disabled", "dryrun", "run")


def check_trackers(names: Iterable[str]) -> list[str]:
    """The trackers named, each once, in order; an unknown name, or one whose extra is not installed, refused in one
    line (what to install). Whether the library imports is known only when a run starts it: cheap here."""
    chosen = list(dict.fromkeys(names))
    for name in chosen:
        if name not in TRACKERS:
            raise unknown("tracker", name, TRACKERS)
        module, extra = TRACKERS[name]
        if not _installed(module):
            raise BenchError(f"tracker {name!r} needs the {extra} extra, which is not installed in this environment: "
                             f"pip install 'bench[{extra}]'")
    if "wandb" in chosen:
        wandb_mode()
    return chosen


def wandb_mode() -> str | None:
    """WANDB_MODE, None where it is unset; a value W&B refuses (set but empty, misspelt) refused in one line, as W&B
    itself refuses it (it does not read an empty one as unset), before anything runs."""
    mode = os.environ.get("WANDB_MODE")
    if mode is not None and mode not in WANDB_MODES:
        raise BenchError(f"WANDB_MODE is {mode!r}: W&B takes {', '.join(WANDB_MODES)}; unset it for bench's "
                         f"default (offline)")
    return mode


def _installed(module: str) -> bool:
    if module in sys.modules:  # None there: an import made to fail (what the tests do)
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class TrackedRun:
    """What a tracker is told of the run it tracks. `resumed`: the run goes on from a checkpoint, so its tracker
    run (of the same name) goes on too."""

    run_id: str
    name: str  # `<label>-<run_id>`
    grid: str
    identity: Mapping[str, Any]
    config: Mapping[str, Any]
    results: Path
    resumed: bool

    @classmethod
    def of(cls, spec: RunSpec, results: Path, resumed: bool) -> "TrackedRun":
        identity = dict(run_id=spec.run_id, label=spec.label, method=spec.method, preset=spec.preset,
                        dataset=spec.dataset, split=spec.split_label, n_steps=spec.n_steps, backbone=spec.backbone,
                        seed=spec.seed, grid=spec.location.get("grid", "bench"))
        return cls(spec.run_id, f"{spec.label}-{spec.run_id}", identity["grid"], identity, dict(spec.config),
                   Path(results), resumed)

    def params(self) -> dict[str, str]:
        """Identity and configuration as flat `run.<key>` and `config.<section>.<key>` strings."""
        return {**{f"run.{k}": str(v) for k, v in self.identity.items()}, **flat(self.config, "config")}


class Tracker(Protocol):
    """What a tracker does, in the order a run calls it; any of it may raise (`Tracking` guards every call)."""

    def start(self, run: TrackedRun) -> None: ...

    def log_epoch_losses(self, step: int, losses: Sequence[Sequence[float]]) -> None: ...  # per loop, per epoch

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None: ...  # `eval/...` -> value

    def log_final(self, step: int, values: Mapping[str, float], provenance: Mapping[str, Any]) -> None: ...

    def finish(self, status: str) -> None: ...  # "finished", "failed" (an error) or "interrupted" (resumes later)


def flat(mapping: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """A nested mapping as `prefix.key.subkey` -> str(value)."""
    out: dict[str, str] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            out.update(flat(value, f"{prefix}.{key}"))
        else:
            out[f"{prefix}.{key}"] = str(value)
    return out


def file_name(name: str) -> str:
    """A name as a folder takes it: `Joint (frozen)-<id>` -> `Joint-frozen-<id>`."""
    return re.sub(r"[^A-Za-z0-9+._-]+", "-", name).strip("-")


def _table(values: Mapping[str, Any]) -> str:
    return "| key | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in values.items())


class TensorBoard:
    """Event files under `<results>/tensorboard/<grid>/<label>-<run_id>/` (tensorboardX: no TensorFlow, no
    TensorBoard server needed to write them); the configuration and provenance as text."""

    def start(self, run: TrackedRun) -> None:
        from tensorboardX import SummaryWriter

        folder = run.results / "tensorboard" / file_name(run.grid) / file_name(run.name)
        earlier = sorted(folder.glob("events.out.tfevents.*"))
        if earlier and not run.resumed:  # a run started over (--force): its earlier attempt a run of its own beside it
            aside = folder / f"earlier-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}"
            aside.mkdir(exist_ok=True)
            for path in earlier:
                path.replace(aside / path.name)
            earlier = []
        # a file of its own for each attempt: the name has the second it was opened, which two attempts may share
        self.writer = SummaryWriter(logdir=str(folder), filename_suffix=f".{len(earlier)}")
        self.writer.add_text("config", _table(run.params()), 0)
        self.writer.flush()

    def log_epoch_losses(self, step: int, losses: Sequence[Sequence[float]]) -> None:
        for i, loop in enumerate(losses):
            for epoch, value in enumerate(loop):
                self.writer.add_scalar(f"loss/step_{step}/loop_{i}", float(value), epoch)
        self.writer.flush()

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def log_final(self, step: int, values: Mapping[str, float], provenance: Mapping[str, Any]) -> None:
        self.log_step_metrics(step, values)
        self.writer.add_text("provenance", _table(provenance), step)
        self.writer.flush()

    def finish(self, status: str) -> None:
        self.writer.close()


class WandB:
    """A W&B run whose id is the run id, offline unless WANDB_MODE says otherwise (`wandb sync` uploads it later),
    under WANDB_DIR or `<results>/wandb/`, in project WANDB_PROJECT (default `bench`), grouped by grid. The run's
    losses and step metrics are its history (against `epoch` and `step`), its summary rows, A and F its summary."""

    def start(self, run: TrackedRun) -> None:
        import wandb

        folder = None if os.environ.get("WANDB_DIR") else run.results / "wandb"
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        # console="off": wandb would otherwise wrap the worker's stdout; git: the provenance has the commit
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, disable_git=True)
        self.run = wandb.init(mode=None if wandb_mode() else "offline", dir=folder,
                              project=os.environ.get("WANDB_PROJECT") or "bench", group=run.grid, name=run.name,
                              id=run.run_id, resume="allow", reinit="create_new", settings=settings,
                              config={"run": dict(run.identity), "config": dict(run.config)})
        self.run.define_metric("epoch")
        self.run.define_metric("loss/*", step_metric="epoch")
        self.run.define_metric("step")
        self.run.define_metric("eval/*", step_metric="step")

    def log_epoch_losses(self, step: int, losses: Sequence[Sequence[float]]) -> None:
        for i, loop in enumerate(losses):
            for epoch, value in enumerate(loop):
                self.run.log({"epoch": epoch, f"loss/step_{step}/loop_{i}": float(value)})

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        self.run.log({"step": step, **values})

    def log_final(self, step: int, values: Mapping[str, float], provenance: Mapping[str, Any]) -> None:
        self.run.summary.update(dict(values))
        self.run.config.update({"provenance": dict(provenance)}, allow_val_change=True)

    def finish(self, status: str) -> None:
        self.run.finish(exit_code={"finished": 0, "failed": 1}.get(status, 255))


class MLflow:
    """An MLflow run named `<label>-<run_id>` (tagged `bench.run_id`) in the experiment named by the grid, in
    MLFLOW_TRACKING_URI or the file store `<results>/mlruns`; identity and configuration its params, provenance its
    tags. A resumed run goes on in the latest MLflow run of its run id; a run started over gets a new one."""

    BATCH = 100  # params per log_batch (MLflow's limit; 1000 for metrics)

    def start(self, run: TrackedRun) -> None:
        uri = os.environ.get("MLFLOW_TRACKING_URI") or (run.results / "mlruns").resolve().as_uri()
        if urlparse(uri).scheme in ("", "file"):
            # MLflow 3 refuses its file store unless told it is wanted: the offline store that needs no database
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient

        self.client = client = MlflowClient(tracking_uri=uri)
        experiment = self._experiment(run.grid)
        found = client.search_runs([experiment], f"tags.`bench.run_id` = '{run.run_id}'",
                                   order_by=["attributes.start_time DESC"], max_results=1) if run.resumed else []
        if found:
            self.id = found[0].info.run_id
            client.update_run(self.id, status="RUNNING")
            return
        tags = {"bench.run_id": run.run_id, "bench.grid": run.grid, "bench.label": str(run.identity["label"])}
        self.id = client.create_run(experiment, run_name=run.name, tags=tags).info.run_id
        params = [Param(k, v[:6000]) for k, v in run.params().items()]
        for i in range(0, len(params), self.BATCH):
            client.log_batch(self.id, params=params[i:i + self.BATCH])
        client.log_batch(self.id, tags=[RunTag("mlflow.note.content", _table(run.params()))])

    def _experiment(self, name: str) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except MlflowException:  # another worker created it first
            made = self.client.get_experiment_by_name(name)
            if made is None:  # not made by another after all: the error is the server's
                raise
            return made.experiment_id

    def _metrics(self, points: Iterable[tuple[str, float, int]]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step) for key, value, step in points]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.id, metrics=metrics[i:i + 1000])

    def log_epoch_losses(self, step: int, losses: Sequence[Sequence[float]]) -> None:
        self._metrics((f"loss/step_{step}/loop_{i}", v, epoch) for i, loop in enumerate(losses)
                      for epoch, v in enumerate(loop))

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        self._metrics((key, value, step) for key, value in values.items())

    def log_final(self, step: int, values: Mapping[str, float], provenance: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self.log_step_metrics(step, values)
        tags = [RunTag(f"provenance.{k}", str(v)[:5000]) for k, v in provenance.items()]
        for i in range(0, len(tags), self.BATCH):
            self.client.log_batch(self.id, tags=tags[i:i + self.BATCH])

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.id, {"finished": "FINISHED", "failed": "FAILED"}.get(status, "KILLED"))


KINDS: dict[str, Callable[[], Tracker]] = {"tensorboard": TensorBoard, "wandb": WandB, "mlflow": MLflow}


class Tracking:
    """A run's trackers behind one call each. A tracker that raises is written to the run's log once, closed as
    well as it can be, and sent nothing more in this run: the run goes on, and its results are written."""

    def __init__(self, trackers: Mapping[str, Tracker], log: Callable[[str], None]) -> None:
        self.live, self.log = dict(trackers), log

    @classmethod
    def start(cls, spec: RunSpec, results: Path, log: Callable[[str], None], resumed: bool) -> "Tracking":
        """The trackers `spec.location["trackers"]` names, started on the run (none: a Tracking that does nothing)."""
        names = list(spec.location.get("trackers") or ())
        tracking = cls({name: KINDS[name]() if name in KINDS else _Unknown(name) for name in names}, log)
        run = tracking._made("the run's identity", lambda: TrackedRun.of(spec, results, resumed))
        tracking._call("start", run)
        if names:
            log(f"trackers: {', '.join(tracking.live) or 'none'} started"
                + (" (resumed: the steps before were sent by the attempt that ran them)" if resumed else ""))
        return tracking

    def step(self, step: int, losses: Sequence[Sequence[float]], rows: Sequence[MetricRow]) -> None:
        """A step's training losses (one list per training loop) and its metric rows."""
        if not self.live:
            return
        self._call("log_epoch_losses", step, losses)
        self._call("log_step_metrics", step, {f"eval/{r.group}/{r.flavour}/{r.metric}": float(r.value) for r in rows})

    def final(self, frame: Any) -> None:
        """A finished run's summary rows, its A and F (the summary rows its setting reports) and its provenance, from
        its metrics frame."""
        values = self._made("the final numbers", lambda: final_numbers(frame))
        self._call("log_final", *(values or ()))

    def finish(self, status: str) -> None:
        self._call("finish", status)
        self.live.clear()

    def _made(self, what: str, make: Callable[[], Any]) -> Any:
        """What the trackers are to be given, made under the same guard as what they do: None, and every tracker
        dropped (in one line of the log), if making it raises."""
        if not self.live:
            return None
        try:
            return make()
        except Exception as err:
            self.log(f"trackers {', '.join(self.live)}: {what} could not be made: {first_line(err)}; nothing more is "
                     f"sent to them in this run, which goes on")
            self.live.clear()
            return None

    def _call(self, what: str, *args: Any) -> None:
        for name, tracker in list(self.live.items()):
            try:
                getattr(tracker, what)(*args)
            except Exception as err:  # a tracker's own failure (a library, a full disk, a network): never the run's
                del self.live[name]
                self.log(f"tracker {name} failed in {what}: {first_line(err)}; nothing more is sent to it in this "
                         f"run, which goes on")
                if what != "finish":
                    try:
                        tracker.finish("failed")
                    except Exception:  # it may not have started: what could be closed is closed
                        pass


def final_numbers(frame: Any) -> tuple[int, dict[str, float], dict[str, Any]]:
    """From a finished run's metrics frame: the step of its summary rows, those rows with the A and F it reports
    (`summary/<flavour>/<metric>`, `A`, `F`), and its provenance columns."""
    summary = frame[frame["group"] == "summary"]
    values = {f"summary/{f}/{m}": float(v) for f, m, v in zip(summary["flavour"], summary["metric"], summary["value"])}
    first = frame.iloc[0]
    for name in ("A", "F"):
        values[name] = values[f"summary/{first[f'reported_{name}']}"]
    return int(summary["step"].max()), values, provenance_of(frame)


class _Unknown(Tracker):
    """A tracker named in a spec.json that this bench does not know (checked before a run starts, so only edited
    files have one): its start fails, into the run's log."""

    def __init__(self, name: str) -> None:
        self.name = name

    def start(self, run: TrackedRun) -> None:
        raise unknown("tracker", self.name, TRACKERS)

    # a tracker whose start failed is dropped (`Tracking._call`): nothing to send, nothing to close
    def log_epoch_losses(self, step: int, losses: Sequence[Sequence[float]]) -> None:
        return None

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        return None

    def log_final(self, step: int, values: Mapping[str, float], provenance: Mapping[str, Any]) -> None:
        return None

    def finish(self, status: str) -> None:
        return None

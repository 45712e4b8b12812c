"""A run's checkpoint: what it has learned and recorded after its last finished step, so that a killed
or requeued run resumes there and ends with the metrics an uninterrupted run would have.

A checkpoint is read with `torch.load(weights_only=True)`: reading one never runs code from it (a
pickle can name any callable). numpy values (stored predictions, buffers, metric values) are therefore
stored as tagged tensors, since numpy's types are globals `weights_only` refuses to import.
"""
from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import torch

from bench.runs import predictions
from bench.errors import first_line
from bench.runs.rows import MetricRow
from bench.core.provenance import utc_now
from bench.runs.rundir import CHECKPOINT, set_aside
from bench.core.storage import atomic_path

NUMPY = "__bench_numpy__"  # the tag of a numpy value stored as a tensor in a checkpoint
NUMPY_TEXT = "__bench_numpy_text__"  # the tag of a numpy array of str, stored as a list


class Stateful(Protocol):
    """What a checkpoint keeps of a run's method and evaluator."""

    def state_dict(self) -> dict[str, Any]: ...


@dataclass
class Progress:
    """What a run has recorded so far, besides its method's and evaluator's state: its metric rows, what
    its evaluator was given (`bench.runs.predictions`), the next step to run, when its first attempt started
    and how long earlier attempts computed (a resumed run reports its whole duration)."""

    rows: list[MetricRow] = field(default_factory=list)
    stored: dict[str, np.ndarray] = field(default_factory=dict)
    next_step: int = 0
    started_at: str = field(default_factory=utc_now)
    spent: float = 0.0

    @classmethod
    def of(cls, state: dict[str, Any] | None) -> "Progress":
        """A checkpoint's progress, or a fresh run's (None)."""
        if state is None:
            return cls()
        return cls([MetricRow(**r) for r in state["rows"]], dict(state.get("predictions", {})), state["step"] + 1,
                   state["started_at"], state["duration_s"])

    def state(self, step: int, method: Stateful, evaluator: Stateful, duration: float, threads: int) -> dict[str, Any]:
        """The checkpoint after `step` (`duration`: seconds this attempt has computed so far)."""
        return {"step": step, "method": method.state_dict(), "evaluator": evaluator.state_dict(),
                "rows": [asdict(r) for r in self.rows], "predictions": self.stored, "started_at": self.started_at,
                "duration_s": self.spent + duration, "threads": threads}


def read_checkpoint(out: Path, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The last step's checkpoint, or None; one that cannot be read, or that names another run than
    this one (`out`'s name is the run id: another seed's checkpoint copied in), is set aside and the
    run starts over. A checkpoint written before checkpoints named their run is resumed from as before."""
    if not (out / CHECKPOINT).exists():
        return None
    try:
        state = from_safe(_load_weights_only(out / CHECKPOINT))
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


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write `state` with the run it belongs to (the run directory's name, its run id)."""
    with atomic_path(path) as tmp:
        torch.save(to_safe({**state, "run_id": path.parent.name}), tmp)


def to_safe(obj: Any) -> Any:
    """`obj` with every numpy array or scalar as a tagged tensor (see the module's docstring)."""
    if isinstance(obj, (np.ndarray, np.generic)):
        array = np.asarray(obj)
        if array.dtype.hasobject:
            raise TypeError(f"cannot checkpoint a numpy array of Python objects (shape {array.shape})")
        if array.dtype.kind == "U":  # names (a stream's domains): a list of str, which torch keeps as it is
            return {NUMPY_TEXT: array.tolist()}
        return {NUMPY: torch.from_numpy(np.ascontiguousarray(array).copy()), "scalar": isinstance(obj, np.generic)}
    if isinstance(obj, dict):
        return type(obj)((k, to_safe(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(to_safe(v) for v in obj)
    return obj


def from_safe(obj: Any) -> Any:
    """What `to_safe` was given: the tagged tensors back as numpy arrays and scalars of their dtype."""
    if isinstance(obj, dict):
        if NUMPY_TEXT in obj:
            return np.asarray(obj[NUMPY_TEXT], dtype=str)
        if NUMPY in obj:
            array = obj[NUMPY].numpy()
            return array[()] if obj["scalar"] else array
        return type(obj)((k, from_safe(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(from_safe(v) for v in obj)
    return obj


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

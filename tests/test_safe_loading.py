"""Loading never executes code from a file: a run's checkpoint is read with `weights_only=True` and
CIFAR's pickled batches through an unpickler that imports only what the official files hold. A file
that asks for more is refused, named, and its code never runs."""
from __future__ import annotations

import pickle
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench.data import DatasetError, build_dataset
from bench.protocol.runner import execute
from bench.runs.rundir import CHECKPOINT, DONE, METRICS, run_dir
from bench.registries import METHODS, load_all
from tests import fixtures_datasets as fx
from tests.helpers import killed_then_resumed, tiny_specs

load_all()
FEATURE_METHODS = sorted(name for name, cls in METHODS.module_dict.items()
                         if cls.runs_on.inputs == "features" and not name.startswith("_"))


class Payload:
    """Unpickled without restriction, it creates `marker`: the stand-in for os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_a_checkpoint_that_would_run_code_is_refused_and_set_aside(tmp_path):
    (spec,) = tiny_specs(methods=["K-means"])
    out = run_dir(tmp_path / "results", spec)
    out.mkdir(parents=True)
    marker = tmp_path / "pwned"
    torch.save({"step": 0, "method": {}, "evaluator": {}, "rows": [], "evil": Payload(marker)}, out / CHECKPOINT)
    execute(spec, tmp_path / "results")
    assert not marker.exists()
    log = (out / "log.txt").read_text()
    assert "checkpoint unreadable" in log and "resuming" not in log
    assert (out / DONE).exists() and len(list(out.glob(f"damaged-*/{CHECKPOINT}"))) == 1


def test_a_cifar_batch_that_would_run_code_is_refused_in_one_line(tmp_path):
    root = tmp_path / "data"
    batches = fx.write_cifar10(root)
    marker = tmp_path / "pwned"
    with (batches / "data_batch_2").open("wb") as fh:
        pickle.dump({"data": Payload(marker), "labels": [0]}, fh)
    with pytest.raises(DatasetError) as err:
        build_dataset("cifar10", {}, str(root))
    assert not marker.exists()
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert f"refusing CIFAR file {batches / 'data_batch_2'}: it asks for " in message and ".open" in message


@pytest.mark.parametrize("writer", [fx.write_cifar10, fx.write_cifar100])
def test_real_format_cifar_batches_still_load(tmp_path, writer):
    name = "cifar10" if writer is fx.write_cifar10 else "cifar100"
    data = build_dataset(name, {}, str(writer(tmp_path) and tmp_path))
    assert data.train.images.dtype.name == "uint8" and len(data.test) > 0


def test_a_python2_protocol_cifar_batch_loads(tmp_path):
    """The official files are Python 2 pickles; a protocol-2 file written by Python 3 spells its bytes
    with `_codecs.encode`, which is allowed."""
    batches = fx.write_cifar10(tmp_path)
    for path in batches.iterdir():
        with path.open("rb") as fh:
            entry = pickle.load(fh)
        with path.open("wb") as fh:
            pickle.dump(entry, fh, protocol=2)
    assert len(build_dataset("cifar10", {}, str(tmp_path)).train) == 40


@pytest.mark.parametrize("method", FEATURE_METHODS)
def test_every_feature_method_resumes_from_a_weights_only_checkpoint(method, tmp_path, monkeypatch):
    """The checkpoint after step 1 holds the method's state, the evaluator's, the rows and the stored
    predictions (numpy); all of it is read back with weights_only=True and the run ends as an
    uninterrupted one."""
    (spec,) = tiny_specs(methods=[method], splits=["5-step"], **{"dataset.num_classes": 10})
    whole = pd.read_parquet(execute(spec, tmp_path / "whole") / METRICS)
    resumed = pd.read_parquet(killed_then_resumed(spec, tmp_path / "resumed", METHODS.get(method), 2, monkeypatch)
                              / METRICS)
    keys = ["step", "group", "flavour", "metric"]
    pd.testing.assert_frame_equal(whole.sort_values(keys)[keys + ["value"]].reset_index(drop=True),
                                  resumed.sort_values(keys)[keys + ["value"]].reset_index(drop=True))


def test_a_checkpoint_written_before_numpy_values_became_tensors_still_resumes(tmp_path, monkeypatch):
    """Runs in progress when bench began storing numpy values as tensors hold raw numpy arrays in their
    checkpoints: numpy's data constructors are allowed for them (nothing else), so they resume instead
    of starting over."""
    import bench.runs.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "to_safe", lambda state: state)  # how checkpoints were written before
    (spec,) = tiny_specs(methods=["Baseline"], splits=["5-step"], **{"dataset.num_classes": 10})
    whole = pd.read_parquet(execute(spec, tmp_path / "whole") / METRICS)
    out = killed_then_resumed(spec, tmp_path / "resumed", METHODS.get("Baseline"), 2, monkeypatch)
    assert "checkpoint unreadable" not in (out / "log.txt").read_text()
    keys = ["step", "group", "flavour", "metric"]
    pd.testing.assert_frame_equal(whole.sort_values(keys)[keys + ["value"]].reset_index(drop=True),
                                  pd.read_parquet(out / METRICS).sort_values(keys)[keys + ["value"]].reset_index(drop=True))

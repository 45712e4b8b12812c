"""The schema of `predictions.npz` (bench/runs/predictions.py): what a run writes is what the schema declares and
documents, a file written before the schema kept its version still reads, and one of a newer version is refused in
one line. And the `Step` a step hands a method (bench/protocol/step.py): built in one place, and all that the
step's evaluation reads of what the method was told."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import bench.runs.predictions as schema
from bench.cli import main
from bench.features.views import FeatureViews
from bench.protocol.recompute import rebuild_metrics, replay
from bench.protocol.runner import execute
from bench.protocol.step import step_of, step_order
from bench.runs.predictions import (PREDICTIONS, SCHEMA, SCHEMA_VERSION, Keys, NewerSchema, Pattern, declared, opened,
                                    version_of)
from bench.runs.rundir import METRICS
from tests.helpers import tiny_specs
from tests.test_mixed_setting import MIXED

# the on-disk names of a 2-step class-iNCD run's arrays, spelt out: results folders hold files with these names,
# so the schema may not rename them (epoch losses aside: how many loops a method trains is its own)
CLASS_INCD_FILE = {"schema_version", "offsets", "sizes", "run_id",
                   "val_labels_0", "val_pred_0", "test_labels_0", "unified_0", "task_pred_0", "mapping_0", "refit_0",
                   "val_labels_1", "val_pred_1", "test_labels_1", "unified_1", "task_pred_1", "mapping_1", "refit_1",
                   "refit_pred_1_0"}


def class_incd_run(results: Path) -> Path:
    (spec,) = tiny_specs(methods=["Baseline"], **{"dataset.num_classes": 10})
    return execute(spec, results)


def mixed_run(results: Path) -> Path:
    """A mixed run that stores every array the mixed setting may: selected epochs and their scores, the
    transductive clusters, a domain-shifted stream's domains."""
    (spec,) = tiny_specs(methods=["Baseline"], splits=["promptccd-3-stage"], **MIXED,
                         **{"method.epochs": 2, "setting.selection": "oracle", "setting.evaluation": "transductive",
                            "setting.domains": ["clean", "fog:2", "clean", "fog:2"], "dataset.image_size": 32})
    return execute(spec, results)


def svi_run(results: Path) -> Path:
    """A class-iNCD run of VB-CGCD, whose losses are one per SVI step (`loss_unit_<t>_<i>`)."""
    (spec,) = tiny_specs(methods=["VB-CGCD"], **{"dataset.num_classes": 10, "method.svi_iters": 20})
    return execute(spec, results)


def keys_of(out: Path) -> set[str]:
    with np.load(out / PREDICTIONS) as stored:
        return set(stored.files)


def test_every_array_a_run_writes_is_one_the_schema_declares_and_the_two_settings_write_them_all(tmp_path):
    written = (keys_of(class_incd_run(tmp_path / "class-incd")) | keys_of(mixed_run(tmp_path / "mixed"))
               | keys_of(svi_run(tmp_path / "svi")))
    assert [key for key in sorted(written) if not declared(key)] == []
    unwritten = [entry for entry in SCHEMA
                 if not any(key == entry if isinstance(entry, str) else entry.indices(key) for key in written)]
    assert unwritten == []  # and the schema declares nothing that no run writes


def test_the_file_keeps_its_names_and_says_its_version(tmp_path):
    out = class_incd_run(tmp_path)
    assert {k for k in keys_of(out) if not k.startswith("epoch_loss_")} == CLASS_INCD_FILE
    with opened(out / PREDICTIONS) as stored:  # version 2 is a stream's file only: the others stay readable as 1
        assert version_of(stored) == 1 and stored[Keys.version].dtype == np.int16
    with opened(mixed_run(tmp_path / "stream") / PREDICTIONS) as stored:
        assert version_of(stored) == SCHEMA_VERSION == 2


def test_the_module_docstring_documents_every_array_of_the_schema_and_nothing_else():
    entries = re.findall(r"^- (`[^(]+`) \(", schema.__doc__ or "", flags=re.M)  # "- `a`, `b` (dtype, shape): ..."
    documented = {name for entry in entries for name in re.findall(r"`([^`]+)`", entry)}
    declared_names = {entry if isinstance(entry, str) else re.sub(r"\{(\w+)\}", r"<\1>", entry.pattern)
                      for entry in SCHEMA}
    assert documented == declared_names


def test_a_pattern_names_its_arrays_and_tells_them_apart():
    assert Keys.refit_pred(3, 1) == "refit_pred_3_1" and Keys.refit_pred.indices("refit_pred_3_1") == (3, 1)
    assert Keys.refit.indices("refit_pred_3_1") is None and Keys.mapping.indices("mapping_images") is None
    assert not declared("mapping_images") and declared("mapping_12") and declared(Keys.mixed)
    with pytest.raises(TypeError, match="takes 2 index"):
        Pattern("epoch_loss_{t}_{i}")(1)


def test_a_file_written_before_the_schema_version_was_kept_reads_as_version_1(tmp_path, capsys):
    out = class_incd_run(tmp_path)
    before = pd.read_parquet(out / METRICS)
    with np.load(out / PREDICTIONS) as stored:
        old = {k: stored[k] for k in stored.files if k != "schema_version"}
    with (out / PREDICTIONS).open("wb") as fh:  # as the writer of before wrote it
        np.savez_compressed(fh, **old)
    with opened(out / PREDICTIONS) as stored:
        assert version_of(stored) == 1
    assert len(replay(out / PREDICTIONS)) == len(before)
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 0
    assert "0 changed, 1 unchanged" in capsys.readouterr().out


def newer(out: Path) -> None:
    """Rewrite the run's predictions as a newer bench would have written them."""
    with np.load(out / PREDICTIONS) as stored:
        arrays = {k: stored[k] for k in stored.files}
    arrays["schema_version"] = np.asarray(SCHEMA_VERSION + 1, dtype=np.int16)
    with (out / PREDICTIONS).open("wb") as fh:
        np.savez_compressed(fh, **arrays)


def test_a_file_of_a_newer_schema_is_refused_in_one_line(tmp_path, capsys):
    out = class_incd_run(tmp_path)
    newer(out)
    said = (f"{out / PREDICTIONS} is predictions schema version {SCHEMA_VERSION + 1}; this bench reads versions up "
            f"to {SCHEMA_VERSION}: upgrade bench to read it")
    with pytest.raises(NewerSchema) as refused, opened(out / PREDICTIONS):
        pass
    assert str(refused.value) == said
    before = (out / METRICS).read_bytes()
    capsys.readouterr()
    assert main(["metrics", "recompute", "--results", str(tmp_path)]) == 1
    assert f"{out.name}: skipped: {said}; its metrics are left as they are" in capsys.readouterr().out
    assert (out / METRICS).read_bytes() == before
    from bench.reporting.image_bootstrap import NotBootstrapped, load_scorer
    from bench.reporting.per_class import of_run

    assert of_run(out) is None
    with pytest.raises(NotBootstrapped, match=re.escape(said)):
        load_scorer(out, "wo/A")
    # its metrics lost: not rebuilt, nor run again over what the newer bench wrote
    (out / METRICS).unlink()
    with pytest.raises(NewerSchema, match=re.escape(said)):
        rebuild_metrics(out)
    assert (out / PREDICTIONS).exists()


# --- the Step ----------------------------------------------------------------------------------------------------

def fed(sees_past: bool) -> SimpleNamespace:
    """A feed of 10 training images whose feature is their index."""
    plain = torch.arange(10, dtype=torch.float32)[:, None]
    inputs = SimpleNamespace(step_fields=lambda rows, past: {})
    return SimpleNamespace(train=FeatureViews(plain, plain[:, None]), inputs=inputs, seed=3, device=torch.device("cpu"),
                           n_steps=2, sees_past_steps=sees_past)


@pytest.mark.parametrize("sees_past", [False, True])
def test_a_step_holds_its_steps_images_in_the_seeded_order_and_their_labels_only_when_given(sees_past):
    steps = [np.arange(0, 4), np.arange(4, 10)]
    labels = np.arange(10) * 10
    step = step_of(fed(sees_past), 1, steps, n_classes=3, offset=2, labels=labels)
    order = step_order(steps[1], 3, 1)
    assert (step.index, step.n_classes, step.offset, step.last) == (1, 3, 2, True)
    assert step.train.plain[:, 0].long().tolist() == order.tolist()
    assert step.labels.tolist() == (order * 10).tolist()  # the step's own images' labels, in the same order
    assert [p.plain[:, 0].long().tolist() for p in step.past] == ([step_order(steps[0], 3, 0).tolist()]
                                                                  if sees_past else [])
    assert step_of(fed(sees_past), 0, steps, n_classes=2, offset=0).labels is None


def test_a_mixed_step_is_evaluated_as_its_step_told_the_method_whatever_was_asked_since(tmp_path):
    """No hidden state between `step` and `evaluate`: the K step 1 stores is what its `Step` said, even when a
    second `step` (told other K before it) is asked for in between."""
    from bench.protocol.feeding import feed_for
    from bench.protocol.planning import assemble
    from bench.protocol.steps import steps_for

    (spec,) = tiny_specs(methods=["Baseline"], splits=["happy-5-stage"], **MIXED)
    out, device, log = tmp_path, torch.device("cpu"), lambda line: None
    parts = assemble(spec, out, device, log)
    feed = feed_for(spec, parts.method, parts.data, parts.backbone, device, parts.val_images, parts.layout, log,
                    tmp_path, 0.0)
    steps = steps_for(spec, parts, feed, out, log)
    stored: dict[str, np.ndarray] = {}
    first = steps.step(0, stored)
    parts.method.learn(first)
    steps.evaluate(0, first, parts.method, stored)
    told = steps.step(1, stored)
    assert (told.offset, told.n_classes) == (parts.layout.sizes[0], parts.layout.sizes[1])
    steps.step(1, {**stored, Keys.k_given(0): np.asarray([1])})  # asked again, as if step 0 had been told 1 class
    parts.method.learn(told)
    steps.evaluate(1, told, parts.method, stored)
    assert int(stored[Keys.k_given(1)][0]) == told.n_classes
    assert int(stored[Keys.unified(1)].max()) < told.offset + told.n_classes

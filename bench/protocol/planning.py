"""What a run is made of, decided before its first step: the device and thread count it computes with,
its data in its class order, the task layout, the frozen backbone and the method.

Each is derived from the spec alone (and, for the threads, from the checkpoint it resumes), so a
resumed or requeued run is made of the same parts as the attempt it continues.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from bench.core import numerics
from bench.features.backbones import build_backbone
from bench.data import ImageSet, build_dataset
from bench.errors import BenchError
from bench.splits.layout import TaskLayout
from bench.splits.settings import arrival_order, protocol_for, setting_of, step_sizes
from bench.config.spec import RunSpec
from bench.protocol.hooks import MethodHooks

Log = Callable[[str], None]


def device_of(spec: RunSpec) -> torch.device:
    """The machine's `device` setting (a location, not part of the run), else CUDA where there is one."""
    wanted = spec.location.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(wanted)


def threads_of(spec: RunSpec, state: Mapping[str, Any] | None, log: Log) -> int:
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


@dataclass
class Parts:
    """A run's data, layout, frozen backbone and bound method. `val_images` freeze (and re-fit) the task
    mappings: the held-out validation images, or the training images where a dataset has none
    (`mapping_images` says which, for the metrics file)."""

    data: Any
    layout: TaskLayout
    backbone: torch.nn.Module
    method: MethodHooks
    val_images: ImageSet
    mapping_images: str
    protocol: Any = None  # the mixed setting's protocol (`bench.splits.settings`); None in class-iNCD
    manifest: Any = None  # a mixed run's given split (`setting.manifest_file`); None: drawn by the run
    domains: Any = None  # a domain-shifted stream's `StageDomains` (`bench.splits.manifests`); None without one


def assemble(spec: RunSpec, out: Path, device: torch.device, log: Log) -> Parts:
    """Build the parts of run `spec` (run directory `out`) on `device`, logging what a reader of the
    run's log needs to interpret its numbers."""
    from bench.registries import METHODS

    data = build_dataset(spec.dataset, spec.config["dataset"], spec.location.get("data_root"),
                         spec.location.get("partitions_dir") or str(out.parent.parent / "partitions"))
    order_seed = spec.config.get("split", {}).get("class_order_seed")
    data = data.with_class_order(order_seed)
    if order_seed is not None:
        log(f"class order {order_seed}: the canonical classes in the order {data.extra['class_order']}")
    protocol = manifest = domains = None
    if setting_of(spec.config) == "mixed":  # its steps own the labelled classes, then each step's new ones
        if spec.config["setting"].get("whole_train") and data.val is not None:
            log(f"the {spec.split} protocol trains on the whole official training set: the {len(data.val)} images "
                f"of the val partition are given back to training")
            data = data.with_whole_train()
        data = _held_out(spec, data, log)
        domains = _shifted(spec, data, out, log)
        if domains is not None:
            data, domains = domains
        if spec.config["setting"].get("manifest_file"):  # its indices are into that training set
            data, manifest, protocol = _from_manifest_file(spec, data, log)
        else:
            arrival = arrival_order(spec.config["setting"], data.num_classes, spec.dataset)
            if arrival is not None:  # the new classes in a peer's order: its steps bring them so
                before = np.asarray(data.extra.get("class_order", np.arange(data.num_classes)))
                data = data.in_class_order(arrival)
                data.extra["class_order"] = before[arrival].tolist()  # in the canonical classes
                log(f"classes arrive in {spec.config['setting']['arrival']}'s order: {data.extra['class_order']}")
            if domains is not None:  # each stage's counts are of its own domain's images
                stage_labels = [data.train.labels[domains.images == k] for k in domains.stages]
                protocol = protocol_for(spec.config["setting"], data.num_classes, stage_labels[0], stage_labels)
            else:
                protocol = protocol_for(spec.config["setting"], data.num_classes, data.train.labels)
        sizes = step_sizes(protocol)
        layout = TaskLayout(tuple(int(o) for o in np.cumsum((0,) + sizes[:-1])), sizes)
        if layout.num_classes < data.num_classes:
            why = "no step of the file holds them" if manifest is not None else "its steps cannot share them equally"
            log(f"the {spec.split} protocol leaves classes {layout.num_classes}..{data.num_classes - 1} out: {why}; "
                f"neither their training nor their test images take part")
    else:
        data = _held_out(spec, data, log)
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
    return Parts(data, layout, backbone, method, val_images, mapping_images, protocol, manifest, domains)


def _shifted(spec: RunSpec, data: Any, out: Path, log: Log) -> tuple[Any, Any] | None:
    """A domain-shifted stream's dataset (`bench.data.domains.shifted`) and where its stages draw from, or None
    without `setting.domains`."""
    from bench.data.domains import shifted
    from bench.protocol.feeding import cache_of
    from bench.splits.domains import stream_of
    from bench.splits.manifests import StageDomains

    stream = stream_of(spec.config["setting"].get("domains"), spec.n_steps, spec.dataset)
    if stream is None:
        return None
    identity = {"dataset": spec.dataset, "dataset_options": spec.config["dataset"], "data_root": str(data.root),
                "sizes": [len(data.train), len(data.test)],
                "holdout": spec.config.get("tuning", {}).get("holdout", 0.0),
                "holdout_seed": spec.config.get("tuning", {}).get("holdout_seed", 0)}
    data = shifted(data, stream, cache_of(spec, out.parent.parent), identity, log)
    names = data.extra["stream"]["names"]
    return data, StageDomains(tuple(names.index(str(d)) for d in stream), np.asarray(data.extra["stream"]["train"]),
                              np.asarray(data.extra["stream"]["source"]))


def _held_out(spec: RunSpec, data: Any, log: Log) -> Any:
    """The dataset as the run's tuning protocol sees it: with `tuning.holdout`, part of each class's training images
    in place of the test set (`LoadedDataset.with_held_out_test`), the test images never read."""
    tuning = spec.config.get("tuning", {})
    if not tuning.get("holdout"):
        return data
    held = data.with_held_out_test(float(tuning["holdout"]), int(tuning.get("holdout_seed", 0)))
    log(f"tuning protocol `validation`: {len(held.test)} of the {len(data.train)} training images held out "
        f"(tuning.holdout={tuning['holdout']}, seed {tuning.get('holdout_seed', 0)}) and scored in place of the test "
        f"set, whose images this run never reads")
    return held


def _from_manifest_file(spec: RunSpec, data: Any, log: Log) -> tuple[Any, Any, Any]:
    """A mixed run that holds a given split (`setting.manifest_file`): the dataset in the class order its
    steps make, the manifest, and its counts as the run's protocol."""
    from bench.splits.manifests import class_order_of, protocol_of, read_manifest_file

    setting = spec.config["setting"]
    manifest, digest = read_manifest_file(setting["manifest_file"], spec.n_steps - 1)
    if digest != setting["manifest_sha256"]:
        raise BenchError(f"setting.manifest_file {setting['manifest_file']}: its sha256 is {digest[:12]}…, the run was "
                         f"planned with {setting['manifest_sha256'][:12]}…: the file changed since; plan the run again")
    order = class_order_of(manifest, data.train.labels, data.num_classes, setting["manifest_file"])
    data = data.in_class_order(order)
    protocol = protocol_of(manifest, data.train.labels)
    log(f"split read from {setting['manifest_file']} (sha256 {digest[:12]}…): {len(manifest.steps)} steps of "
        f"{', '.join(str(len(rows)) for rows in manifest.steps)} images; classes in the order its steps make: "
        f"{order[:sum(step_sizes(protocol))].tolist()}")
    return data, manifest, protocol

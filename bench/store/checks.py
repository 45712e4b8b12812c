"""One store entry checked without running any of its code: what its folder holds (names, kinds, sizes: no symlink,
no path out of it), its `entry.json` (schema, the digests of its files), its spec (a protocol bench registers, the
card the spec gives), its predictions (no pickle, declared arrays of the right dtype and length, the layout of its
protocol) and its claims, every one recomputed from the predictions with bench's own evaluator.

Each check raises `Refused` with one line saying what is wrong; `check_entry` returns what the store-wide checks
need (`bench.store.verify`)."""
from __future__ import annotations

import math
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from bench.config.spec import RunSpec, n_steps_of
from bench.errors import BenchError, first_line
from bench.runs import predictions as schema
from bench.splits.layout import TaskLayout
from bench.store.layout import (BUNDLED, ENTRY, ENTRY_FORMAT, MAX_ENTRY_BYTES, MAX_SOURCE_FILES, MAX_UNPACKED_BYTES,
                                PREDICTIONS, RECOMPUTE_TOLERANCE, SOURCE, SPEC, SPLIT, card_of, entry_id, file_sha256,
                                read_json)

SOURCE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.py")
ENTRY_KEYS: Mapping[str, type | tuple[type, ...]] = {
    "format": int, "id": str, "run_id": str, "origin": str, "submission": str, "method": str, "preset": str,
    "label": str, "dataset": str, "split": str, "seed": int, "backbone": str, "method_sha256": str, "plugin": bool,
    "reported": dict, "bench_version": str, "files": dict, "card": dict, "claims": list}


class Refused(Exception):
    """An entry the store does not take, with one line saying why."""


@dataclass(frozen=True)
class Checked:
    """An entry that passed: its `entry.json`, its spec and the summary rows recomputed from its predictions."""

    entry: dict[str, Any]
    spec: RunSpec
    summary: dict[tuple[str, str], float]  # (flavour, metric) of the summary rows: what a reproduction must match


def check_folder(folder: Path) -> None:
    """Only plain files of an entry's names, inside the folder, within the size limit (a symlink, a device, a
    nested folder other than source/ of .py files: refused)."""
    total, sources = 0, 0
    for item in os.scandir(folder):
        if item.is_symlink():
            raise Refused(f"{item.name} is a symlink: an entry holds plain files only")
        if item.is_dir(follow_symlinks=False) and item.name == SOURCE:
            for inner in os.scandir(item.path):
                if inner.is_symlink() or not inner.is_file(follow_symlinks=False) or not SOURCE_NAME.fullmatch(inner.name):
                    raise Refused(f"{SOURCE}/{inner.name}: {SOURCE}/ holds plain .py files only (a method's source)")
                sources += 1
                total += inner.stat(follow_symlinks=False).st_size
            continue
        if not item.is_file(follow_symlinks=False) or item.name not in (ENTRY, *BUNDLED):
            raise Refused(f"{item.name}: not a file an entry holds ({', '.join((ENTRY, *BUNDLED, SOURCE + '/'))})")
        total += item.stat(follow_symlinks=False).st_size
    if sources > MAX_SOURCE_FILES:
        raise Refused(f"{sources} source files, over the limit of {MAX_SOURCE_FILES}")
    if total > MAX_ENTRY_BYTES:
        raise Refused(f"the entry is {total} bytes, over the limit of {MAX_ENTRY_BYTES}")


def read_entry(folder: Path) -> dict[str, Any]:
    """`entry.json`, its keys and their types, and its listed files: each present, of its size and sha256; no file
    present that it does not list."""
    if not (folder / ENTRY).is_file():
        raise Refused(f"no {ENTRY}")
    try:
        entry = read_json(folder / ENTRY, ENTRY)
    except ValueError as err:
        raise Refused(first_line(err)) from None
    if not isinstance(entry, dict):
        raise Refused(f"{ENTRY} is not a JSON object")
    wrong = [f"{k} ({t.__name__ if isinstance(t, type) else t[0].__name__})" for k, t in ENTRY_KEYS.items()
             if not isinstance(entry.get(k), t) or (t is int and isinstance(entry.get(k), bool))]
    if wrong:
        raise Refused(f"{ENTRY} lacks or mistypes {', '.join(wrong)}")
    if entry["format"] != ENTRY_FORMAT:
        raise Refused(f"{ENTRY} format {entry['format']}: this bench reads format {ENTRY_FORMAT}")
    files: dict[str, Any] = entry["files"]
    for name in files:
        if name not in BUNDLED and not (name.startswith(f"{SOURCE}/") and SOURCE_NAME.fullmatch(name[len(SOURCE) + 1:])):
            raise Refused(f"{ENTRY} lists {name!r}, not a file an entry holds")
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {ENTRY}
    if present != set(files):
        extra, missing = sorted(present - set(files)), sorted(set(files) - present)
        raise Refused(f"its files differ from {ENTRY}'s list: " + "; ".join(
            ([f"not listed: {', '.join(extra)}"] if extra else []) + ([f"missing: {', '.join(missing)}"] if missing else [])))
    for name, kept in files.items():
        if not isinstance(kept, dict) or (folder / name).stat().st_size != kept.get("bytes") \
                or file_sha256(folder / name) != kept.get("sha256"):
            raise Refused(f"{name} is not the file {ENTRY} lists (its size or sha256 differs)")
    for name in (SPEC, PREDICTIONS):
        if name not in files:
            raise Refused(f"no {name}: an entry is a run's spec and predictions")
    own = entry_id(entry["run_id"], files[PREDICTIONS]["sha256"], entry["origin"])
    if entry["id"] != own or folder.name != own:
        raise Refused(f"its folder and id are not its content's ({own})")
    return entry


def read_spec(folder: Path, entry: Mapping[str, Any]) -> RunSpec:
    """The entry's spec, of a protocol bench registers (split, dataset), its id the entry's, its card the spec's."""
    try:
        spec = RunSpec.from_json((folder / SPEC).read_text())
        spec.config["dataset"]  # noqa: B018  every run's config has its dataset section
        run_id = spec.run_id
    except Exception as err:
        raise Refused(f"{SPEC} is not a run's spec ({first_line(err)})") from None
    if run_id != entry["run_id"]:
        raise Refused(f"{SPEC} is run {run_id}, not the entry's run {entry['run_id']}")
    try:
        if n_steps_of(spec.split) != spec.n_steps:
            raise Refused(f"split {spec.split} has {n_steps_of(spec.split)} steps, the spec says {spec.n_steps}")
    except BenchError as err:
        raise Refused(f"not a protocol bench registers: {err}") from None
    from bench.registries import DATASETS

    DATASETS.import_from_location()
    if spec.dataset not in DATASETS.module_dict:
        raise Refused(f"dataset {spec.dataset!r} is not one bench registers ({', '.join(sorted(DATASETS.module_dict))})")
    mixed = spec.config.get("setting", {}).get("name", "incd") != "incd"
    if mixed != (SPLIT in entry["files"]):
        raise Refused(f"a mixed-setting run's entry holds its {SPLIT} (its split manifest), a class-iNCD run's none")
    card = card_of(spec, entry["files"].get(SPLIT, {}).get("sha256", ""))
    differs = sorted(k for k in card if entry["card"].get(k) != card[k])
    if differs:
        raise Refused(f"its card says other than its spec of {', '.join(differs)} (the spec's: "
                      + "; ".join(f"{k} {card[k]!r}" for k in differs) + ")")
    return spec


def num_classes(spec: RunSpec) -> int:
    from bench.registries import DATASETS

    return int(spec.config["dataset"].get("num_classes") or DATASETS.get(spec.dataset).num_classes)


def expected_layout(spec: RunSpec) -> TaskLayout | None:
    """The task layout the spec's protocol gives (None where it depends on the images: PromptCCD's ratios)."""
    from bench.splits.settings import MIXED_SPLITS, class_groups

    classes = num_classes(spec)
    setting = spec.config.get("setting", {})
    if setting.get("name", "incd") == "incd":
        return TaskLayout.contiguous(classes, spec.n_steps)
    if MIXED_SPLITS[spec.split].rule != "happy":
        return None
    labelled, per_step = class_groups(setting, classes)
    sizes = (labelled, *[per_step] * (spec.n_steps - 1))
    return TaskLayout(tuple(int(o) for o in np.cumsum((0,) + sizes[:-1])), sizes)


def read_predictions(folder: Path, spec: RunSpec) -> dict[str, np.ndarray]:
    """The predictions' arrays: a zip of `.npy` arrays the schema declares, none holding Python objects (a pickle),
    integers where the schema has labels and clusters, of the lengths and the layout of the spec's protocol."""
    path = folder / PREDICTIONS
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError) as err:
        raise Refused(f"{PREDICTIONS} is not a NumPy archive ({first_line(err)})") from None
    unpacked = sum(i.file_size for i in infos)
    if unpacked > MAX_UNPACKED_BYTES:
        raise Refused(f"{PREDICTIONS} unpacks to {unpacked} bytes, over the limit of {MAX_UNPACKED_BYTES}")
    names = [i.filename for i in infos]
    strange = [n for n in names if not n.endswith(".npy") or not schema.declared(n[:-4])]
    if strange:
        raise Refused(f"{PREDICTIONS} holds {', '.join(strange[:3])}: not arrays of the predictions schema")
    try:
        with np.load(path, allow_pickle=False) as loaded:
            schema.check_version(loaded, PREDICTIONS)
            stored = {key: loaded[key] for key in loaded.files}
    except ValueError as err:
        said = first_line(err)
        raise Refused(f"{PREDICTIONS} holds Python objects (a pickle), which bench never loads" if "pickle" in said
                      else f"{PREDICTIONS} cannot be read ({said})") from None
    except (BenchError, OSError, zipfile.BadZipFile) as err:
        raise Refused(f"{PREDICTIONS}: {first_line(err)}") from None
    for key, values in stored.items():
        kind = values.dtype.kind
        if (key in (schema.Keys.run_id, schema.Keys.domain_names)) != (kind == "U") or kind not in "iufU":
            raise Refused(f"{PREDICTIONS}: {key} is of dtype {values.dtype}, not the schema's")
        if kind == "f" and not np.isfinite(values).all() and schema.Keys.epoch_loss.indices(key) is None:
            raise Refused(f"{PREDICTIONS}: {key} holds NaN or infinity")
    if str(stored.get(schema.Keys.run_id, "")) != spec.run_id:
        raise Refused(f"{PREDICTIONS} names run {str(stored.get(schema.Keys.run_id, ''))!r}, not {spec.run_id}")
    check_arrays(stored, spec)
    return stored


def check_arrays(stored: Mapping[str, np.ndarray], spec: RunSpec) -> None:
    """Lengths and ranges: one layout entry per step, the protocol's layout, a prediction per test image, labels
    of the classes seen so far."""
    try:
        layout = schema.layout_of(stored)
    except Exception as err:
        raise Refused(f"{PREDICTIONS} has no task layout ({first_line(err)})") from None
    if len(layout.sizes) != spec.n_steps or layout.offsets != tuple(int(o) for o in np.cumsum((0,) + layout.sizes[:-1])):
        raise Refused(f"{PREDICTIONS}: its task layout {layout.sizes} is not {spec.n_steps} contiguous steps")
    expected = expected_layout(spec)
    if expected is not None and expected.sizes != layout.sizes:
        raise Refused(f"{PREDICTIONS}: its steps bring {layout.sizes} classes, the protocol {spec.split} on "
                      f"{spec.dataset} brings {expected.sizes}")
    if layout.num_classes > num_classes(spec):
        raise Refused(f"{PREDICTIONS}: {layout.num_classes} classes, {spec.dataset} has {num_classes(spec)}")
    for t in range(spec.n_steps):
        labels, unified = stored.get(schema.Keys.test_labels(t)), stored.get(schema.Keys.unified(t))
        if labels is None or unified is None:
            raise Refused(f"{PREDICTIONS} lacks {schema.Keys.test_labels(t)} or {schema.Keys.unified(t)}")
        seen = layout.offsets[t] + layout.sizes[t]
        if labels.ndim != 1 or unified.shape != labels.shape or labels.dtype.kind != "i" or unified.dtype.kind != "i":
            raise Refused(f"{PREDICTIONS}: step {t}'s labels and predictions are not integer arrays of one length "
                          f"({labels.shape}, {unified.shape})")
        if labels.size and (labels.min() < 0 or labels.max() >= seen):
            raise Refused(f"{PREDICTIONS}: step {t}'s test labels are not classes 0..{seen - 1}")
        _check_domains(stored, t, labels, spec.n_steps)


def _check_domains(stored: Mapping[str, np.ndarray], t: int, labels: np.ndarray, n_steps: int) -> None:
    """A domain-shifted stream's arrays: all or none, a domain per step and per test image, each a named one."""
    names, stages, domain = (stored.get(k) for k in (schema.Keys.domain_names, schema.Keys.stage_domains,
                                                      schema.Keys.test_domain(t)))
    if names is None and stages is None and domain is None:
        return
    if names is None or stages is None or domain is None:
        raise Refused(f"{PREDICTIONS}: a stream's domain_names, stage_domains and {schema.Keys.test_domain(t)} come "
                      f"together")
    if names.ndim != 1 or stages.shape != (n_steps,) or domain.shape != labels.shape \
            or stages.dtype.kind != "i" or domain.dtype.kind != "i":
        raise Refused(f"{PREDICTIONS}: step {t}'s domains are not one integer per step and per test image")
    for values in (stages, domain):
        if values.size and (values.min() < 0 or values.max() >= len(names)):
            raise Refused(f"{PREDICTIONS}: step {t}'s domains are not 0..{len(names) - 1}")


def recompute(stored: Mapping[str, np.ndarray], entry: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """Every claim against the rows bench's evaluator gives for the predictions: the same rows, each value within
    `RECOMPUTE_TOLERANCE` (a claim of null: a NaN row). The summary rows, recomputed."""
    from bench.protocol.steps import replay

    try:
        rows = replay(stored)
    except Exception as err:
        raise Refused(f"its predictions do not replay ({first_line(err)})") from None
    computed = {(int(r.step), r.group, r.flavour, r.metric): float(r.value) for r in rows}
    claimed: dict[tuple[int, str, str, str], Any] = {}
    for claim in entry["claims"]:
        if not (isinstance(claim, list) and len(claim) == 5 and isinstance(claim[0], int)
                and all(isinstance(c, str) for c in claim[1:4]) and (claim[4] is None or isinstance(claim[4], (int, float)))):
            raise Refused(f"claim {claim!r} is not [step, group, flavour, metric, value]")
        claimed[(claim[0], claim[1], claim[2], claim[3])] = claim[4]
    if set(claimed) != set(computed):
        odd = sorted(set(claimed) ^ set(computed))[:2]
        raise Refused(f"its claims are not the rows its predictions give (e.g. {', '.join('/'.join(map(str, k)) for k in odd)})")
    for key, value in computed.items():
        claim = claimed[key]
        if (claim is None) != math.isnan(value) or (claim is not None and abs(claim - value) > RECOMPUTE_TOLERANCE):
            raise Refused(f"claims {key[2]}/{key[3]} ({key[1]}, step {key[0]}) = {claim}, its predictions give {value:.6g}")
    return {(f, m): v for (_, g, f, m), v in computed.items() if g == "summary"}


def check_manifest(folder: Path, spec: RunSpec) -> None:
    """A mixed run's split manifest: bench's format, one step per step of its protocol, the first labelled."""
    if not (folder / SPLIT).exists():
        return
    from bench.splits.manifests import Manifest

    try:
        manifest = Manifest.from_json((folder / SPLIT).read_text())
    except Exception as err:
        raise Refused(f"{SPLIT} is not a split manifest ({first_line(err)})") from None
    if len(manifest.steps) != spec.n_steps or manifest.labelled != (True, *[False] * (spec.n_steps - 1)):
        raise Refused(f"{SPLIT} has {len(manifest.steps)} steps labelled {manifest.labelled}; {spec.split} has "
                      f"{spec.n_steps}, the first labelled")


def check_entry(folder: Path) -> Checked:
    """Every check of one entry, in an order that reads nothing a failed check has not vouched for."""
    check_folder(folder)
    entry = read_entry(folder)
    spec = read_spec(folder, entry)
    check_manifest(folder, spec)
    stored = read_predictions(folder, spec)
    return Checked(entry, spec, recompute(stored, entry))

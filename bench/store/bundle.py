"""A finished run's directory as a store entry: its files byte for byte, the metrics it claims (its own
`metrics.parquet` rows), its protocol card, its method's code digest and, for a method from outside bench, the
method's source files, to be read by the store's maintainers (never run by `bench store verify`)."""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.config.spec import RunSpec
from bench.core.resources import VERSION
from bench.errors import BenchError
from bench.runs.rundir import METRICS
from bench.store.layout import (BUNDLED, ENTRY, ENTRY_FORMAT, PREDICTIONS, SOURCE, SPEC, SPLIT, card_of, dump,
                                entry_id, file_sha256)


@dataclass(frozen=True)
class Bundle:
    """What `write_entry` puts in an entry's folder, read from a run directory."""

    run: Path
    spec: RunSpec
    entry: dict[str, Any]
    sources: tuple[Path, ...]  # a plugin method's files, copied under source/

    @property
    def id(self) -> str:
        return str(self.entry["id"])


def claims_of(run: Path) -> list[list[Any]]:
    """The run's metric rows as claims: [step, group, flavour, metric, value], a NaN value as null."""
    frame = pd.read_parquet(run / METRICS, columns=["step", "group", "flavour", "metric", "value"])
    return [[int(r.step), str(r.group), str(r.flavour), str(r.metric), None if math.isnan(r.value) else float(r.value)]
            for r in frame.itertuples()]


def plugin_sources(method: str) -> tuple[Path, ...]:
    """The files that define a method registered from outside bench (a plugin), in the order they are read;
    none for bench's own methods, whose code a verifier has (their digest names the version)."""
    from importlib.util import find_spec

    from bench.core.provenance import method_source_files
    from bench.registries import METHODS

    zoo = find_spec("bench.methods")  # the method zoo installs from methods/, beside bench/ in a checkout
    package_roots = [Path(__file__).resolve().parents[1],
                     *(Path(p).resolve() for p in ((zoo.submodule_search_locations or []) if zoo else []))]
    files = [Path(f).resolve() for f in method_source_files(METHODS.get(method))]
    return tuple(f for f in files if not any(f.is_relative_to(root) for root in package_roots))


def bundle_of(run: Path, origin: str, submission: str) -> Bundle:
    """The entry of the finished run in `run` (a BenchError naming the file when one cannot be read)."""
    run = Path(run)
    try:
        spec = RunSpec.from_json((run / SPEC).read_text())
    except Exception as err:
        raise BenchError(f"{run / SPEC} cannot be read as a run's spec ({err}); the run cannot be published") from None
    files: dict[str, dict[str, Any]] = {name: {"sha256": file_sha256(run / name), "bytes": (run / name).stat().st_size}
             for name in BUNDLED if (run / name).exists()}
    if PREDICTIONS not in files:
        raise BenchError(f"run {spec.run_id} has no {PREDICTIONS} (finished before runs kept them): a store keeps "
                         f"only what recomputes; run it again with `bench run --force` to publish it")
    metrics = pd.read_parquet(run / METRICS, columns=["method_sha256", "reported_A", "reported_F"])
    sources = plugin_sources(spec.method)
    for source in sources:
        files[f"{SOURCE}/{source.name}"] = {"sha256": file_sha256(source), "bytes": source.stat().st_size}
    entry = {
        "format": ENTRY_FORMAT, "id": entry_id(spec.run_id, files[PREDICTIONS]["sha256"], origin),
        "run_id": spec.run_id, "origin": origin, "submission": submission,
        "method": spec.method, "preset": spec.preset, "label": spec.label, "dataset": spec.dataset,
        "split": spec.split_label, "seed": spec.seed, "backbone": spec.backbone,
        "method_sha256": str(metrics["method_sha256"].iloc[0]), "plugin": bool(sources),
        "reported": {"A": str(metrics["reported_A"].iloc[0]), "F": str(metrics["reported_F"].iloc[0])},
        "bench_version": VERSION, "files": files,
        "card": card_of(spec, files.get(SPLIT, {}).get("sha256", "")),
        "claims": claims_of(run),
    }
    return Bundle(run, spec, entry, sources)


def write_entry(bundle: Bundle, folder: Path) -> None:
    """Write the entry in `folder` (new), then read every copied file back and compare it with the run's: nothing
    published differs from the run folder (a BenchError, and the folder removed, otherwise)."""
    folder.mkdir(parents=True)
    try:
        for name in bundle.entry["files"]:
            source = bundle.run / name if not name.startswith(f"{SOURCE}/") else \
                next(s for s in bundle.sources if s.name == name.split("/", 1)[1])
            (folder / name).parent.mkdir(exist_ok=True)
            shutil.copyfile(source, folder / name)
        (folder / ENTRY).write_text(dump(bundle.entry))
        for name, kept in bundle.entry["files"].items():
            if file_sha256(folder / name) != kept["sha256"]:
                raise BenchError(f"{folder / name} differs from the run's {name} after copying (the run changed "
                                 f"while it was published?); nothing of run {bundle.spec.run_id} was published")
        if claims_of(bundle.run) != bundle.entry["claims"]:
            raise BenchError(f"run {bundle.spec.run_id}'s {METRICS} changed while it was published; publish again")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise

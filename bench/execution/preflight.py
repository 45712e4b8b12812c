"""What a grid's runs will need, checked once before anything is written, started or submitted.

`bench run` and `bench.run(...)` share these checks, so that the command line and the Python API refuse the same
input with the same one-line `BenchError` instead of every run starting, failing and writing its own error.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

from bench.config.spec import RunSpec
from bench.core.storage import usable_path
from bench.errors import BenchError


def resolve_data_root(data_root: str | os.PathLike[str] | None) -> str | None:
    """Where the datasets are: `data_root` (--data-root), else $BENCH_DATA_ROOT, as an absolute path (recorded in
    each run's spec); None leaves it to the config's per-dataset `dataset.root`."""
    root = data_root or os.environ.get("BENCH_DATA_ROOT")
    return str(usable_path(Path(root).expanduser().resolve(), "--data-root (or $BENCH_DATA_ROOT)")) if root else None


def check_splits(specs: Sequence[Any]) -> None:
    """A split the dataset's classes cannot fill (more tasks than classes, or an empty last task
    under the authors' ceil(K/T) rule) is refused before anything runs."""
    from bench.data import declared_num_classes
    from bench.splits.layout import TaskLayout
    from bench.splits.settings import class_groups, setting_of

    for spec in specs:
        n = declared_num_classes(spec.dataset, spec.config["dataset"])
        if n is None:
            continue
        try:
            if setting_of(spec.config) == "mixed":
                class_groups(spec.config["setting"], n)
            else:
                TaskLayout.contiguous(n, spec.n_steps)
        except (ValueError, BenchError) as err:
            raise BenchError(f"split {spec.split!r} does not fit dataset {spec.dataset!r} ({n} classes): {err}") from None


def check_tail_backbones(specs: Sequence[Any]) -> None:
    """A method that trains a ViT's last blocks on a backbone without blocks, or with fewer blocks than
    it unfreezes, is refused before anything runs."""
    from bench.config.spec import first_trainable_block
    from bench.features.weights import REGISTERED_BACKBONES
    from bench.registries.catalogue import backbone_depth, known_method

    depths: dict[str, int] = {}
    for spec in specs:
        if not known_method(spec.method).runs_on.trains_blocks:
            continue
        key = f"{spec.backbone} {sorted(spec.config['backbone']['kwargs'].items())}"
        if key not in depths:
            depths[key] = backbone_depth(spec.backbone, spec.config["backbone"])
        if not depths[key]:
            vits = [name for name in REGISTERED_BACKBONES if backbone_depth(name, {})]
            raise BenchError(f"{spec.method} trains a ViT's last blocks; backbone {spec.backbone!r} has none; choose a "
                             f"ViT backbone: {', '.join(vits)} or timm:<a ViT model>")
        try:
            first_trainable_block(depths[key], spec.config["method"]["unfreeze"])
        except ValueError as err:
            raise BenchError(f"{spec.describe()}: method.unfreeze: {err}") from None


def check_timm_models(specs: Sequence[Any]) -> None:
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


def check_device(device: str | None, cluster: str) -> None:
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


def check_inputs(specs: Sequence[Any]) -> None:
    """What every run of the grid will read, checked once before anything is started or submitted:
    the datasets' files (located, not loaded), the backbone weight files (each loaded once into its
    backbone) and a given split manifest (against its dataset). One line on failure, instead of every run
    starting, failing and writing its own error."""
    import json

    from bench.data import make_reader
    from bench.features.weights import check_weights_file, resolve_pretrained

    seen: set[str] = set()
    for spec in specs:
        dataset = json.dumps([spec.dataset, spec.config["dataset"], spec.location.get("data_root")], sort_keys=True,
                             default=str)
        if dataset not in seen:
            seen.add(dataset)
            reader = make_reader(spec.dataset, spec.config["dataset"], spec.location.get("data_root"))
            if hasattr(reader, "check"):
                reader.check()
        manifest_file = spec.config.get("setting", {}).get("manifest_file")
        if manifest_file and json.dumps([dataset, manifest_file]) not in seen:
            seen.add(json.dumps([dataset, manifest_file]))
            _check_manifest_fits(spec, manifest_file)
        weights = json.dumps([spec.backbone, spec.config["backbone"]["pretrained"], spec.location.get("weights_dir")],
                             default=str)
        if weights not in seen:
            seen.add(weights)
            pretrained = resolve_pretrained(spec.backbone, spec.config["backbone"]["pretrained"],
                                            spec.location.get("weights_dir"))
            if isinstance(pretrained, str):
                check_weights_file(pretrained)
                _check_weights_load(spec)


def _check_weights_load(spec: RunSpec) -> None:
    """A weights file the grid's runs would load, loaded once now into its backbone: a file that cannot be read
    (truncated, empty, a pickle that asks for code) or is of another architecture is one line before any run,
    not a failure of every run after it starts. The backbone's shape does not depend on the images (the
    timm models the files load into take their input size from their own configuration)."""
    from bench.features.backbones import build_backbone

    build_backbone(spec.backbone, spec.config["backbone"], (224, 224, 3), spec.location.get("weights_dir"))


def _check_manifest_fits(spec: RunSpec, manifest_file: str) -> None:
    """A given split manifest (`setting.manifest_file`, whose form `read_manifest_file` checked when the run was
    planned) against the dataset it splits: every index one of its training images, every step bringing new
    classes. The dataset is read (its labels), once per dataset and file."""
    from bench.splits.manifests import class_order_of, read_manifest_file
    from bench.data import build_dataset

    manifest, _ = read_manifest_file(manifest_file, spec.n_steps - 1)
    data = build_dataset(spec.dataset, spec.config["dataset"], spec.location.get("data_root"))
    if spec.config["setting"].get("whole_train"):
        data = data.with_whole_train()
    class_order_of(manifest, data.train.labels, data.num_classes, f"setting.manifest_file {manifest_file}")


def check_caches(results: Path, specs: Sequence[Any]) -> None:
    """Refuse a cache the pending runs' missing banks cannot be written to (read-only, too little space)."""
    import json

    from bench.features.bank import default_cache_dir, list_banks
    from bench.features.bank_space import (DATASET_IMAGES, FEATURE_DIMS, TOKEN_COUNTS, TOKENS, bank_bytes_bound,
                                           cache_fits, check_cache)
    from bench.registries.catalogue import known_method

    needed: dict[Path, dict[tuple[Any, ...], int]] = {}
    for spec in specs:
        feat, data = spec.config["features"], spec.config["dataset"]
        tokens = known_method(spec.method).inputs == "tokens"
        if tokens and not (feat["mode"] == "bank" and feat.get("tokens") == "bank"):
            continue  # live tokens: no bank
        views = feat["views"] if feat["mode"] == "bank" else 0
        images = DATASET_IMAGES.get(spec.dataset) or (data.get("num_classes", 10) * (
            data.get("train_per_class", 100) + data.get("test_per_class", 100)))
        side, channels = data.get("image_size", 224), data.get("channels", 3)
        dim = FEATURE_DIMS.get(spec.backbone, side * side * channels if spec.backbone == "pixels" else 2048)
        cache = Path(spec.location.get("cache_dir") or default_cache_dir(results))
        what = (spec.dataset, spec.backbone, views, tokens, json.dumps(data, sort_keys=True, default=str))
        needed.setdefault(cache, {})[what] = bank_bytes_bound(images, views, dim,
                                                                   TOKEN_COUNTS.get(spec.backbone, TOKENS) if tokens else 1)
    spec_of = {(s.dataset, s.backbone, s.config["features"]["views"] if s.config["features"]["mode"] == "bank" else 0,
                known_method(s.method).inputs == "tokens", json.dumps(s.config["dataset"], sort_keys=True, default=str)): s
               for s in specs}
    for cache, banks in needed.items():
        present = {(b.fields.get("dataset"), b.fields.get("backbone"), b.fields.get("views"), b.kind == "token bank",
                    json.dumps(b.fields.get("dataset_options"), sort_keys=True, default=str))
                   for b in (list_banks(cache) if cache.exists() else [])}
        missing = {what: size for what, size in banks.items() if what not in present}
        if not missing:
            continue
        names = ", ".join(sorted({f"{d}/{b} V={v}" for d, b, v, _, _ in missing}))
        if cache_fits(cache, sum(missing.values())):
            check_cache(cache, sum(missing.values()), f"{len(missing)} bank(s): {names}")  # writable, at least
            continue
        # the nominal bound does not fit: bound each bank again from the images the reader finds and the shapes
        # the backbone gives, and refuse only what cannot fit
        exact = sum(real_bank_bytes(spec_of[what], what[2], what[3]) for what in missing)
        check_cache(cache, exact, f"{len(missing)} bank(s): {names}")


def real_bank_bytes(spec: RunSpec, views: int, tokens: bool) -> int:
    """At most what the bank of `spec`'s dataset and backbone holds, from the dataset's images (read) and the
    backbone's feature or token shape (built without weights: the shapes do not depend on them)."""
    import torch

    from bench.data import build_dataset
    from bench.features.backbones import build_backbone
    from bench.features.bank_space import bank_bytes_bound

    data = build_dataset(spec.dataset, spec.config["dataset"], spec.location.get("data_root"))
    images = len(data.train) + len(data.test) + (len(data.val) if data.val is not None else 0)
    backbone = build_backbone(spec.backbone, {**spec.config["backbone"], "pretrained": False}, data.train.image_shape)
    if not tokens:
        return bank_bytes_bound(images, views, int(backbone.feature_dim))
    from bench.features.tokens import embed, vit_of

    size = backbone.input_size or data.train.image_shape[0]
    with torch.no_grad():
        shape = embed(vit_of(backbone), torch.zeros(1, 3, size, size)).shape
    return bank_bytes_bound(images, views, int(shape[2]), int(shape[1]))


def check_cluster(cluster: str, workers: int | None, threads: int | None) -> None:
    """The cluster is one bench knows, and the worker and thread counts are positive."""
    from bench.core.numerics import check_threads
    from bench.execution.workers import CLUSTERS

    clusters = (*CLUSTERS, "slurm")
    if cluster not in clusters:
        raise BenchError(f"unknown cluster {cluster!r}; choose from {', '.join(clusters)}")
    if workers is not None and workers < 1:
        raise BenchError(f"--workers {workers}: must be an integer >= 1 (worker processes for --cluster local)")
    if threads is not None:
        check_threads(threads)


def local_slots(cluster: str, gpus: Sequence[str] | str | None, per_gpu: int, device: str | None,
                workers: int | None) -> list[str]:
    """The local pool's GPU slots (`bench.execution.gpus`): every visible GPU unless `gpus` names some, each
    `per_gpu` times; none for another cluster, `--device cpu` or a machine without GPUs. `--workers` with
    GPU slots must equal their number (a worker per slot)."""
    from bench.execution.gpus import gpu_slots, parse_gpus

    wanted = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    if cluster != "local":
        if wanted or per_gpu != 1:
            raise BenchError(f"--gpus and --runs-per-gpu place the local pool's workers; --cluster {cluster} "
                             f"places its runs itself (SLURM: gpus_per_node in the profile)")
        return []
    slots = gpu_slots(wanted, per_gpu, device=device)
    if slots and workers is not None and workers != len(slots):
        raise BenchError(f"--workers {workers} with {len(slots)} GPU slot(s) ({', '.join(slots)}): the pool runs one "
                         f"worker per slot; choose the slots with --gpus and --runs-per-gpu, or --device cpu")
    return slots


def check_pack(cluster: str, pack: int | str | None, hours: float) -> int | str | None:
    """`--pack` is for SLURM job arrays, N runs per task or auto; `--pack-hours` positive."""
    from bench.execution.packing import parse_pack

    pack = parse_pack(pack)
    if pack is not None and cluster != "slurm":
        raise BenchError(f"--pack puts several runs in one SLURM array task; --cluster {cluster} runs them on warm "
                         f"workers already (use --cluster slurm, or leave --pack out)")
    if not 0 < hours < math.inf:
        raise BenchError(f"--pack-hours {hours}: must be a number > 0 (the target length of a packed task)")
    return pack

"""What decides a run's numbers besides its spec: library versions, the CUDA stack, the backbone's
weights file. Every run records them as columns of its `metrics.parquet` (see `bench.runs.metrics_file` and
docs/results.md), and `bench report` warns when it would average runs that differ in them.

Float results differ in their last bits between torch releases, CUDA/cuDNN versions, GPUs and even
x86 CPUs; a weights file replaced under the same name changes everything. Recording these makes such
a difference visible rather than averaged away."""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where versions are read: `bench report` reads VERSION_COLUMNS without it
    import torch

# The columns a report must not silently average over (`device` is the GPU's name, or "cpu").
VERSION_COLUMNS = ("torch_version", "torchvision_version", "timm_version", "numpy_version", "cuda_version",
                   "cudnn_version", "device", "weights_sha256", "tail_precision", "threads", "method_sha256")

_CHUNK = 1 << 20
# sha256 of weights files by (resolved path, size, mtime in ns): a ViT-B/16 file is 350 MB (about 1 s
# to hash), read once per process however many runs a warm worker executes with it.
_HASHES: dict[tuple[str, int, int], str] = {}


def library_versions() -> dict[str, str]:
    """The versions of the libraries that compute a run: torch, torchvision, timm, numpy. A library the
    run never imported (timm and torchvision for a run on raw pixels) is read without importing it:
    importing timm pulls in torchvision, about a second of a short job's CPU time."""
    return dict(torch_version=_version("torch"), torchvision_version=_version("torchvision"),
                timm_version=_version("timm"), numpy_version=_version("numpy"))


def _version(name: str) -> str:
    """`name.__version__` as the imported module gives it, without importing it where it is not yet:
    read from the package's `version.py`, which carries the build's local tag (torchvision's
    `+cu132`) that the installed metadata drops, so the column is the same either way."""
    module = sys.modules.get(name)
    if module is not None:
        return module.__version__
    spec = importlib.util.find_spec(name)
    for folder in spec.submodule_search_locations or [] if spec else []:
        version_file = Path(folder) / "version.py"
        found = _VERSION_LINE.search(version_file.read_text()) if version_file.is_file() else None
        if found:
            return found.group(1)
    return importlib.metadata.version(name)


_VERSION_LINE = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def cuda_versions(device: torch.device) -> dict[str, str]:
    """CUDA's and cuDNN's versions when the run computes on a CUDA device; empty strings otherwise
    (a CUDA build of torch running on the CPU uses neither)."""
    import torch

    if device.type != "cuda":
        return dict(cuda_version="", cudnn_version="")
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return dict(cuda_version=torch.version.cuda or "", cudnn_version="" if cudnn is None else str(cudnn))


def weights_sha256(pretrained: Any) -> str:
    """The sha256 of the backbone's weights when they come from a local file (`backbone.pretrained`
    a path, or a paper backbone's file in --weights-dir); an empty string for hub weights (True) and
    random ones (False). Computed once per process per file (by path, size and mtime)."""
    if not isinstance(pretrained, (str, Path)):
        return ""
    path = Path(pretrained).expanduser()
    if not path.is_file():
        return ""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def method_sha256(cls: type) -> str:
    """sha256 of the files that define a method's class and its bases, in the class's MRO order (a
    built-in base has none): the method's code as the run's end finds it. A plugin method edited after
    some of its runs finished is told apart from them (the run id names the configuration, not the code)."""
    return files_sha256(method_source_files(cls))


def method_source_files(cls: type) -> list[str]:
    """The files that define `cls` and its bases, in MRO order, each once."""
    files: list[str] = []
    for klass in cls.__mro__:
        try:
            file = inspect.getsourcefile(klass)
        except TypeError:  # built-in
            continue
        if file and file not in files and Path(file).is_file():
            files.append(file)
    return files


def files_sha256(files: list[str] | tuple[str, ...]) -> str:
    """sha256 of the files' contents one after the other; "" for none."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(Path(file).read_bytes())
    return digest.hexdigest() if files else ""


def provenance(device: torch.device, pretrained: Any) -> dict[str, str]:
    """The version columns of a run that computed on `device` with backbone weights `pretrained`
    (`device` itself is recorded by the runner, as the GPU's name)."""
    return {**library_versions(), **cuda_versions(device), "weights_sha256": weights_sha256(pretrained)}


def utc_now() -> str:
    """A run's timestamps (log lines, started/ended columns, the DONE marker): UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit() -> str:
    """The commit of bench's source when it is a git checkout; "" for an installed copy."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def slurm_job_id() -> str:
    """The SLURM job (`<array job>_<task>` for an array task) the run computed in; "" outside SLURM."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        return f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return os.environ.get("SLURM_JOB_ID", "")


def gpu_of(device: Any) -> str:
    """The GPU a run computed on as the machine names it: `CUDA_VISIBLE_DEVICES`'s entry for the device's index
    where the variable is set (a worker of the local pool, a SLURM job), else the index; "" on the CPU. Two runs
    on "cuda" of one node are told apart by it (`bench.execution.gpus`)."""
    if getattr(device, "type", "cpu") != "cuda":
        return ""
    index = device.index or 0
    names = cuda_visible_names()
    return names[index] if index < len(names) else str(index)


def cuda_visible_names() -> list[str]:
    """The GPUs `CUDA_VISIBLE_DEVICES` names, in its order (indices or UUIDs); empty where it is unset or empty."""
    return [n.strip() for n in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if n.strip()]

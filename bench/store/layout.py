"""The store's layout (docs/results-store.md): where each thing lies, what an entry may hold and how large, an
entry's identity, and the protocol card that says what its numbers mean.

    STORE.json                           marks a store: {"store": "bench results", "version": 1}
    .github/workflows/verify.yml         the store's CI: `bench store verify . --since <the base branch>`
    claimed/<peer>/<table>.csv           published cells of a paper's table, one a row, each with its card
    submissions/<submission>/SUBMISSION.json    who submitted what, from which results folder (its origin)
    submissions/<submission>/<entry>/    one run: entry.json, spec.json, provenance.json, predictions.npz,
                                         split.json (the mixed setting's manifest), source/*.py (a plugin method's)

An entry's folder is named by its content (`entry_id`: its run id, the sha256 of its predictions and its origin), so
the same run's same numbers from one results folder are one entry however often they are submitted.
"""
from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any, Mapping

from bench.config.spec import RunSpec
from bench.splits.settings import SELECTIONS, TEST_SELECTIONS

STORE_MARK = "STORE.json"
STORE_FORMAT = 1
SUBMISSIONS, CLAIMED = "submissions", "claimed"
SUBMISSION = "SUBMISSION.json"
WORKFLOW = ".github/workflows/verify.yml"
ENTRY, SPEC, PROVENANCE, PREDICTIONS, SPLIT = "entry.json", "spec.json", "provenance.json", "predictions.npz", "split.json"
SOURCE = "source"  # a plugin method's own files: read by a maintainer, never run by verify
BUNDLED = (SPEC, PROVENANCE, PREDICTIONS, SPLIT)  # a run directory's files an entry carries, byte for byte
ENTRY_FORMAT = 1

# what an entry may weigh: a CIFAR-100 5-step run keeps about 0.3 MB of predictions; ImageNet-size test sets more
MAX_ENTRY_BYTES = 16 * 2**20
MAX_JSON_BYTES = 2 * 2**20
MAX_UNPACKED_BYTES = 256 * 2**20  # the predictions' arrays unpacked: a zip bomb is refused before it is read
MAX_SOURCE_FILES = 32
# two submissions of the same run (spec and method code) from two results folders agree when every summary row
# differs by at most this much (percentage points): GPUs and library versions move the last digits, not more
REPRODUCE_TOLERANCE = 0.5
# a claim recomputes when it equals the recomputed value to this much (the same code gives the same float)
RECOMPUTE_TOLERANCE = 1e-6
LEVELS = ("claimed", "recomputed", "reproduced")


def entry_id(run_id: str, predictions_sha256: str, origin: str) -> str:
    """An entry's folder name: the run, the very predictions it holds and the results folder they came from (a
    reproduction elsewhere that wrote the same bytes is an entry of its own, not a duplicate)."""
    return hashlib.sha256(f"{run_id}:{predictions_sha256}:{origin}".encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def origin_of(results: Path) -> str:
    """Which results folder a submission came from (a host and a path, hashed): two submissions of one run from
    two origins are a reproduction; from one origin, a second opinion of the same folder."""
    where = f"{socket.gethostname()}:{Path(results).resolve()}"
    return hashlib.sha256(where.encode()).hexdigest()[:12]


def card_of(spec: RunSpec, manifest_sha256: str = "") -> dict[str, Any]:
    """What a measured entry's numbers mean: its protocol, how K was known and the epoch selected, its backbone; a
    verifier derives it again from the spec and refuses an entry whose card says otherwise."""
    setting: Mapping[str, Any] = spec.config.get("setting", {})
    mixed = setting.get("name", "incd") != "incd"
    selection = str(setting.get("selection", "last")) if mixed else "last"
    return {
        "dataset": spec.dataset, "split": spec.split_label, "setting": "mixed" if mixed else "incd",
        "stages": spec.n_steps,
        "labelled_fraction": float(setting.get("labelled_fraction", 0.0)) if mixed else 0.0,
        "metric": ("All, Old, New per stage on the test images of every class seen; A = mean All over the unlabelled "
                   "stages" if mixed else "the paper's A (accuracy on every task's test images after the last step) "
                   "and F (forgetting)"),
        "k": str(setting.get("k", "known")) if mixed else "known",
        "evaluation": str(setting.get("evaluation", "inductive")) if mixed else "inductive",
        "selection": f"{selection}: {SELECTIONS.get(selection, selection)}",
        "selection_on_test": selection in TEST_SELECTIONS,
        "seeds": 1, "seed": spec.seed, "backbone": spec.backbone,
        "reported_by": "measured by bench, recomputed from its predictions",
        "manifest_sha256": manifest_sha256,
    }


def check_store(store: Path) -> None:
    """A BenchError unless `store` is a store's checkout (its mark at the top)."""
    from bench.errors import BenchError

    if not (Path(store) / STORE_MARK).is_file():
        raise BenchError(f"{store} is not a bench results store (no {STORE_MARK} at its top): `bench store init` "
                         f"makes one")


def read_json(path: Path, what: str) -> Any:
    """A store's JSON file, strictly: at most `MAX_JSON_BYTES`, and no NaN or infinity (not JSON; a claim of NaN
    is no claim). ValueError with one line otherwise."""
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ValueError(f"{what} is {path.stat().st_size} bytes, over the limit of {MAX_JSON_BYTES}")

    def no_constant(name: str) -> Any:
        raise ValueError(f"{what} holds {name}, which is not a number JSON allows")

    return json.loads(path.read_text(), parse_constant=no_constant)


def dump(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"

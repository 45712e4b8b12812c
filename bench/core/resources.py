"""Where bench's own files are, installed or in a source checkout.

The repository keeps the folders of the project's layout beside `bench/` (`methods/`, `registries/`,
`results/paper/`, `slurm/profiles/`); an install (wheel, `pip install .` or `-e .`) maps them into the
one package `bench` (pyproject's `package-dir`): `bench.methods`, `bench.registries`, `bench/paper/`,
`bench/slurm_profiles/`. Code asks here rather than guessing either layout.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # the package `bench` (this file is bench/core/resources.py)

# the name inside the installed package -> the folder in a source checkout
CHECKOUT_PLACES = {"methods": "methods", "registries": "registries", "paper": "results/paper",
                   "slurm_profiles": "slurm/profiles"}


def resource_dir(name: str) -> Path:
    """The directory of bench's own `name` (one of `CHECKOUT_PLACES`), whichever layout this is."""
    installed = HERE / name
    return installed if installed.is_dir() else HERE.parent / CHECKOUT_PLACES[name]


def _version() -> str:
    try:
        return version("bench")
    except PackageNotFoundError:  # running from a checkout that was not pip-installed
        return "0+unknown"


VERSION = _version()  # `bench.__version__`

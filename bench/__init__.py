"""bench: a benchmark harness for class-incremental novel class discovery."""
from importlib.metadata import PackageNotFoundError, version

from bench.resources import checkout_root

try:
    __version__ = version("bench")
except PackageNotFoundError:  # running from a checkout that was not pip-installed
    __version__ = "0+unknown"

# A source checkout keeps `methods/` and `registries/` beside `bench/`; an install maps them to
# `bench.methods` and `bench.registries`. A checkout imported without installing (PYTHONPATH) does the
# same here, so that it imports its own copies and never an installed checkout's.
if checkout_root() is not None:
    __path__.append(str(checkout_root()))  # noqa: F821 (a package's __path__)

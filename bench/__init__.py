"""bench: a benchmark harness for class-incremental novel class discovery."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bench")
except PackageNotFoundError:  # running from a checkout that was not pip-installed
    __version__ = "0+unknown"

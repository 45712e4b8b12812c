"""The `bench` command: one module per command (`run`, `status`, `cancel`, `report`, `metrics`, `listing`
for `bench list`, `data`, `weights`, `cache`), what they share in `common`, the entry point in `main`.

Each command parses its options and calls the Python API (`bench.api`) or the library; the checks
before anything runs live there (`bench.execution.preflight`), so the command line and the API refuse the same
input with the same one-line error.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features, bench.runs,
bench.protocol, bench.reporting, bench.kit, bench.execution, bench.store, bench.tuning, bench.api.
"""
from bench.cli.main import build_parser, main

__all__ = ["build_parser", "main"]

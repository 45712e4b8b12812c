"""`bench tune`: a method's hyper-parameters searched with Optuna on a tuning protocol that never reads the test
images (docs/settings.md#tuning), each trial an ordinary bench run scheduled as `bench run` schedules a grid.

- `space`: the search space (declared as `_search_space` in the method's preset file, or a JSON/YAML file), its checks;
- `study`: the Optuna study (its journal file by default, an RDB URL when given), its trials, resuming, the best.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features,
bench.runs, bench.protocol, bench.reporting, bench.execution.
"""

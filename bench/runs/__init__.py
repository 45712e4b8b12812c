"""A run's files: its directory, and what it keeps there so that nothing finished is lost.

- `rundir`: where a run lives, whether it is done (without torch), setting damaged files aside;
- `runstore`: one process at a time (the lock), the log, and a finished run's files written in order;
- `checkpoint`: what a run has learned and recorded after its last finished step (read without running code);
- `predictions`: what the evaluator was given, stored so that metrics can be recomputed, and the schema of that
  file (its keys and version), which every reader and writer goes through;
- `provenance_file`: `provenance.json`, where and with what the run made its numbers, beside its predictions;
- `rows`: the metric row (`MetricRow`), the unit of `metrics.parquet`;
- `metrics_file`: `metrics.parquet`, a run's rows with its identity and provenance columns;
- `trackers`: what a run sends to TensorBoard, W&B or MLflow as it runs (optional extras), never failing it;
  `tracker_endpoints`: whether their servers answer, asked once before the runs.

Storage knows nothing of the protocol: how rows are computed from predictions is `bench.protocol`.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config.
"""

"""Where runs run, and the checks before they do.

- `selection`: which runs of a grid a command means (filters, done or not) and `preflight`: every check
  that can be made before anything runs (data, weights, disk space, options);
- `workers` (the local pool of warm processes), `lifeline` and `forkserver_lifeline` (processes that end
  with bench), `scheduler` (runs to workers, in-process or SLURM);
- `slurm`: job arrays through submitit, profiles, status and cancel;
- `launch`: `bench run` behind one entry point (`launch(selection, options)`), from the selection to the
  leaderboard it prints at the end (`bench.reporting.outcomes`).

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features, bench.runs,
bench.protocol, bench.reporting.
"""

"""What a run is, before it runs: the unit of work and everything that names one.

- `spec`: `RunSpec` (one run; its canonical JSON hashes to the run id), method names, slugs and labels;
- `selection`: `Selection`, which runs a command or an API call means (a grid narrowed, where the results are),
  as one value the command line and the Python API both make;
- `presets`: a method's presets (`code`, `equations`, variants), overrides and the resolved config;
- `grids`: grids of blocks, their files (bench's and the plugins') and their expansion into run specs;
- `validate`: every config value checked against its default, range and choices.

The settings and their splits (how a run's classes and images are cut into steps) are `bench.splits`.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data.
"""

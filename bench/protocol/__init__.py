"""The protocol: one step loop for every setting, and how a method is fed and evaluated.

- `runner`: one job = one run spec: its directory locked, resumed from its checkpoint, and the step loop
  (for each step: learn, evaluate on everything seen so far, record);
- `steps`: what a setting gives that loop (`Steps`); `class_incd` (the paper's protocol) and `mixed`
  (continual category discovery) are the two settings' steps, metric rows and summaries;
- `step`: the `Step` a method learns from (what it may see, and no label unless its setting says so), built in one
  place for every setting (`step_of`);
- `planning`: what a run is made of (device, threads, data, layout, backbone, method);
- `feeding`: what a method is fed (features or tokens, from the banks or live);
- `outputs`: what a method answers (`logits`, `task_logits`) checked to be of the protocol's shape;
- `evaluate`: the metrics (task-specific, task-agnostic with and without re-fitted maps, A, F, ...);
- `epoch_selection`, `estimate_k`: which epoch a step keeps, how many new classes a step holds;
- `transductive`: PromptCCD's evaluation and selection (semi-supervised k-means over a method's representation);
- `recompute`: a finished run's metrics again from its stored predictions, with no training.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features, bench.runs.
"""

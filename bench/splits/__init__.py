"""Splits: how a setting cuts a dataset into the steps of a run, its classes and its images.

- `layout`: `TaskLayout`, how a run's classes are cut into tasks (contiguous ranges of the class order), the
  unit every setting's steps are counted in;
- `settings`: the settings (`incd`, the paper's class-iNCD; `mixed`, continual category discovery), their
  split names and defaults, and the mixed setting's registered protocols;
- `manifests`: a mixed run's split (`MixedProtocol`, the counts a protocol asks for per step; `Manifest`,
  which image goes to which step, labelled or not), drawn, written and read back;
- `peer_splits`: the peers' split files (PromptCCD's configs and lists, the SSB class splits Happy reads),
  read as data; `happy_draw`: Happy's own draw of images, replayed.

How the mixed setting cuts CIFAR into steps starts in `settings.MIXED_SPLITS` and ends in `manifests.draw`.
Nothing here imports torch or any other part of bench than its errors.

Imports from: bench.errors.
"""

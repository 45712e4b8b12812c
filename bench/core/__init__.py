"""bench's ground floor: what every other layer shares and that knows nothing of runs or methods.

- `resources`: where bench's own files are (installed or in a checkout) and its version;
- `storage`: atomic file writes and the check that a directory can be written;
- `provenance`: what decides a run's numbers besides its spec (library versions, the CUDA stack, weights
  files, the hash of a method's source files);
- `numerics`: CPU threads and deterministic kernels, fixed the same way for every run;
- `distances`: squared Euclidean distances between rows, what every k-means of bench computes with;
- `runs_on`: what a method runs on (`RunsOn`), declared once per method class and read by every layer.
- `download`: files fetched from their publisher or a mirror: resumed, verified, kept only whole, with
  progress on a terminal (`bench data fetch`, `bench weights fetch`).
- `sizes`: byte counts as a person reads them (`size_text`: `1.5 MiB`).
- `unpack`: archives unpacked without trusting them: each member checked before it is written (no link, device
  or name leading out, no clash, bounded size), for `bench data fetch`; standard library only.

Imports from: bench.errors.
"""

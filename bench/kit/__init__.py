"""The plugin author's kit: `bench new` writes a method or a dataset to start from (`scaffold`, `templates/`),
`bench check` runs the conformance checks bench's own methods pass (`conformance`, with what they watch a
method with in `probes`).

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features, bench.runs,
bench.protocol.
"""

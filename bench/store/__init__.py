"""The shared results store (docs/results-store.md): a git repository of run bundles whose numbers count only when
they recompute from their stored predictions, and the published tables beside them as `claimed` entries.

- `layout`: the store's folders and files, the size limits, an entry's identity and its protocol card;
- `bundle`: a finished run's directory as an entry (its files byte for byte, its claims, its card);
- `publish`: `bench publish`: a grid's finished runs into a store checkout, on a new branch, in one commit;
- `claimed`: the published tables bench ships (`results/paper/`) as `claimed` entries, and `bench store init`;
- `verify`: `bench store verify`: every entry checked without running any of its code, and its level;
- `site`: `bench store site`: the store's static leaderboard;
- `compare`: `bench report --store`: a grid's runs beside the store's entries, paired on the same test images;
- `gitops`: the few git commands a store needs, each failure one line.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.config, bench.runs, bench.protocol,
bench.reporting.
"""

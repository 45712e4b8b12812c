"""The method zoo (`bench.methods`): one module per method, registered in `bench.registries.METHODS` on import;
`base` is the hook API (`Method`), the shared pieces are `blocks`, `loop`, `tails`, `finetuned`, `buffers`, `rankstats`,
`gcd_losses`, `gcd_objective`, `draws`, `happy_parts`, `happy_pp_parts`, `prompt_pool`, `metagcd_parts` and
`anchored_kmeans`.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config, bench.features, bench.protocol.
"""
from bench.methods import (baseline, baseline_pp, cassle, der, ewc, frost, gaussian_per_class, happy,  # noqa: F401
                           happy_pp, joint, joint_unfrozen, kmeans, lwf, metagcd, ncm_kmeans, promptccd, restune,
                           simgcd, vb_cgcd)

"""The method zoo (`bench.methods`): one module per method, registered in `bench.registries.METHODS` on import."""
from bench.methods import (baseline, baseline_pp, cassle, der, ewc, frost, gaussian_per_class, joint,  # noqa: F401
                           joint_unfrozen, kmeans, lwf, ncm_kmeans, restune)

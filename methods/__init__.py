"""The method zoo (`bench.methods`): one module per method, registered in `bench.registries.METHODS` on import."""
from bench.methods import baseline, baseline_pp, cassle, der, ewc, frost, joint, joint_unfrozen, kmeans, lwf, restune  # noqa: F401

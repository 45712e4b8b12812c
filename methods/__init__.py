"""The method zoo: one module per method, registered in `registries.METHODS` on import."""
from methods import baseline, baseline_pp, cassle, der, ewc, frost, joint, joint_unfrozen, kmeans, lwf, restune  # noqa: F401

"""The method zoo: one module per method, registered in `registries.METHODS` on import."""
from methods import baseline, baseline_pp, joint, joint_unfrozen, kmeans  # noqa: F401

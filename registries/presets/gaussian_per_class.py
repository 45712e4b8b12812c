# Gaussian per class (docs/methods.md#gaussian-per-class): a continual-GCD baseline on frozen plain
# features after VB-CGCD (ICML'25), not a method of the paper. It has no authors' code, so `code` changes
# no method key of `equations`: it only sets `features.policy="code"`, as every default preset does
# (this method reads no augmented view, so the policy changes none of its numbers). Nothing was tuned
# on a benchmark: shrinkage 0.5 is the middle of its range.
equations = dict(
    normalize=True,  # L2-normalise the plain features
    shrinkage=0.5,  # α in Σ = (1 − α)·S + α·(tr(S)/D)·I, in (0, 1]; 1: isotropic, one variance a class
    min_variance=1e-6,  # σ²_min: the floor of tr(S)/D; a one-image class gets σ²_min·I
    em_iters=10,  # EM iterations of an unlabelled step after the k-means initialisation
    max_iter=200,  # Lloyd iterations of the anchored k-means that initialises the new classes
    n_init=10,  # its k-means++ inits; the one of least inertia is kept
)
code = dict(features=dict(policy="code"))

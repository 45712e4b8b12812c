# NCM + k-means (docs/methods.md#ncm--k-means): a continual-GCD baseline on frozen plain features, not a
# method of the paper. It has no authors' code, so `code` changes no method key of `equations`: it only
# sets `features.policy="code"`, as every default preset does (this method reads no augmented view, so
# the policy changes none of its numbers). Nothing was tuned on a benchmark: 10 inits as scikit-learn's
# KMeans long defaulted to, at most 200 iterations as the K-means reference's `code` preset.
equations = dict(
    normalize=True,  # L2-normalise the plain features first
    max_iter=200,  # Lloyd iterations of the anchored k-means per init, fewer once no assignment changes
    n_init=10,  # k-means++ inits of an unlabelled step; the one of least inertia is kept
)
code = dict(features=dict(policy="code"))

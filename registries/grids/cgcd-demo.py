# The mixed setting on scikit-learn's digits with flattened pixels (no download; minutes on 2 CPU cores, VB-CGCD's
# runs the longest: docs/performance.md#vb-cgcds-fit): the frozen-feature methods that run it, K known and K
# estimated, three seeds of one split draw.
methods = ["K-means", "Baseline", "Baseline++", "Joint (frozen)", "NCM + k-means", "Gaussian per class", "VB-CGCD"]
datasets = ["digits"]
splits = ["happy-5-stage", "promptccd-3-stage"]
seeds = [0, 1, 2]
backbone = "pixels"
blocks = [
    dict(name="K known"),
    dict(name="K estimated", cfg=dict(setting=dict(k="silhouette"))),
]

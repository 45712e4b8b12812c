# The default grid of `bench run`: the frozen-backbone methods on scikit-learn's digits, with
# flattened pixels as the backbone (about 1.5 minutes on 2 CPU cores).
methods = ["Baseline", "Baseline++", "K-means", "Joint (frozen)"]
datasets = ["digits"]
splits = ["2-step", "5-step"]
seeds = [0, 1, 2]
backbone = "pixels"

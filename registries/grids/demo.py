# The default grid of `bench run`: Baseline and K-means on scikit-learn's digits, flattened pixels.
methods = ["Baseline", "K-means"]
datasets = ["digits"]
splits = ["2-step", "5-step"]
seeds = [0, 1, 2]
backbone = "pixels"

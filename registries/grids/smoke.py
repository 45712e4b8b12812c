# The CI grid: tiny generated data, few epochs; seconds on a CPU.
methods = ["Baseline", "K-means"]
datasets = ["synthetic"]
splits = ["2-step"]
seeds = [0]
backbone = "pixels"
cfg = dict(
    method=dict(epochs=5, batch_size=64),
    dataset=dict(num_classes=6, image_size=8, train_per_class=20, test_per_class=10),
    features=dict(views=2),
)

# The mixed setting's CI grid: the smoke recipe (tiny generated images, a tiny randomly initialised timm ViT, a few
# epochs; seconds on a CPU) with the methods that train the last block beside frozen-feature baselines, on Happy's
# protocol: it checks that they run end to end and report, not what they score.
methods = ["NCM + k-means", "Gaussian per class", "SimGCD (continual)", "Happy"]
datasets = ["synthetic"]
splits = ["happy-5-stage"]
seeds = [0]
backbone = "timm:vit_tiny_patch16_224"
cfg = dict(
    method=dict(labelled_epochs=2, epochs=2, batch_size=16, proj_hidden_dim=32, proj_dim=16),
    backbone=dict(pretrained=False, kwargs=dict(img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2)),
    features=dict(views=2),
)
dataset_options = dict(synthetic=dict(num_classes=12, image_size=8, train_per_class=12, test_per_class=4))
blocks = [
    dict(name="last epoch"),
    dict(name="Happy's selection", cfg=dict(setting=dict(selection="happy"))),
]

# The domain-shifted stream's CI grid (docs/settings.md#domain-shifted-streams): every method of the mixed setting on
# the smoke recipe (cgcd-smoke's: tiny generated images, a tiny random ViT, a few epochs), its images at 32 pixels (the
# ImageNet-C functions' least), on Happy's protocol, once on the clean images and once on bench's ImageNet-C stream:
# it checks that each runs the stream end to end and reports it beside the clean run, not what they score.
methods = ["K-means", "Baseline", "Baseline++", "Joint (frozen)", "NCM + k-means", "Gaussian per class", "VB-CGCD",
           "SimGCD (continual)", "Happy", "Happy++", "PromptCCD", "MetaGCD"]
datasets = ["synthetic"]
splits = ["happy-5-stage"]
seeds = [0]
backbone = "timm:vit_tiny_patch16_224"
cfg = dict(
    method=dict(labelled_epochs=2, epochs=2, batch_size=16, proj_hidden_dim=512, proj_dim=16, head_dim=64, prompt_from=1,
                refit_every=1, top_k=2, n_samples=10, offline_epochs=1, offline_batch_size=16, meta_tasks=1,
                pseudo_sessions=2, inner_epochs=1, outer_steps=2, meta_batch_size=16),
    backbone=dict(pretrained=False, kwargs=dict(img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2)),
    features=dict(views=2),
)
dataset_options = dict(synthetic=dict(num_classes=12, image_size=32, train_per_class=12, test_per_class=4))
blocks = [
    dict(name="clean"),
    dict(name="ImageNet-C stream", cfg=dict(setting=dict(domains="imagenet-c-6"))),
]

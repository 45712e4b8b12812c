# The mixed setting's CI grid: the smoke recipe (tiny generated images, a tiny randomly initialised timm ViT, a few
# epochs; seconds on a CPU) with the methods that train the last block beside frozen-feature baselines, on Happy's
# protocol: it checks that they run end to end and report, not what they score.
methods = ["NCM + k-means", "Gaussian per class", "VB-CGCD", "SimGCD (continual)", "Happy", "Happy++", "PromptCCD", "MetaGCD"]
datasets = ["synthetic"]
splits = ["happy-5-stage", "promptccd-3-stage"]
seeds = [0]
backbone = "timm:vit_tiny_patch16_224"
cfg = dict(
    # PromptCCD's pool fitted from its second epoch (its code: from the 30th), so that its prompts are exercised;
    # projector layers of 512 (narrower ones, drawn with std 0.02, shrink its output until a step collapses it)
    # MetaGCD's offline stage and meta-training cut to one epoch, one meta-task of two pseudo sessions
    method=dict(labelled_epochs=2, epochs=2, batch_size=16, proj_hidden_dim=512, proj_dim=16, head_dim=64, prompt_from=1,
                refit_every=1, top_k=2, n_samples=10, offline_epochs=1, offline_batch_size=16, meta_tasks=1,
                pseudo_sessions=2, inner_epochs=1, outer_steps=2, meta_batch_size=16),
    backbone=dict(pretrained=False, kwargs=dict(img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2)),
    features=dict(views=2),
)
dataset_options = dict(synthetic=dict(num_classes=12, image_size=8, train_per_class=12, test_per_class=4))
blocks = [
    dict(name="last epoch", splits=["happy-5-stage"]),
    dict(name="Happy's selection", methods=["NCM + k-means", "SimGCD (continual)", "Happy", "Happy++"],
         splits=["happy-5-stage"],
         cfg=dict(setting=dict(selection="happy"))),
    dict(name="PromptCCD's protocol", splits=["promptccd-3-stage"],
         cfg=dict(setting=dict(evaluation="transductive", selection="promptccd"))),
]

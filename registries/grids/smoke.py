# The CI grid: tiny generated images, a tiny randomly initialised timm ViT, few epochs; seconds on a CPU.
methods = ["Baseline", "Baseline++", "K-means", "Joint (frozen)", "Joint (unfrozen)", "EwC", "LwF", "DER", "ResTune",
           "FRoST", "FRoST:sinkhorn", "CaSSLe"]
datasets = ["synthetic"]
splits = ["2-step"]
seeds = [0]
backbone = "timm:vit_tiny_patch16_224"
cfg = dict(
    method=dict(epochs=5, batch_size=64, ktrfr_epochs=5, joint_epochs=5, stage1_epochs=3, stage2_epochs=3,
                warmup_epochs=3, buffer_size=20, ssl_epochs=3, ssl_batch_size=32, proj_hidden_dim=64,
                pred_hidden_dim=64, distill_hidden_dim=64, output_dim=16, svi_iters=100),
    backbone=dict(pretrained=False, kwargs=dict(img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2)),
    features=dict(views=2),
)
# Options per dataset (a grid's datasets may take different ones).
dataset_options = dict(synthetic=dict(num_classes=6, image_size=8, train_per_class=20, test_per_class=10))

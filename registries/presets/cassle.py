# CaSSLe (docs/methods.md#cassle). The authors trained its ViT-B/16 backbones with a
# port of cassle that is not public, so `equations` states what it assumes:
# - what trains: the last block, as the paper says of every adapted method;
# - BYOL and its distillation as cassle's code has them: projector 4096-256, predictor 4096, the
#   predictive distiller 2048, λ = 1, the EMA target's τ from 0.99 to 1 over each step's optimiser
#   steps, batches without a last partial one;
# - the BYOL views: cassle's CIFAR views (its CifarTransform and byol_distill.sh), not bench's base
#   crop and jitter: RandomResizedCrop(scale=(0.08, 1)) only, ColorJitter(0.4, 0.4, 0.2, 0.1) with
#   p 0.8, grayscale p 0.2, a flip, and per view blur 0 and 0, solarisation (threshold 128) 0 and 0.2;
# - the optimiser: the paper's other adapted methods' (SGD, momentum 0.9, lr 0.1, cosine) with
#   cassle's weight decay 1e-5, for 100 epochs per step (their main stage's length); cassle's LARS,
#   warm-up, lr 1.0 and 500 epochs are a ResNet-18 trained from scratch on CIFAR;
# - the discovery head: Baseline's procedure and numbers, as the authors' head training (200 epochs,
#   batch 256, weight normalisation).
equations = dict(
    unfreeze=1,
    ssl_epochs=100,
    ssl_batch_size=256,
    ssl_lr=0.1,
    ssl_momentum=0.9,
    ssl_weight_decay=1e-5,
    ssl_eta_min=1e-4,
    proj_hidden_dim=4096,
    output_dim=256,
    pred_hidden_dim=4096,
    distill_hidden_dim=2048,
    distill_weight=1.0,
    base_tau=0.99,
    final_tau=1.0,
    view_blur_p=[0.0, 0.0],          # per view (BYOL's ImageNet recipe: 1.0, 0.1)
    view_solarize_p=[0.0, 0.2],      # per view
    view_crop_min_scale=0.08,        # RandomResizedCrop's smallest area fraction (bench's base crop: 0.5)
    view_brightness=0.4,             # ColorJitter's strengths (cassle's CIFAR script)
    view_contrast=0.4,
    view_saturation=0.2,             # factor in [0.8, 1.2] (the paper's views: 0.4)
    view_hue=0.1,
    # the discovery head: Baseline's keys
    epochs=200,
    batch_size=256,
    lr=0.1,
    momentum=0.9,
    weight_decay=1e-4,
    eta_min=1e-4,
    temperature=0.1,
    sk_epsilon=0.05,
    sk_iters=3,
    normalize_weights=True,
    swap_reduction="sum",
)
# `code` (the default): the discovery head as the authors' Baseline scripts train it (their CaSSLe
# heads came from scripts_cassle_linear, Baseline's code: weight decay 5e-5, one mean over the two
# views, the authors' per-dataset views); the self-supervised step is the same in both presets.
code = dict(weight_decay=5e-5, swap_reduction="mean", features=dict(policy="code"))
# The authors' head training used batch 128 on TinyImageNet (scripts_cassle_linear).
overrides = dict(code={"tinyimagenet": dict(batch_size=128)}, equations={"tinyimagenet": dict(batch_size=128)})

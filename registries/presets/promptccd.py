# PromptCCD (docs/methods.md#promptccd): its code's configuration (`config/<dataset>/*_promptccd_w_gmp.yaml`, GMP,
# known C), read to learn the values; the paper's text was not available here, so `equations` = `code`.
equations = dict(
    unfreeze="blocks.0",        # prompts enter at block 0: the token source hands the embedded tokens
    trainable_blocks=1,         # `grad_from_block: 11`: block 11 of ViT-B/16 trains (and the head)
    epochs=200,                 # per step, the labelled one too
    batch_size=128,             # images (two views each), last partial batch dropped
    lr=0.1,                     # `base_lr` (CUB: 0.05, below)
    momentum=0.9,
    weight_decay=5e-5,
    eta_min_ratio=1e-3,         # cosine to lr·1e-3, stepped after each epoch
    sup_weight=0.35,            # `sup_con_weight: [0.35, 0, 0, 0]`: SupCon in the labelled step only
    info_nce_temperature=1.0,   # `temperature: 1.0`
    supcon_temperature=0.07,
    proj_hidden_dim=2048,       # GCD's DINO head: 768 → 2048 → 2048 → 256, then weight-normed to `mlp_out_dim`
    proj_dim=256,
    head_dim=65536,             # `mlp_out_dim: 65536`
    top_k=5,                    # prompts an image
    prompt_from=30,             # the code fits its pool every 30 epochs from epoch 0 and prompts from epoch 30
    refit_every=30,             # `fit_gmm_every_n_epoch: 30`
    covariance="spherical",     # `covariance_type` (TinyImageNet: full, below)
    half_k=False,               # `set_k_half` (CUB, Stanford Cars, TinyImageNet: the pool's K halved after step 0)
    n_samples=100,              # `num_gmm_samples`: draws kept for the next step's fit
    kmeans_iters=200,           # the centroids of bench's inductive predictions (its SS-k-means' max_iter)
    kmeans_inits=10,
)
code = dict(features=dict(policy="code"))
_halved = dict(half_k=True)
overrides = dict(
    code={"cub200": dict(lr=0.05, half_k=True), "cars": _halved, "tinyimagenet": dict(half_k=True, covariance="full")},
    equations={"cub200": dict(lr=0.05, half_k=True), "cars": _halved,
               "tinyimagenet": dict(half_k=True, covariance="full")},
)

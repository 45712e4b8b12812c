# What EwC, LwF and DER share (docs/methods.md#adapted-il-methods; steps:
# docs/methods.md#epoch-loop): per step a warm-up of
# the new head on the frozen encoder, then the main stage with the last block training. The paper gives
# no epochs or batch for them: the EwC/LwF scripts' 100 + 100 epochs and batch 256 are used by both
# presets (DER has its own scripts' schedule, registries/presets/der.py).
# The regularisers' weights (λ, the KD and replay weights) are in the units the authors tuned them in:
# against the code's one mean of the swapped loss over the two views. Where the clustering loss is
# summed instead (`swap_reduction="sum"`, Eq. 1 as written: twice that mean), the methods scale the
# regulariser with it (methods.blocks.clustering_scale), so a weight and the loss it balances are never
# scaled apart.
equations = dict(
    unfreeze=1,              # the last block (blocks.11 of ViT-B/16), as the paper says of all adapted methods
    warmup_epochs=100,
    epochs=100,
    batch_size=256,
    lr=0.1,
    momentum=0.9,
    weight_decay=1e-4,       # discrepancy 1: the scripts use 5e-5
    eta_min=1e-4,            # the scripts' lr·1e-3
    temperature=0.1,
    sk_epsilon=0.05,
    sk_iters=3,
    normalize_weights=True,
    swap_reduction="sum",    # discrepancy 9: Algorithm 1 sums the two views' cross-entropies
)
code = dict(weight_decay=5e-5, swap_reduction="mean", features=dict(policy="code"))

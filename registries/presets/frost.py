# FRoST (docs/methods.md#frost). The paper "strictly follows the original
# configuration" and replays features "the same way as Baseline++": `equations` takes the shipped scripts'
# hyper-parameters (rank statistics, StepLR 170, 200 epochs, batch 256) and Baseline++'s Eq. 6 replay
# (each class's own σ, as many replayed features per batch as the batch holds); `code` (the default)
# replays as the code does (one shared σ̄, Baseline++'s n_k table); `sinkhorn` is the scripts' other variant
# (scripts_il_frost_sinkhorn/): the swapped Sinkhorn loss instead of the BCE, a cosine schedule, heads
# normalised every batch, the code's replay.
equations = dict(
    unfreeze=1,                  # blocks.11 (the scripts' grad_from_block 11)
    labelling="rankstats",       # or "sinkhorn"
    epochs=200,
    batch_size=256,
    lr=0.1,
    momentum=0.9,
    weight_decay=1e-4,
    schedule="step",             # StepLR; "cosine": the sinkhorn variant's CosineAnnealingLR to eta_min
    step_size=170,
    gamma=0.1,
    eta_min=1e-4,
    topk=5,                      # rank statistics: the top-5 dimensions of the CLS feature
    rampup_length=150,           # sigmoid ramp-up (L, w_max) = (150, 25) on C100/T200, (50, 5) elsewhere
    rampup_coefficient=25.0,
    increment_coefficient=0.05,  # the self-training CE's weight, times w(e)/w_max (original FRoST: 0.01)
    feature_kd_weight=10.0,
    replay_weight=1.0,
    shared_std=False,            # the code samples every class with one shared σ̄
    replay_per_class=0,          # 0: as many as the batch holds; n: n per earlier class (the code's table)
    unbiased_variance=False,     # the prototypes' variance ÷ n as Baseline++'s; the code divides by n − 1
    normalize_weights=False,     # the rank-statistics heads normalise features only
    temperature=0.1,             # the sinkhorn variant's swapped loss
    sk_epsilon=0.05,
    sk_iters=3,
    swap_reduction="mean",       # the sinkhorn variant's loss as the code takes it (one mean over both views)
)
code = dict(shared_std=True, replay_per_class=12, unbiased_variance=True, features=dict(policy="code"))
sinkhorn = dict(labelling="sinkhorn", schedule="cosine", normalize_weights=True)  # a change to `code`
# Per dataset or dataset/split: the scripts' ramp-up, and for the code's replay its n_k table
# (frost_feat_replay.py, the same as Baseline++'s `code` table).
overrides = dict(
    equations={
        "cifar10": dict(rampup_length=50, rampup_coefficient=5.0),
        "cub200": dict(rampup_length=50, rampup_coefficient=5.0),
        "herbarium19": dict(rampup_length=50, rampup_coefficient=5.0),
    },
    code={
        "cifar10": dict(rampup_length=50, rampup_coefficient=5.0, replay_per_class=200),
        "cub200": dict(rampup_length=50, rampup_coefficient=5.0),
        "herbarium19": dict(rampup_length=50, rampup_coefficient=5.0),
        "cifar100/5-step": dict(replay_per_class=20),
        "cifar100/2-step": dict(replay_per_class=8),
        "tinyimagenet/5-step": dict(replay_per_class=30),
        "cub200/5-step": dict(replay_per_class=30),
        "herbarium19/5-step": dict(replay_per_class=30),
    },
)

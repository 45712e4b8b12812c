# Baseline++ (docs/methods.md#baseline-ktrfr; discrepancies 3-8: docs/methods.md#discrepancies).
# The Baseline part takes Baseline's keys.
_base_ = ["./baseline.py"]
equations = dict(
    ktrfr_epochs=200,               # discrepancy 3: the scripts use 100
    ktrfr_normalize_weights=True,   # discrepancy 6: the scripts do not pass --apply_l2weights
    shared_std=False,               # discrepancy 5: the code samples every class with one shared σ̄
    replay_per_class=0,             # 0: as many replayed features per batch as the batch holds (Eq. 6);
                                    # n > 0: n per previous class (discrepancy 4, the code's table)
    init_from="previous_student",   # discrepancy 7: the code re-initialises from the Baseline heads
    ktrfr_batch_size=256,           # current images per KTRFR batch (Baseline's batch_size may differ: C100 5-step)
    ktrfr_reduction="sum",          # discrepancy 8: Eq. 6 sums the replay mean and the current mean;
                                    # the code takes one mean over the concatenated rows ("mean")
    unbiased_variance=False,        # the prototypes' variance ÷ n; the code's torch.var divides by n − 1
                                    # (utils/feat_replay.py), σ = sqrt(var + 1e-5) either way
)
code = dict(
    weight_decay=5e-5,
    ktrfr_epochs=100,
    ktrfr_normalize_weights=False,
    shared_std=True,
    replay_per_class=12,
    init_from="baseline_heads",
    ktrfr_reduction="mean",
    unbiased_variance=True,
)
# The "w/o CosNorm" ablation of Tab. 3 (row c): neither the Baseline heads nor the student
# normalise their weights; features stay normalised inside the heads.
no_cosnorm = dict(normalize_weights=False, ktrfr_normalize_weights=False)
overrides = dict(
    code={
        "cifar10": dict(replay_per_class=200),
        "cifar100/5-step": dict(replay_per_class=20),
        "cifar100/2-step": dict(replay_per_class=8),
        "tinyimagenet/5-step": dict(replay_per_class=30),
        "cub200/5-step": dict(replay_per_class=30),
        "herbarium19/5-step": dict(replay_per_class=30),
    },
)

# Baseline (docs/methods.md#baseline; the loop: docs/methods.md#epoch-loop). `code` (the default) is
# the authors' scripts, which produced the
# paper's tables; `equations` follows the paper's text. Every preset file writes `equations` in full
# (it names every key), `code` as its changes to `equations`, and any other variant as its changes to
# `code` (bench.config.spec.DEFAULT_PRESET).
equations = dict(
    epochs=200,
    epochs_per_step=None,  # a list overrides `epochs` per step (the code preset uses it)
    batch_size=256,
    lr=0.1,
    momentum=0.9,
    weight_decay=1e-4,  # discrepancy 1: the code uses 5e-5
    eta_min=1e-4,
    temperature=0.1,
    sk_epsilon=0.05,
    sk_iters=3,
    normalize_weights=True,  # CosNorm; False is the Tab. 3 "w/o CosNorm" ablation
    swap_reduction="sum",  # discrepancy 9: Algorithm 1 sums the two views' cross-entropies; the code averages
)
# A preset may also set `features` keys: the code trains on the authors' per-dataset views (docs/methods.md#views).
code = dict(weight_decay=5e-5, swap_reduction="mean", features=dict(policy="code"))
# Per dataset or dataset/split, merged over the preset; a variant without its own takes `code`'s (discrepancy 2: the shipped scripts train
# later steps for 100 epochs on some splits and use batch 512 on CIFAR-100 5-step).
overrides = dict(
    code={
        "cifar10/2-step": dict(epochs_per_step=[200, 100]),
        "cifar100/2-step": dict(epochs_per_step=[200, 100]),
        "tinyimagenet/2-step": dict(epochs_per_step=[200, 100]),
        "tinyimagenet/5-step": dict(epochs=100),
        "cifar100/5-step": dict(batch_size=512),
    },
)
# The "w/o CosNorm" ablation of Tab. 3 (row d): weights not normalised; features still are.
no_cosnorm = dict(normalize_weights=False)
# What `bench tune` searches (docs/settings.md#tuning): the heads' learning rate and the swapped-prediction
# temperature, around the scripts' values (a name with a leading underscore: not a preset). Joint (frozen) and
# Baseline++ inherit it with the heads' keys.
_search_space = {"method.lr": dict(low=0.01, high=0.5, log=True), "method.temperature": dict(low=0.05, high=0.2)}

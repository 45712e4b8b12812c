# ResTune (docs/methods.md#restune). What unfreezes: the main text says ResTune
# "unfreezes the last two blocks" and the code trains base blocks 10 and 11 (g = 10); the appendix says
# "the first eleven blocks shared, only the 11th unfrozen". Both presets train the last two (`unfreeze=2`);
# `unfreeze=1` is the appendix's other reading (only blocks.11 trains, the branches read frozen tokens).
# The paper gives no epochs or batch for ResTune: both presets use the scripts' (100 + 100, batch 64 or
# 128 per dataset and split, Herbarium 80 + 80). `code` (the default) takes one mean over the mixed and
# residual heads' rows of both views; `equations` sums the two views and the two heads (up to 4× that
# mean), and its KD terms scale with it (methods.blocks.clustering_scale).
_base_ = ["./finetuned.py"]  # the warm-up and main stages' keys, as EwC, LwF and DER
equations = dict(
    unfreeze=2,
    batch_size=64,
    kd_weight=1.0,           # β for the KD terms of steps s ≥ 1 (the s = 0 term has weight 1)
    kd_temperature=2.0,
)
# `code` is finetuned's: weight decay 5e-5, one mean over the mixed and residual rows, the authors' views
_scripts = {
    "cifar10/5-step": dict(batch_size=128),
    "cifar100/5-step": dict(batch_size=128),
    "tinyimagenet": dict(batch_size=128),
    "herbarium19": dict(warmup_epochs=80, epochs=80),
}
overrides = dict(equations=_scripts, code=_scripts)

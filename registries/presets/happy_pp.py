# Happy++ (docs/methods.md#happy-tpami26): Happy's keys (./happy.py: its README's online command) and the switches
# Happy-CGCD's `train_happy_plus_plus.py` adds. The README read here (the repository's newest stored one) gives no
# Happy++ command, so each switch is the script's argparse default: every one off, and Happy++ runs as Happy until
# a switch is set (`--methods happy-pp --cfg-options method.protogcd=True ...`). The paper's text could not be read here:
# `equations` = `code`.
_base_ = ["./happy.py"]
equations = dict(
    lora_rank=0,              # `--lora_rank` default 0: no LoRA (r > 0: a rank-r term per unlabelled step, methods/lora.py)
    lora_applied=True,        # LoRA as arXiv 2106.09685 defines it: each term adds B·A·x to the layer's output
    old_head_l2_weight=0.0,   # `--old_head_l2_weight` default 0.0: no L2 on the old rows
    stch_mu=0.0,              # `--stch_mu` default 0.0: the plain sum of the terms, no smooth Tchebycheff
    protogcd=False,           # `--use_protoGCD` default False: SimGCD's self-distillation
    protogcd_ramp_epochs=10,  # `--warmup_teacher_temp_epochs 10` (README online command), ProtoGCD's ramp of ρ
    ema_new=1.0,              # `--ema_new` default 1.0 and
    ema_old=0.0,              # `--ema_old` default 0.0: the average is the weights themselves, no EMA
    swa=False,                # `--use_swa` default False: the cosine schedule throughout
    swa_start=17,             # the script's `epoch > 16`: SWALR replaces the cosine from the end of epoch 17
    swa_anneal_epochs=2,      # the script's `SWALR(anneal_epochs=2, ...)`
    swa_lr_ratio=0.5,         # the script's `swa_lr=0.5 * args.lr`
)
# The script's LoRA layer (models/lora.py) keeps its terms in an nn.ParameterDict through add_module, which its
# len() and items() do not see: its forward never adds them, and asking for LoRA only freezes the layers' weights
code = dict(lora_applied=False)

# Continual SimGCD (docs/methods.md#simgcd-continual): SimGCD fine-tuned step after step in the mixed setting. Its steps
# are Happy-CGCD's README commands (`train_happy.py`, CIFAR-100) with Happy's parts off and SimGCD's global
# mean-entropy term on: Happy's offline stage, which serves Happy's tables; the `equations` preset is the same.
# SimGCD's own runs differ (its scripts/run_<dataset>.sh, CVMI-Lab/SimGCD at 1e0fb9d, 2023-03-16: 200 epochs, ε 4 on
# CIFAR-100, 2 on CUB, 1 elsewhere; its first commit 1765452 had ε 2 on CIFAR-100): the `simgcd_offline` preset.
equations = dict(
    unfreeze=1,                    # `grad_from_block 11`: the last block of ViT-B/16 trains
    labelled_epochs=100,           # `--epochs_offline 100`
    labelled_lr=0.1,               # the offline command's `--lr 0.1`
    labelled_teacher_warmup=0.07,  # τ_t from 0.07 to 0.04 over the first 30 epochs (argparse defaults)
    labelled_teacher=0.04,
    labelled_teacher_epochs=30,
    epochs=30,                     # `--epochs_online_per_session 30` (CIFAR-100; CUB: 20, below)
    lr=0.01,                       # the online command's `--lr 0.01`
    teacher=0.05,                  # `--warmup_teacher_temp 0.05 --teacher_temp 0.05`: constant online
    batch_size=128,                # images a batch (two views of each)
    momentum=0.9,
    weight_decay=5e-5,             # none on biases and 1-D weights (SimGCD's `get_params_groups`)
    eta_min_ratio=1e-3,            # cosine to lr·1e-3
    sup_weight=0.35,               # λ of the labelled step
    memax_weight=1.0,              # ε (CUB: 2, below)
    labelled_memax_weight=None,    # the labelled step's ε where it differs from ε (None: ε; `simgcd_offline` sets it)
    student_temperature=0.1,
    info_nce_temperature=1.0,      # `info_nce_logits`' default: `args.temperature` is never passed
    supcon_temperature=0.07,       # SupConLoss' default
    proj_hidden_dim=2048,
    proj_dim=256,
)
code = dict(features=dict(policy="code"))
# the labelled step as SimGCD's own scripts run it (the steps after it as `code`): 200 epochs, its per-dataset ε
simgcd_offline = dict(labelled_epochs=200, labelled_memax_weight=1.0)
overrides = dict(code={"cub200": dict(memax_weight=2.0, epochs=20)}, equations={"cub200": dict(memax_weight=2.0, epochs=20)},
                 simgcd_offline={"cifar100": dict(labelled_memax_weight=4.0), "cub200": dict(labelled_memax_weight=2.0)})

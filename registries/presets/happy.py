# Happy (docs/methods.md#happy): continual SimGCD's keys (./simgcd.py) and Happy's parts, each value from
# Happy-CGCD's README online command (`train_happy.py`'s argparse where the command gives none).
_base_ = ["./simgcd.py"]
equations = dict(
    init_new_head=True,        # `--init_new_head`: clustering-guided initialisation of the new rows
    w_old_new=1.0,             # `--memax_old_new_weight 1` (argparse default 2)
    w_old_in=1.0,              # `--memax_old_in_weight 1`
    w_new_in=1.0,              # `--memax_new_in_weight 1`
    proto_weight=1.0,          # `--proto_aug_weight 1`
    proto_samples=256,         # the prototype manager's batch: n_views · batch_size
    hardness_temperature=0.1,  # `--hardness_temp 0.1`
    radius_scale=1.0,          # `--radius_scale 1.0`
    kd_weight=1.0,             # `--feat_distill_weight 1`
)

# PromptCCD's published cells (Cendra et al., ECCV'24, Table 1: results/paper/peer_promptccd_table1.csv), every one
# bench can measure: each method of that table that bench registers for the mixed setting, on its six datasets with
# its protocol (70% of the classes labelled, 3 steps), its two backbones, K known, scored as its code scores
# (transductive: semi-supervised k-means over each step's own training images) and each step kept by its rule (the
# first best old-class accuracy on the test images every 10th epoch: a leak, marked on every result).
# `bench report --grid promptccd-tables --compare promptccd` sets them beside the published ones.
# tests/test_peer_grids.py holds this grid to the published table. Real data and weights are yours.
methods = ["PromptCCD", "MetaGCD"]
datasets = ["cifar100", "imagenet100", "tinyimagenet", "aircraft", "cars", "cub200"]
splits = ["promptccd-3-stage"]
seeds = [0, 1, 2]
backbones = ["dino-vitb16", "dinov2-vitb14"]
cfg = dict(setting=dict(evaluation="transductive", selection="promptccd"))

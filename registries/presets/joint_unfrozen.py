# Joint (unfrozen) (docs/methods.md#joint-unfrozen). The Baseline heads (the warm start) take Baseline's keys.
# Step epochs and batches are the scripts' (CIFAR: step 2 with batch 128); the paper gives none.
# `unfreeze`: how many last blocks train (1: blocks.11 of ViT-B/16, the authors' g=11), or the name
# of the first trainable block ("blocks.11").
_base_ = ["./baseline.py"]
equations = dict(unfreeze=1, stage1_epochs=200, stage1_batch_size=256, stage2_epochs=100, stage2_batch_size=128)

# Joint (frozen) (docs/methods.md#joint-frozen). The Baseline heads take Baseline's keys; the joint step's
# epochs and per-task batch are the scripts' (the paper gives none of its own).
_base_ = ["./baseline.py"]
equations = dict(joint_epochs=100, joint_batch_size=256)

# Happy's published cells (Ma et al., NeurIPS'24, Tables 1, 3 and 4: results/paper/peer_happy_table{1,3,4}.csv), every
# one bench can measure: each method of those tables that bench registers for the mixed setting, on each dataset
# with Happy's protocol for it, Happy's draw (its very images) and its class arrival, K known, scored inductively,
# each step kept by Happy's rule (its code keeps the first best epoch on the test images: a leak, marked on every
# result; MetaGCD, which refuses that rule, its last epoch). `bench report --grid happy-tables --compare happy` sets
# them beside the published ones; `--cfg-options setting.selection=last` gives the same cells without the leak (its blocks renamed so).
# tests/test_peer_grids.py holds this grid to the published tables: a method bench adds that Happy's tables list
# must be added here. Real data and DINO weights are yours (docs/reproducing-the-paper.md#datasets).
methods = ["Happy", "SimGCD (continual)", "K-means", "MetaGCD"]
datasets = ["cifar100", "tinyimagenet", "imagenet100", "cub200"]
splits = ["happy-5-stage", "happy-in100-5-stage", "happy-cub-5-stage", "happy-10-stage"]
seeds = [0, 1, 2]
backbone = "dino-vitb16"
cfg = dict(setting=dict(draw="happy", selection="happy"))
_happys = ["Happy", "SimGCD (continual)", "K-means"]
# MetaGCD keeps no test-set selection (its code clusters once after a session's training: the last epoch)
_last = dict(methods=["MetaGCD"], cfg=dict(setting=dict(selection="last")))
blocks = [
    dict(name="Happy's CIFAR-100 and TinyImageNet", methods=_happys, datasets=["cifar100", "tinyimagenet"],
         splits=["happy-5-stage"], cfg=dict(setting=dict(arrival="happy"))),
    dict(name="Happy's ImageNet-100", methods=_happys, datasets=["imagenet100"], splits=["happy-in100-5-stage"]),
    dict(name="Happy's CUB", methods=_happys, datasets=["cub200"], splits=["happy-cub-5-stage"]),
    dict(name="MetaGCD on Happy's CIFAR-100 and TinyImageNet", datasets=["cifar100", "tinyimagenet"],
         splits=["happy-5-stage"], **{**_last, "cfg": dict(setting=dict(arrival="happy", selection="last"))}),
    dict(name="MetaGCD on Happy's ImageNet-100", datasets=["imagenet100"], splits=["happy-in100-5-stage"], **_last),
    dict(name="MetaGCD on Happy's CUB", datasets=["cub200"], splits=["happy-cub-5-stage"], **_last),
    # its Table 4: 10 sessions on CIFAR-100 and TinyImageNet (Happy and MetaGCD; its VanillaGCD is not bench's)
    dict(name="Happy's 10 sessions", methods=["Happy"], datasets=["cifar100", "tinyimagenet"],
         splits=["happy-10-stage"], cfg=dict(setting=dict(arrival="happy"))),
    dict(name="MetaGCD on Happy's 10 sessions", datasets=["cifar100", "tinyimagenet"], splits=["happy-10-stage"],
         **{**_last, "cfg": dict(setting=dict(arrival="happy", selection="last"))}),
]

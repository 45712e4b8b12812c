# VB-CGCD's published cells (Dai and Chauhan, ICML'25, Table 2: results/paper/peer_vb-cgcd_table2.csv), every one
# bench can measure: each method of that table that bench registers for the mixed setting, on the protocols bench
# has of it. CIFAR-100 and TinyImageNet are `happy-5-stage` with the classes in the class order, as VB-CGCD's code
# takes them (its own images: bench draws its own, seeded), K known, scored inductively; the paper does not say how
# it ran Happy and PromptCCD, so they run with bench's default selection (the last epoch). Its ImageNet-100 and CUB
# are not bench's (another class list; other labelled classes): no cell there, but the Happy ImageNet-100 row, which
# is Happy's Table 1 row copied, hence Happy's run (its draw, its arrival, its selection: a leak, marked), as the
# `happy-tables` grid runs it. `bench report --grid vb-cgcd-tables --compare vb-cgcd` sets them beside the published
# ones. tests/test_peer_grids.py holds this grid to the published table. Real data and DINO weights are yours.
methods = ["VB-CGCD", "Happy", "PromptCCD", "MetaGCD"]
datasets = ["cifar100", "tinyimagenet", "imagenet100", "cub200"]
splits = ["happy-5-stage", "happy-in100-5-stage", "happy-cub-5-stage"]
seeds = [0, 1, 2]
backbone = "dino-vitb16"
blocks = [
    dict(name="VB-CGCD's CIFAR-100 and TinyImageNet", methods=["VB-CGCD", "Happy", "PromptCCD"],
         datasets=["cifar100", "tinyimagenet"], splits=["happy-5-stage"]),
    dict(name="Happy's ImageNet-100, copied by VB-CGCD", methods=["Happy"], datasets=["imagenet100"],
         splits=["happy-in100-5-stage"], cfg=dict(setting=dict(draw="happy", selection="happy"))),
    # its MetaGCD rows are Happy's Table 1 rows, copied: MetaGCD as `happy-tables` runs it (the same runs)
    dict(name="MetaGCD as Happy ran it, copied by VB-CGCD", methods=["MetaGCD"], datasets=["cifar100", "tinyimagenet"],
         splits=["happy-5-stage"], cfg=dict(setting=dict(draw="happy", arrival="happy", selection="last"))),
    dict(name="MetaGCD on Happy's ImageNet-100, copied by VB-CGCD", methods=["MetaGCD"], datasets=["imagenet100"],
         splits=["happy-in100-5-stage"], cfg=dict(setting=dict(draw="happy", selection="last"))),
    dict(name="MetaGCD on Happy's CUB, copied by VB-CGCD", methods=["MetaGCD"], datasets=["cub200"],
         splits=["happy-cub-5-stage"], cfg=dict(setting=dict(draw="happy", selection="last"))),
]

# The mixed setting (continual generalized category discovery, docs/settings.md) beside the paper's:
# the paper's frozen-feature methods and the field's frozen-feature baselines on CIFAR-100 and CUB-200 under
# Happy's protocol (a labelled step of half the classes, then 5 unlabelled steps mixing old and new
# classes) and PromptCCD's (70% labelled, 3 steps), K known and estimated (k-means silhouette); and Happy's own
# CUB run (`happy-cub-5-stage`: its SSB known classes labelled, its counts and class order), where the methods that
# train the last block (continual SimGCD, Happy) run too, under Happy's selection (its code keeps each step's best
# epoch on the test images: marked as such), and PromptCCD's protocol (its transductive evaluation and its
# selection) with PromptCCD beside the frozen references and continual SimGCD. Real data and DINO weights are yours.
methods = ["K-means", "Baseline", "Baseline++", "Joint (frozen)", "NCM + k-means", "Gaussian per class", "VB-CGCD"]
datasets = ["cifar100", "cub200"]
splits = ["happy-5-stage", "promptccd-3-stage"]
seeds = [0, 1, 2]
backbone = "dino-vitb16"
blocks = [
    dict(name="K known"),
    dict(name="K estimated", cfg=dict(setting=dict(k="silhouette"))),
    dict(name="Happy's CUB", datasets=["cub200"], splits=["happy-cub-5-stage"]),
    dict(name="Happy's CUB, trained last block", methods=["SimGCD (continual)", "Happy", "Happy++"], datasets=["cub200"],
         splits=["happy-cub-5-stage"], cfg=dict(setting=dict(selection="happy"))),
    dict(name="PromptCCD's protocol", methods=["K-means", "NCM + k-means", "SimGCD (continual)", "PromptCCD", "MetaGCD"],
         splits=["promptccd-3-stage"], cfg=dict(setting=dict(evaluation="transductive", selection="promptccd"))),
]

# Every cell of the paper's Tab. 2, 3, 4 and 5 and of its appendix's CaSSLe table, one seed, on the paper's
# backbone (DINO ViT-B/16; Tab. 4 adds DINO ResNet-50 and CLIP ViT-B/16). Needs the real datasets
# (--data-root) and the backbones' weights. `full` is this grid over three seeds. A block's `layout` is that of
# its table in `bench report` (bench.config.grids.LAYOUTS; default: Tab. 5's).
seeds = [0]
backbone = "dino-vitb16"
_small = ["cifar10", "cifar100", "tinyimagenet"]
_all = ["cifar10", "cifar100", "tinyimagenet", "cub200", "herbarium19"]
_splits = ["2-step", "5-step"]
blocks = [
    # Tab. 5: the comparison on all five datasets, in the paper's row order
    dict(name="tab5", methods=["EwC", "LwF", "DER", "ResTune", "FRoST", "CaSSLe", "Baseline", "Baseline++"],
         datasets=_all, splits=_splits),
    # Tab. 2: the references against the two baselines
    dict(name="tab2", layout="references",
         methods=["K-means", "Joint (frozen)", "Joint (unfrozen)", "Baseline", "Baseline++"], datasets=_small,
         splits=_splits),
    # Tab. 3: CosNorm × KTRFR, rows (a) Baseline++, (b) Baseline, (c) and (d) without CosNorm
    dict(name="tab3", layout="ablation",
         methods=["Baseline++", "Baseline", "Baseline++:no_cosnorm", "Baseline:no_cosnorm"], datasets=_small,
         splits=_splits),
    # Tab. 4: Baseline, 5-step, three backbones
    dict(name="tab4", layout="backbones", methods=["Baseline"], datasets=_small, splits=["5-step"],
         backbones=["dino-resnet50", "dino-vitb16", "clip-vitb16"]),
    # the appendix's table: CaSSLe against the two baselines (its cells are Tab. 5's too: they run once)
    dict(name="cassle", layout="baselines_last", methods=["CaSSLe", "Baseline", "Baseline++"], datasets=_all,
         splits=_splits),
]

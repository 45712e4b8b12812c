# Does the paper's conclusion hold with a stronger backbone? Tab. 4 extended: the cheap feature-bank methods
# (Baseline, Baseline++, Joint (frozen)) on every registered backbone, the paper's three and the field's
# (DINOv2 S/B/L with and without registers, DINOv3 ViT-B/16, CLIP ViT-L/14, supervised IN-21k ViT-B/16),
# and Joint (unfrozen) on every registered ViT (ResNet-50 has no blocks to unfreeze), on the five datasets,
# both splits, one seed. Each backbone reads its authors' file from --weights-dir (bench list backbones).
# The paper's Tab. 4 cells (Baseline, 5-step, small datasets, paper backbones) are runs of this grid too.
seeds = [0]
backbone = "dino-vitb16"
_all = ["cifar10", "cifar100", "tinyimagenet", "cub200", "herbarium19"]
_splits = ["2-step", "5-step"]
_vits = ["dino-vitb16", "clip-vitb16", "dinov2-vits14", "dinov2-vitb14", "dinov2-vitl14", "dinov2-vits14-reg4",
         "dinov2-vitb14-reg4", "dinov2-vitl14-reg4", "dinov3-vitb16", "clip-vitl14", "sup21k-vitb16"]
blocks = [
    dict(name="frozen", layout="backbones", methods=["Baseline", "Baseline++", "Joint (frozen)"], datasets=_all,
         splits=_splits, backbones=["dino-resnet50", *_vits]),
    dict(name="unfrozen", layout="backbones", methods=["Joint (unfrozen)"], datasets=_all, splits=_splits,
         backbones=_vits),
]

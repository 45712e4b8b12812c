# The domain-shifted stream's CI grid (docs/settings.md#domain-shifted-streams): cgcd-smoke's recipe (tiny generated
# images, a tiny random ViT, a few epochs) with every method of the mixed setting, its images at 32 pixels (the
# ImageNet-C functions' least), on Happy's protocol, once on the clean images and once on bench's ImageNet-C stream:
# it checks that each runs the stream end to end and reports it beside the clean run, not what they score.
_base_ = ["./cgcd-smoke.py"]
methods = ["K-means", "Baseline", "Baseline++", "Joint (frozen)", "NCM + k-means", "Gaussian per class", "VB-CGCD",
           "SimGCD (continual)", "Happy", "Happy++", "PromptCCD", "MetaGCD"]
splits = ["happy-5-stage"]
dataset_options = dict(synthetic=dict(image_size=32))
blocks = [
    dict(name="clean"),
    dict(name="ImageNet-C stream", cfg=dict(setting=dict(domains="imagenet-c-6"))),
]

"""Backbone weights from a local file, in the format the weights' authors publish (docs/methods.md#backbones).

- DINO's backbone files (`dino_vitbase16_pretrain.pth`, `dino_resnet50_pretrain.pth`): plain state
  dicts. The ViT's key names are timm's; the ResNet-50's are torchvision's, which timm's `resnet50`
  shares. DINO's full training checkpoints (`*_full_checkpoint.pth`) hold `teacher` and `student`
  with `module.`/`backbone.` prefixes and the projection head; their teacher's backbone is used, as
  DINO's own evaluation does.
- OpenAI CLIP (`ViT-B-16.pt`, what `clip.load` downloads): a TorchScript archive of the whole model
  in fp16. Its image tower (`visual.*`) is converted to timm's ViT by timm's own converter; the text
  tower is ignored.
- timm's own `.pth` and `.safetensors` files.

Every parameter of the model must come from the file: a file for another architecture is refused
with the keys that do not match, never loaded by halves (timm's non-strict loading would keep the
random initialisation of whatever did not match, silently).
"""
from __future__ import annotations

import argparse
import sys
import warnings
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from bench.errors import BenchError, first_line

# The paper's three backbones (Tab. 4; docs/methods.md#backbones) by short name. Each is a timm model; a local
# weights file in the authors' published format (PUBLISHED_FILES) goes in backbone.pretrained or in
# the --weights-dir directory, and `bench.features.weights` reads it.
PAPER_BACKBONES: dict[str, tuple[str, dict[str, Any]]] = {
    # 768-d CLS token after the final LayerNorm
    "dino-vitb16": ("vit_base_patch16_224.dino", {}),
    # 2048-d global average pool; the authors' code feeds it 64×64 images
    # (discrepancy 20, docs/methods.md#discrepancy-20)
    "dino-resnet50": ("resnet50", {}),
    # 512-d projected image embedding (keep the projection: num_classes=512), QuickGELU as OpenAI's
    "clip-vitb16": ("vit_base_patch16_clip_quickgelu_224.openai", {"num_classes": 512}),
}


# The backbones the field moved to after the paper (docs/methods.md#backbones), in the same form: the CLS
# feature, the last blocks trainable by count or name, at 224 px (a patch-14 model sees 16 x 16 patches, as
# GCD and PromptCCD feed DINOv2), each with its authors' normalisation (FEATURE_NORMALISATION).
FIELD_BACKBONES: dict[str, tuple[str, dict[str, Any]]] = {
    # DINOv2 (Oquab et al. 2023): 384/768/1024-d CLS token after the final LayerNorm; the published files'
    # 37 x 37 position embedding (518 px) is resampled to the 16 x 16 grid once, as the file is read
    "dinov2-vits14": ("vit_small_patch14_dinov2.lvd142m", {"img_size": 224}),
    "dinov2-vitb14": ("vit_base_patch14_dinov2.lvd142m", {"img_size": 224}),
    "dinov2-vitl14": ("vit_large_patch14_dinov2.lvd142m", {"img_size": 224}),
    # DINOv2 with 4 registers (Darcet et al. 2024): 4 more prefix tokens, the CLS token is the feature
    "dinov2-vits14-reg4": ("vit_small_patch14_reg4_dinov2.lvd142m", {"img_size": 224}),
    "dinov2-vitb14-reg4": ("vit_base_patch14_reg4_dinov2.lvd142m", {"img_size": 224}),
    "dinov2-vitl14-reg4": ("vit_large_patch14_reg4_dinov2.lvd142m", {"img_size": 224}),
    # DINOv3 (Simeoni et al. 2025): an Eva with rotary position embedding and 4 storage tokens; the CLS token
    # (timm pools by average unless told), the qkv-bias variant so that every tensor of the file is used
    "dinov3-vitb16": ("vit_base_patch16_dinov3_qkvb.lvd1689m", {"img_size": 224, "global_pool": "token"}),
    # OpenAI CLIP ViT-L/14: the 768-d projected image embedding, QuickGELU as OpenAI's
    "clip-vitl14": ("vit_large_patch14_clip_quickgelu_224.openai", {"num_classes": 768}),
    # supervised ImageNet-21k ViT-B/16 (AugReg, Steiner et al. 2022): 768-d CLS token, the 21k classifier dropped
    "sup21k-vitb16": ("vit_base_patch16_224.augreg_in21k", {}),
}

# Every backbone registered by short name: the paper's, then the field's.
REGISTERED_BACKBONES: dict[str, tuple[str, dict[str, Any]]] = {**PAPER_BACKBONES, **FIELD_BACKBONES}

# The file each registered backbone's authors publish, by the name it is published under (a path under the
# weights directory: the Hugging Face file keeps its repository's name as its folder).
PUBLISHED_FILES: dict[str, str] = {
    "dino-vitb16": "dino_vitbase16_pretrain.pth",
    "dino-resnet50": "dino_resnet50_pretrain.pth",
    "clip-vitb16": "ViT-B-16.pt",  # what OpenAI's clip.load("ViT-B/16") downloads
    "dinov2-vits14": "dinov2_vits14_pretrain.pth",
    "dinov2-vitb14": "dinov2_vitb14_pretrain.pth",
    "dinov2-vitl14": "dinov2_vitl14_pretrain.pth",
    "dinov2-vits14-reg4": "dinov2_vits14_reg4_pretrain.pth",
    "dinov2-vitb14-reg4": "dinov2_vitb14_reg4_pretrain.pth",
    "dinov2-vitl14-reg4": "dinov2_vitl14_reg4_pretrain.pth",
    "dinov3-vitb16": "dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth",
    "clip-vitl14": "ViT-L-14.pt",  # what OpenAI's clip.load("ViT-L/14") downloads
    "sup21k-vitb16": "timm/vit_base_patch16_224.augreg_in21k/model.safetensors",
}

# Where each file is published (docs/reproducing-the-paper.md#the-fields-backbones lists them).
RELEASES: dict[str, str] = {
    "dino-vitb16": "https://github.com/facebookresearch/dino#pretrained-models",
    "dino-resnet50": "https://github.com/facebookresearch/dino#pretrained-models",
    "clip-vitb16": "https://github.com/openai/CLIP (clip/clip.py: _MODELS)",
    **{name: "https://github.com/facebookresearch/dinov2#pretrained-models" for name in FIELD_BACKBONES
       if name.startswith("dinov2-")},
    "dinov3-vitb16": "https://github.com/facebookresearch/dinov3#pretrained-models (after accepting the licence)",
    "clip-vitl14": "https://github.com/openai/CLIP (clip/clip.py: _MODELS)",
    "sup21k-vitb16": "https://huggingface.co/timm/vit_base_patch16_224.augreg_in21k (model.safetensors)",
}

# Row names in the report's backbone table (Tab. 4's names for the paper's three).
SHOWN_NAMES: dict[str, str] = {
    "dino-resnet50": "ResNet50-DINO", "dino-vitb16": "ViT-B/16-DINO", "clip-vitb16": "ViT-B/16-CLIP",
    "dinov2-vits14": "ViT-S/14-DINOv2", "dinov2-vitb14": "ViT-B/14-DINOv2", "dinov2-vitl14": "ViT-L/14-DINOv2",
    "dinov2-vits14-reg4": "ViT-S/14-DINOv2-reg4", "dinov2-vitb14-reg4": "ViT-B/14-DINOv2-reg4",
    "dinov2-vitl14-reg4": "ViT-L/14-DINOv2-reg4", "dinov3-vitb16": "ViT-B/16-DINOv3",
    "clip-vitl14": "ViT-L/14-CLIP", "sup21k-vitb16": "ViT-B/16-IN21k",
}

MeanStd = tuple[tuple[float, ...], tuple[float, ...]]  # per-channel mean and std
IMAGENET_MEAN_STD: MeanStd = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
OPENAI_CLIP_MEAN_STD: MeanStd = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
INCEPTION_MEAN_STD: MeanStd = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
NORMALISATION_NAMES: dict[MeanStd, str] = {IMAGENET_MEAN_STD: "ImageNet's", OPENAI_CLIP_MEAN_STD: "OpenAI CLIP's",
                       INCEPTION_MEAN_STD: "0.5/0.5 (AugReg's)"}
# The mean and std each field backbone's authors normalise with. The paper's three keep the dataset's
# (the authors' code normalises with CIFAR's statistics for DINO and CLIP alike: discrepancy 12).
FEATURE_NORMALISATION: dict[str, MeanStd] = {
    **{name: IMAGENET_MEAN_STD for name in FIELD_BACKBONES if name.startswith("dino")},
    "clip-vitl14": OPENAI_CLIP_MEAN_STD,
    "sup21k-vitb16": INCEPTION_MEAN_STD,
}

# Paper backbones whose timm hub weights are not the paper's: timm's `resnet50` weights are a supervised
# ImageNet training, not DINO's, so `pretrained=True` would silently run Tab. 4 on another backbone.
NOT_ON_THE_HUB = {"dino-resnet50"}


def resolve_pretrained(name: str, pretrained: bool | str, weights_dir: str | None) -> bool | str:
    """With a weights directory (`bench run --weights-dir`), a registered backbone asked for its
    pretrained weights (`pretrained=True`) reads the file its authors publish, under its published
    name, from there: one directory serves a grid of several backbones (Tab. 4). An explicit path
    in `pretrained`, `False`, and `timm:<model>` backbones are left as they are. A backbone whose
    weights only its authors publish (`NOT_ON_THE_HUB`) needs that file."""
    if pretrained is True and not weights_dir and name in NOT_ON_THE_HUB:
        raise BenchError(f"backbone {name!r}: timm's hub has no weights of it (its `{PAPER_BACKBONES[name][0]}` "
                         f"weights are another training); give --weights-dir DIR holding {PUBLISHED_FILES[name]} "
                         f"(the authors' file), backbone.pretrained=FILE, or backbone.pretrained=False for random weights")
    if pretrained is not True or not weights_dir or name not in PUBLISHED_FILES:
        return pretrained
    path = Path(weights_dir).expanduser() / PUBLISHED_FILES[name]
    if Path(weights_dir).expanduser().is_file():
        raise BenchError(f"the weights directory {weights_dir} is a file; give the folder that holds the backbones' "
                         f"files as --weights-dir (or $BENCH_WEIGHTS_DIR): `bench weights fetch` fills one")
    if path.is_dir():
        raise BenchError(f"backbone {name!r}: {path} is a folder, where its weights file ({RELEASES[name]}) should be; "
                         f"move it away and put the file there (`bench weights fetch {name}`)")
    if not path.is_file():
        expected = ", ".join(f"{file} ({alias})" for alias, file in PUBLISHED_FILES.items())
        raise BenchError(f"backbone {name!r}: no {PUBLISHED_FILES[name]} in the weights directory {weights_dir} "
                         f"(published at {RELEASES[name]}); it holds the registered backbones' files under their "
                         f"published names: {expected}")
    return str(path.resolve())



if TYPE_CHECKING:
    import torch
    from torch import nn

# Containers that training scripts wrap a state dict in; DINO's evaluation takes the teacher.
CONTAINERS = ("teacher", "state_dict", "model", "module")
FORMATS = ("DINO backbone .pth or full checkpoint, OpenAI CLIP TorchScript .pt, timm .pth/.safetensors")


def _is_torchscript(path: Path) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(name.split("/", 1)[-1].startswith("code/") for name in archive.namelist())


def read_checkpoint(path: Path) -> Any:
    """The object stored in `path`, on the CPU, without running code from it where avoidable."""
    import torch  # here, not at the top: commands that only check the files import no torch

    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path), device="cpu")
        if _is_torchscript(path):
            with warnings.catch_warnings():  # TorchScript is deprecated, but it is what OpenAI publishes
                warnings.simplefilter("ignore", FutureWarning)
                return torch.jit.load(str(path), map_location="cpu").state_dict()
        # DINO's full checkpoints carry their argparse arguments next to the tensors
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a file it cannot read
        raise BenchError(f"cannot read backbone weights {path}: {first_line(err)} Expected one of: {FORMATS}") from None


def backbone_state(checkpoint: Any) -> dict[str, torch.Tensor]:
    """The backbone's tensors out of a checkpoint: unwrapped from its container, the `module.`
    (DistributedDataParallel) and `backbone.` (DINO's wrapper) prefixes removed, and with the
    `backbone.` prefix present, only the backbone's entries (not DINO's projection head)."""
    state = checkpoint
    while isinstance(state, Mapping):
        key = next((k for k in CONTAINERS if isinstance(state.get(k), Mapping)), None)
        if key is None:
            break
        state = state[key]
    if not isinstance(state, Mapping):
        raise BenchError(f"the checkpoint holds a {type(state).__name__}, not a state dict")
    import torch

    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if tensors and all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    if any(k.startswith("backbone.") for k in tensors):
        tensors = {k[len("backbone."):]: v for k, v in tensors.items() if k.startswith("backbone.")}
    return tensors


def _timm_filter(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """timm's own conversion for the model's family (OpenAI CLIP → ViT, position-embedding resize)."""
    convert = getattr(sys.modules.get(type(model).__module__), "checkpoint_filter_fn", None)
    return convert(state, model) if convert is not None else state


def check_weights_file(path: str | Path) -> Path:
    """The file, or a `BenchError` saying it is missing and what `backbone.pretrained` takes."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BenchError(f"backbone weights file not found: {path}; set backbone.pretrained to an existing file "
                         f"({FORMATS}), True (timm's hub weights) or False (random init)")
    return path


def _check_patch_size(state: Mapping[str, torch.Tensor], model: nn.Module, path: Path, name: str) -> None:
    """A file whose patch embedding has another patch size is another architecture: timm's conversion would
    resample its kernel to the model's and load it, so it is refused here, before the conversion."""
    proj = getattr(getattr(model, "patch_embed", None), "proj", None)
    kernel = next((tuple(state[k].shape[-2:]) for k in ("patch_embed.proj.weight", "visual.conv1.weight")
                   if k in state and state[k].dim() == 4), None)
    if kernel is not None and proj is not None and kernel != tuple(proj.weight.shape[-2:]):
        own = tuple(proj.weight.shape[-2:])
        raise BenchError(f"backbone weights {path} do not fit backbone {name!r}: its patch embedding is "
                         f"{kernel[0]}x{kernel[1]} where the model's is {own[0]}x{own[1]} (a file of another "
                         f"architecture). Expected one of: {FORMATS}, for this architecture")


def load_backbone_weights(model: nn.Module, path: str | Path, name: str) -> None:
    """Load `path` into the timm `model` (registered as backbone `name`), or raise a `BenchError`
    that says which keys did not match. The classifier of a model built without one
    (`num_classes=0`) is the only part of a file that may go unused."""
    path = check_weights_file(path)
    state = backbone_state(read_checkpoint(path))
    _check_patch_size(state, model, path, name)
    state = _timm_filter(state, model)
    classifier = (getattr(model, "pretrained_cfg", None) or {}).get("classifier")  # a timm model's, where it has one
    if classifier and getattr(model, "num_classes", 1) == 0:
        state = {k: v for k, v in state.items() if not k.startswith(f"{classifier}.")}
    expected = model.state_dict()
    wrong_shape = [k for k, v in state.items() if k in expected and v.shape != expected[k].shape]
    missing = [k for k in expected if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected or wrong_shape:
        def some(keys: list[str]) -> str:
            return ", ".join(keys[:4]) + (", ..." if len(keys) > 4 else "")

        problems = [f"{len(missing)} of the model's entries are not in the file ({some(missing)})" if missing else "",
                    f"{len(unexpected)} entries of the file are not the model's ({some(unexpected)})" if unexpected
                    else "",
                    f"{len(wrong_shape)} have another shape ({some(wrong_shape)})" if wrong_shape else ""]
        raise BenchError(f"backbone weights {path} do not fit backbone {name!r}: "
                         f"{'; '.join(p for p in problems if p)}. Expected one of: {FORMATS}, for this architecture")
    model.load_state_dict(state, strict=False)  # strict but for BatchNorm's num_batches_tracked

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
# the --weights-dir directory, and `bench.weights` reads it.
PAPER_BACKBONES: dict[str, tuple[str, dict[str, Any]]] = {
    # 768-d CLS token after the final LayerNorm
    "dino-vitb16": ("vit_base_patch16_224.dino", {}),
    # 2048-d global average pool; the authors' code feeds it 64×64 images
    # (discrepancy 20, docs/methods.md#discrepancy-20)
    "dino-resnet50": ("resnet50", {}),
    # 512-d projected image embedding (keep the projection: num_classes=512), QuickGELU as OpenAI's
    "clip-vitb16": ("vit_base_patch16_clip_quickgelu_224.openai", {"num_classes": 512}),
}


# The file each paper backbone's authors publish, by the name it is published under.
PUBLISHED_FILES: dict[str, str] = {
    "dino-vitb16": "dino_vitbase16_pretrain.pth",
    "dino-resnet50": "dino_resnet50_pretrain.pth",
    "clip-vitb16": "ViT-B-16.pt",  # what OpenAI's clip.load("ViT-B/16") downloads
}

# Paper backbones whose timm hub weights are not the paper's: timm's `resnet50` weights are a supervised
# ImageNet training, not DINO's, so `pretrained=True` would silently run Tab. 4 on another backbone.
NOT_ON_THE_HUB = {"dino-resnet50"}


def resolve_pretrained(name: str, pretrained: bool | str, weights_dir: str | None) -> bool | str:
    """With a weights directory (`bench run --weights-dir`), a paper backbone asked for its
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
    if not path.is_file():
        expected = ", ".join(f"{file} ({alias})" for alias, file in PUBLISHED_FILES.items())
        raise BenchError(f"backbone {name!r}: no {PUBLISHED_FILES[name]} in the weights directory {weights_dir}; "
                         f"it holds the paper backbones' files under their published names: {expected}")
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


def load_backbone_weights(model: nn.Module, path: str | Path, name: str) -> None:
    """Load `path` into the timm `model` (registered as backbone `name`), or raise a `BenchError`
    that says which keys did not match. The classifier of a model built without one
    (`num_classes=0`) is the only part of a file that may go unused."""
    path = check_weights_file(path)
    state = _timm_filter(backbone_state(read_checkpoint(path)), model)
    classifier = model.pretrained_cfg.get("classifier") if hasattr(model, "pretrained_cfg") else None
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

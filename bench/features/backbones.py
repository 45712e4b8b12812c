"""Feature extractors, registered in `bench.registries.BACKBONES` by family.

- `pixels`: flattened pixels, each image standardised to zero mean and unit variance. It needs no
  weights and is meaningful on small images such as digits; it learns nothing from data, so it
  leaks nothing across steps.
- `timm:<model>`: any timm model by name, with the classifier removed (`num_classes=0`), e.g.
  `timm:vit_base_patch16_224.dino` (the paper's DINO ViT-B/16). `backbone.pretrained` is True
  (timm's hub weights), False (random init, for tests) or the path of a local weights file in its
  authors' format (DINO's .pth, OpenAI CLIP's TorchScript .pt; see `bench.features.weights`).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import torch
from torch import nn

from bench.errors import BenchError, unknown
from bench.features.weights import (FEATURE_NORMALISATION, NORMALISATION_NAMES, PAPER_BACKBONES,  # noqa: F401
                           PUBLISHED_FILES, REGISTERED_BACKBONES, SHOWN_NAMES, resolve_pretrained)
from bench.registries import BACKBONES


class Backbone(nn.Module):
    """Maps preprocessed images (N×C×H×W floats) to features (N×D).

    `input_size` is the square size the model expects (None: the dataset's native size);
    `channels` the number of input channels; `normalize` whether images are normalised, with the
    backbone's own `mean`/`std` where it has them, else with the dataset's.
    """

    feature_dim: int
    weights: bool | str = False  # what the weights were loaded from: a file, True (timm's hub) or False
    input_size: int | None = None
    channels: int | None = None
    normalize: bool = True
    mean: tuple[float, ...] | None = None  # None: the dataset's (the paper's convention)
    std: tuple[float, ...] | None = None


@BACKBONES.register_module(name="pixels")
class Pixels(Backbone):
    """Flattened pixels, each image standardised (no weights; for small images such as digits)."""

    normalize = False

    def __init__(self, image_shape: tuple[int, int, int], **_: Any) -> None:
        super().__init__()
        h, w, c = image_shape
        self.feature_dim = h * w * c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(1)
        return (flat - flat.mean(1, keepdim=True)) / (flat.std(1, keepdim=True) + 1e-6)


@BACKBONES.register_module(name="timm")
class TimmBackbone(Backbone):
    """Any timm model by name, classifier removed; pretrained from the hub or a local file."""

    channels = 3

    def __init__(self, model_name: str, pretrained: bool | str = True, kwargs: Mapping[str, Any] | None = None,
                 **_: Any) -> None:
        super().__init__()
        import timm

        kwargs = dict(kwargs or {})
        self._input_size = kwargs.pop("input_size", None)
        if not timm.is_model(model_name.split(".")[0]):
            raise BenchError(f"unknown timm model {model_name!r}; see timm.list_models() for valid names")
        self.model = _create_timm(model_name, pretrained, kwargs)
        model: Any = self.model  # timm's models share these attributes by convention, not by a declared type
        self.feature_dim = int(model.num_features if getattr(model, "num_classes", 0) == 0 else model.num_classes)
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
        # `input_size` sets the resolution of models without an img_size argument (the authors feed
        # DINO ResNet-50 64×64 images: backbone.kwargs.input_size=64 reproduces that)
        self.input_size = int(kwargs.get("img_size", self._input_size or size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def _create_timm(model_name: str, pretrained: bool | str, kwargs: dict[str, Any]) -> nn.Module:
    import timm

    kwargs.setdefault("num_classes", 0)
    if isinstance(pretrained, str):
        from bench.features.weights import load_backbone_weights

        model = timm.create_model(model_name, pretrained=False, **kwargs)
        load_backbone_weights(model, pretrained, model_name)
        return model
    if not pretrained:
        return timm.create_model(model_name, pretrained=False, **kwargs)
    try:
        return timm.create_model(model_name, pretrained=True, **kwargs)
    except Exception as err:  # huggingface_hub raises several types when offline or unreachable
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        raise BenchError(
            f"could not load pretrained weights for timm model {model_name!r}"
            f"{' (HF_HUB_OFFLINE is set)' if offline else ''}: {type(err).__name__}. Provide them with "
            f"--cfg-options backbone.pretrained=/path/to/weights (a local file: DINO's .pth, OpenAI CLIP's .pt, "
            f"timm's .pth or .safetensors), with bench run --weights-dir DIR (the paper backbones' published "
            f"files: {', '.join(PUBLISHED_FILES.values())}), or populate the Hugging Face cache on a machine "
            f"with network access; "
            f"backbone.pretrained=False uses random weights") from None


def build_backbone(name: str, options: Mapping[str, Any], image_shape: tuple[int, int, int],
                   weights_dir: str | None = None) -> Backbone:
    """The backbone `name` with its `options` (`pretrained`, `kwargs`); `weights_dir` is where the
    paper backbones' published files are found when `pretrained` is True (see `resolve_pretrained`).
    The returned model's `weights` says what it was loaded from (a file path, True or False)."""
    family, _, model_name = name.partition(":")
    cls = BACKBONES.get(family)
    if cls is None:
        raise unknown("backbone", name, [*BACKBONES.module_dict, "timm:<model name>"])
    if family == "timm" and not model_name:
        raise BenchError("backbone 'timm' needs a model name, e.g. timm:vit_base_patch16_224.dino")
    pretrained = resolve_pretrained(name, options.get("pretrained", True), weights_dir)
    # Randomly initialised weights (pretrained=False, for tests) must be the same in every process,
    # so that runs and feature banks agree; the global RNG is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = cls(model_name=model_name, image_shape=image_shape, pretrained=pretrained,
                    kwargs=options.get("kwargs", {}))
    model.weights = pretrained
    return model.eval().requires_grad_(False)


def _register_alias(alias: str, model_name: str, defaults: dict[str, Any]) -> None:
    paper = alias in PAPER_BACKBONES
    normalisation = FEATURE_NORMALISATION.get(alias)

    class Alias(TimmBackbone):
        __doc__ = (f"{'the paper' if paper else 'the field'}'s {SHOWN_NAMES[alias]}: timm:{model_name}"
                   + (f" with {defaults}" if defaults else "")
                   + ("; the dataset's mean/std" if normalisation is None
                      else f"; {NORMALISATION_NAMES[normalisation]} mean/std"))
        mean, std = normalisation if normalisation is not None else (None, None)

        def __init__(self, model_name: str = "", pretrained: bool | str = True,
                     kwargs: Mapping[str, Any] | None = None, **_: Any) -> None:
            super().__init__(REGISTERED_BACKBONES[alias][0], pretrained, {**defaults, **(kwargs or {})})

    Alias.__name__ = f"Backbone_{alias.replace('-', '_')}"
    BACKBONES.register_module(name=alias, module=Alias)


for _alias, (_model, _defaults) in REGISTERED_BACKBONES.items():
    _register_alias(_alias, _model, _defaults)

"""Weight files in the formats their authors publish, written from small models: OpenAI CLIP's
TorchScript archive (fp16, image and text towers, OpenAI's key names), DINO's ResNet-50 file
(torchvision's key names, no classifier) and DINO's full training checkpoint."""
from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import torch
from torch import nn


class _Node(nn.Module):
    pass


class _ClipArchive(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.logit_scale


def _put(root: nn.Module, key: str, value: torch.Tensor) -> None:
    *path, leaf = key.split(".")
    node = root
    for part in path:
        if not isinstance(getattr(node, part, None), nn.Module):
            node.add_module(part, _Node())
        node = getattr(node, part)
    node.register_parameter(leaf, nn.Parameter(value, requires_grad=False))


def openai_clip_state(vit: nn.Module) -> dict[str, torch.Tensor]:
    """The image tower of a timm CLIP ViT under OpenAI's key names (`clip/model.py`), the
    projection as OpenAI stores it (in × out, no bias), plus text-tower entries to be ignored."""
    t = {k: v.detach().clone() for k, v in vit.state_dict().items()}
    out = {"visual.conv1.weight": t["patch_embed.proj.weight"],
           "visual.class_embedding": t["cls_token"][0, 0],
           "visual.positional_embedding": t["pos_embed"][0],
           "visual.ln_pre.weight": t["norm_pre.weight"], "visual.ln_pre.bias": t["norm_pre.bias"],
           "visual.ln_post.weight": t["norm.weight"], "visual.ln_post.bias": t["norm.bias"],
           "visual.proj": t["head.weight"].t().contiguous()}
    names = {"norm1": "ln_1", "norm2": "ln_2", "attn.qkv.weight": "attn.in_proj_weight",
             "attn.qkv.bias": "attn.in_proj_bias", "attn.proj": "attn.out_proj", "mlp.fc1": "mlp.c_fc",
             "mlp.fc2": "mlp.c_proj"}
    for key, value in t.items():
        if key.startswith("blocks."):
            _, index, rest = key.split(".", 2)
            for timm_name, openai_name in names.items():
                if rest.startswith(timm_name):
                    rest = openai_name + rest[len(timm_name):]
                    break
            out[f"visual.transformer.resblocks.{index}.{rest}"] = value
    out.update({"token_embedding.weight": torch.randn(10, 8), "positional_embedding": torch.randn(5, 8),
                "text_projection": torch.randn(8, 4), "logit_scale": torch.tensor(4.6),
                "ln_final.weight": torch.ones(8), "input_resolution": torch.tensor(224),
                "context_length": torch.tensor(77), "vocab_size": torch.tensor(49408)})
    return out


def write_openai_clip(vit: nn.Module, path: Path) -> None:
    """A TorchScript archive in fp16, as `clip.load` downloads it."""
    root = _ClipArchive()
    for key, value in openai_clip_state(vit).items():
        _put(root, key, value.half() if value.is_floating_point() else value)
    with warnings.catch_warnings():  # TorchScript is deprecated; OpenAI's files are TorchScript all the same
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.trace(root, torch.ones(1, dtype=torch.half)), str(path))


def write_dino_full_checkpoint(teacher: dict[str, torch.Tensor], student: dict[str, torch.Tensor],
                               path: Path) -> None:
    """DINO's `*_full_checkpoint.pth`: teacher and student (DDP-wrapped) with their projection heads."""
    head = {"head.mlp.0.weight": torch.randn(4, 4), "head.last_layer.weight_g": torch.ones(8, 1)}
    torch.save({"teacher": {**{f"backbone.{k}": v for k, v in teacher.items()}, **head},
                "student": {**{f"module.backbone.{k}": v for k, v in student.items()},
                            **{f"module.{k}": v for k, v in head.items()}},
                "optimizer": {"state": {}}, "epoch": 100, "args": argparse.Namespace(arch="vit_base", patch_size=16)},
               path)

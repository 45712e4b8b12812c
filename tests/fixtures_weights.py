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


def dinov2_state(vit: nn.Module) -> dict[str, torch.Tensor]:
    """A timm DINOv2 ViT's weights under facebookresearch/dinov2's key names (its hub checkpoints): the
    pretraining mask token, and with registers `register_tokens` and a position embedding that covers the
    class token (timm folds that entry into its class token; here it is drawn at random and taken back out)."""
    t = {k: v.detach().clone() for k, v in vit.state_dict().items()}
    dim = t["cls_token"].shape[-1]
    out = {"mask_token": torch.randn(1, dim)}
    if "reg_token" in t:
        first = torch.randn(1, 1, dim)
        out["register_tokens"] = t.pop("reg_token")
        out["cls_token"] = t.pop("cls_token") - first
        out["pos_embed"] = torch.cat([first, t.pop("pos_embed")], dim=1)
    return {**out, **t}


def dinov3_state(eva: nn.Module) -> dict[str, torch.Tensor]:
    """A timm DINOv3 Eva's weights under facebookresearch/dinov3's key names (its hub checkpoints): storage
    tokens, layer scales `ls1.gamma`/`ls2.gamma`, one qkv bias with its mask (DINOv3 masks the key's part: here
    it holds noise that must not be read), the rotary periods and the pretraining mask token."""
    t = {k: v.detach().clone() for k, v in eva.state_dict().items()}
    dim = t["cls_token"].shape[-1]
    out = {"mask_token": torch.randn(1, dim), "rope_embed.periods": torch.rand(dim // eva.blocks[0].attn.num_heads // 4)}
    for key, value in t.items():
        if key == "reg_token":
            out["storage_tokens"] = value
        elif key.endswith(".gamma_1") or key.endswith(".gamma_2"):
            out[key.replace("gamma_1", "ls1.gamma").replace("gamma_2", "ls2.gamma")] = value
        elif key.endswith("attn.q_bias"):
            stem = key[: -len("q_bias")]
            out[f"{stem}qkv.bias"] = torch.cat([value, torch.randn_like(value), t[f"{stem}v_bias"]])
            out[f"{stem}qkv.bias_mask"] = torch.cat([torch.ones_like(value), torch.zeros_like(value),
                                                     torch.ones_like(value)])
        elif not key.endswith("attn.v_bias"):
            out[key] = value
    return out

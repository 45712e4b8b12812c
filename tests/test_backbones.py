"""Backbones: the paper's three by name, local weight files in the authors' formats, reproducibility."""
from __future__ import annotations

import pytest
import torch

from bench.backbones import build_backbone
from bench.errors import BenchError


@pytest.mark.parametrize("name, dim", [("dino-vitb16", 768), ("dino-resnet50", 2048), ("clip-vitb16", 512)])
def test_paper_backbones_have_the_papers_feature_dimension(name, dim):
    model = build_backbone(name, {"pretrained": False, "kwargs": {}}, (32, 32, 3))
    assert model.feature_dim == dim and model.input_size == 224
    assert model(torch.zeros(1, 3, 224, 224)).shape == (1, dim)


def test_a_local_dino_style_weights_file_is_loaded(tmp_path):
    # DINO publishes plain state dicts whose key names timm's ViT shares (blocks.N..., norm, no head).
    import timm

    source = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0)
    torch.nn.init.normal_(source.blocks[11].mlp.fc2.weight, std=0.5)
    path = tmp_path / "dino_vitbase16_pretrain.pth"
    torch.save(source.state_dict(), path)
    model = build_backbone("dino-vitb16", {"pretrained": str(path), "kwargs": {}}, (32, 32, 3))
    torch.testing.assert_close(model.model.blocks[11].mlp.fc2.weight, source.blocks[11].mlp.fc2.weight)
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(model(x), source(x))


def test_resnet50_at_the_codes_64_pixels():
    model = build_backbone("dino-resnet50", {"pretrained": False, "kwargs": {"input_size": 64}}, (32, 32, 3))
    assert model.input_size == 64


def test_random_init_is_the_same_in_every_build():
    a = build_backbone("timm:vit_tiny_patch16_224", {"pretrained": False, "kwargs": {}}, (32, 32, 3))
    torch.manual_seed(123)  # the global RNG must not matter
    b = build_backbone("timm:vit_tiny_patch16_224", {"pretrained": False, "kwargs": {}}, (32, 32, 3))
    torch.testing.assert_close(a.model.blocks[0].attn.qkv.weight, b.model.blocks[0].attn.qkv.weight)


def test_unknown_timm_model():
    with pytest.raises(BenchError, match="unknown timm model 'vit_nope'"):
        build_backbone("timm:vit_nope", {"pretrained": False}, (32, 32, 3))

"""Backbones: the paper's three by name, local weight files in the authors' formats, reproducibility."""
from __future__ import annotations

import pytest
import torch

from bench.features.backbones import build_backbone
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


TINY_CLIP = {"num_classes": 16, "embed_dim": 32, "depth": 2, "num_heads": 2, "img_size": 32}


def fp16_exact(model: torch.nn.Module) -> torch.nn.Module:
    """Round a model's weights to fp16 values, as OpenAI's archive stores them."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model.eval()


def test_an_openai_clip_torchscript_archive_is_loaded_as_the_image_tower(tmp_path):
    import timm

    from tests.fixtures_weights import write_openai_clip

    source = timm.create_model("vit_base_patch16_clip_quickgelu_224", pretrained=False, **TINY_CLIP)
    torch.nn.init.zeros_(source.head.bias)  # OpenAI's projection has no bias
    torch.nn.init.normal_(source.blocks[1].mlp.fc2.weight, std=0.5)
    fp16_exact(source)
    path = tmp_path / "ViT-B-16.pt"
    write_openai_clip(source, path)
    model = build_backbone("clip-vitb16", {"pretrained": str(path), "kwargs": TINY_CLIP}, (32, 32, 3))
    assert model.feature_dim == 16  # the projected embedding, not the width
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), source(x))


def test_a_dino_resnet50_file_in_torchvisions_key_names_is_loaded(tmp_path):
    import torchvision

    source = torchvision.models.resnet50(weights=None)
    torch.nn.init.normal_(source.layer4[2].conv3.weight, std=0.05)
    source.fc = torch.nn.Identity()  # DINO's backbone: the 2048-d pooled feature
    path = tmp_path / "dino_resnet50_pretrain.pth"
    torch.save(source.state_dict(), path)
    model = build_backbone("dino-resnet50", {"pretrained": str(path), "kwargs": {"input_size": 64}}, (32, 32, 3))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), source.eval()(x))


def test_a_dino_full_checkpoint_gives_its_teachers_backbone(tmp_path):
    import timm

    from tests.fixtures_weights import write_dino_full_checkpoint

    kwargs = {"embed_dim": 32, "depth": 1, "num_heads": 2, "img_size": 32}
    teacher = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0, **kwargs).eval()
    student = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0, **kwargs)
    torch.nn.init.normal_(student.blocks[0].mlp.fc1.weight, std=1.0)
    path = tmp_path / "dino_vitbase16_full_checkpoint.pth"
    write_dino_full_checkpoint(teacher.state_dict(), student.state_dict(), path)
    model = build_backbone("dino-vitb16", {"pretrained": str(path), "kwargs": kwargs}, (32, 32, 3))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), teacher(x))


def test_a_file_for_another_architecture_is_refused_by_name_not_half_loaded(tmp_path):
    import torchvision

    path = tmp_path / "resnet.pth"
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), path)
    with pytest.raises(BenchError, match=r"do not fit backbone 'vit_base_patch16_224.dino'.*not in the file "
                                         r"\(cls_token.*not the model's \(conv1.weight"):
        build_backbone("dino-vitb16", {"pretrained": str(path), "kwargs": {}}, (32, 32, 3))
    (tmp_path / "junk.pth").write_text("not a checkpoint")
    with pytest.raises(BenchError, match="cannot read backbone weights .*junk.pth.*OpenAI CLIP"):
        build_backbone("dino-vitb16", {"pretrained": str(tmp_path / "junk.pth"), "kwargs": {}}, (32, 32, 3))
    with pytest.raises(BenchError, match="weights file not found"):
        build_backbone("dino-vitb16", {"pretrained": str(tmp_path / "nowhere.pth"), "kwargs": {}}, (32, 32, 3))


def test_a_weights_directory_serves_each_paper_backbone_its_published_file(tmp_path, capsys):
    """`bench run --weights-dir DIR`: the run reads DIR/dino_vitbase16_pretrain.pth, the bank is keyed
    by that file, and a directory without the file is a clear error."""
    import timm

    from bench.features.bank import list_banks
    from bench.cli import main

    tiny = {"img_size": 16, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2}  # the smoke grid's
    source = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0, **tiny)
    (tmp_path / "weights").mkdir()
    torch.save(source.state_dict(), tmp_path / "weights" / "dino_vitbase16_pretrain.pth")
    argv = ["run", "--grid", "smoke", "--methods", "K-means", "--backbone", "dino-vitb16", "--cluster", "debug",
            "--results", str(tmp_path / "results"), "--cfg-options", "backbone.pretrained=True"]
    assert main([*argv, "--weights-dir", str(tmp_path / "weights")]) == 0
    (bank,) = list_banks(tmp_path / "results" / "cache")
    assert bank.fields["pretrained"]["file"] == str(tmp_path / "weights" / "dino_vitbase16_pretrain.pth")
    capsys.readouterr()
    # checked before anything runs: one line, and the finished run is left as it was (even with --force)
    assert main([*argv, "--weights-dir", str(tmp_path), "--force"]) == 2
    error = capsys.readouterr().err
    assert "no dino_vitbase16_pretrain.pth in the weights directory" in error and "ViT-B-16.pt (clip-vitb16)" in error
    assert not list((tmp_path / "results" / "runs").glob("*/error.txt"))
    assert len(list((tmp_path / "results" / "runs").glob("*/DONE"))) == 1


def test_dino_resnet50_needs_its_authors_file_before_anything_runs(tmp_path, capsys):
    """timm's `resnet50` hub weights are not DINO's: asked for its pretrained weights without the authors'
    file, `dino-resnet50` is one line before anything runs, never a run on another backbone."""
    from bench.cli import main
    from bench.features.weights import resolve_pretrained

    with pytest.raises(BenchError, match="dino_resnet50_pretrain.pth"):
        resolve_pretrained("dino-resnet50", True, None)
    assert resolve_pretrained("dino-resnet50", False, None) is False  # random weights: asked for
    assert resolve_pretrained("dino-vitb16", True, None) is True  # timm's `.dino` weights are DINO's own
    argv = ["run", "--grid", "smoke", "--methods", "K-means", "--backbone", "dino-resnet50", "--cluster", "debug",
            "--results", str(tmp_path / "results"), "--cfg-options", "backbone.pretrained=True"]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: error: backbone 'dino-resnet50': timm's hub has no weights of it")
    assert not list((tmp_path / "results").glob("runs/*/spec.json"))


class _Payload:
    def __reduce__(self):
        import os

        return (os.system, ("echo owned",))


@pytest.mark.parametrize("damage, said", [
    ("another architecture", "do not fit"),  # its patch embedding is 16x16 where the model's is 8x8
    ("truncated", "cannot read backbone weights"),
    ("empty", "cannot read backbone weights"),
    ("a pickle with a payload", "cannot read backbone weights"),
])
def test_a_bad_weights_file_is_refused_once_before_any_run_starts(tmp_path, capsys, damage, said):
    import pickle

    import timm

    from bench.cli import main

    tiny = {"img_size": 16, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2}  # the smoke grid's
    path = tmp_path / "weights.pth"
    if damage == "another architecture":
        torch.save(timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0,
                                     **{**tiny, "patch_size": 16}).state_dict(), path)
    elif damage == "truncated":
        torch.save(timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0, **tiny).state_dict(),
                   path)
        path.write_bytes(path.read_bytes()[:500])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(pickle.dumps({"state_dict": _Payload()}))
    results = tmp_path / "results"
    code = main(["run", "--grid", "smoke", "--methods", "K-means", "Baseline", "--backbone", "dino-vitb16",
                 "--cluster", "debug", "--results", str(results), "--cfg-options", f"backbone.pretrained={path}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and said in err and len(err.splitlines()) == 1 and "owned" not in err
    assert not (results / "runs").exists() or not any((results / "runs").iterdir())  # no run started

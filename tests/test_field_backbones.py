"""The backbones the field moved to (DINOv2, DINOv3, CLIP ViT-L/14, supervised IN-21k ViT-B/16) beside the
paper's: each registered ViT built tiny with random weights runs the prefix + tail path as its own forward,
loads a file written in its authors' key layout to the same features, refuses a file of another
architecture, and runs a feature-bank and a token-bank method."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench.features.backbones import build_backbone
from bench.errors import BenchError
from bench.features.weights import (FEATURE_NORMALISATION, FIELD_BACKBONES, PAPER_BACKBONES, PUBLISHED_FILES, REGISTERED_BACKBONES,
                           RELEASES, SHOWN_NAMES, resolve_pretrained)

VITS = [name for name in REGISTERED_BACKBONES if name != "dino-resnet50"]


def patch_of(name: str) -> int:
    return 14 if "patch14" in REGISTERED_BACKBONES[name][0] else 16


def tiny(name: str, depth: int = 3) -> dict:
    """A few narrow blocks on a 2 x 2 grid of the backbone's own patch size."""
    return {"embed_dim": 32, "depth": depth, "num_heads": 2, "img_size": 2 * patch_of(name)}


def scrambled(model: torch.nn.Module) -> torch.nn.Module:
    """Random weights everywhere, layer scales and biases included (timm starts DINO's layer scales at 1e-5,
    which would leave every block nearly the identity and a test of the blocks' weights toothless)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.3 if p.dim() <= 1 or "token" in name else 0.1))
    return model.eval()


def close(out: torch.Tensor, ref: torch.Tensor, rtol: float = 1e-4) -> None:
    torch.testing.assert_close(out, ref, rtol=rtol, atol=rtol * float(ref.abs().max()))


def test_every_registered_backbone_has_its_file_release_name_and_224_px():
    """At the default options (built on the meta device: nothing is allocated) every registered backbone
    takes 224 px images and gives its documented feature; its tokens are what the space check counts."""
    from bench.features.backbones import BACKBONES
    from bench.features.bank_space import FEATURE_DIMS, TOKEN_COUNTS, TOKENS

    dims = {"dinov2-vits14": 384, "dinov2-vitb14": 768, "dinov2-vitl14": 1024, "dinov2-vits14-reg4": 384,
            "dinov2-vitb14-reg4": 768, "dinov2-vitl14-reg4": 1024, "dinov3-vitb16": 768, "clip-vitl14": 768,
            "sup21k-vitb16": 768, "dino-vitb16": 768, "clip-vitb16": 512, "dino-resnet50": 2048}
    assert set(dims) == set(REGISTERED_BACKBONES) == set(PUBLISHED_FILES) == set(RELEASES) == set(SHOWN_NAMES)
    for name in REGISTERED_BACKBONES:
        with torch.device("meta"):
            model = BACKBONES.get(name)(image_shape=(224, 224, 3), pretrained=False)
        assert (model.input_size, model.feature_dim) == (224, dims[name]), name
        if name in VITS:
            vit = model.model
            assert vit.patch_embed.num_patches + vit.num_prefix_tokens == TOKEN_COUNTS.get(name, TOKENS), name
            assert FEATURE_DIMS[name] == vit.embed_dim, name


def test_field_backbones_normalise_with_their_authors_statistics_and_the_papers_with_the_datasets():
    import timm

    from bench.data import build_dataset
    from bench.features.views import Encoder

    assert set(FEATURE_NORMALISATION) == set(FIELD_BACKBONES)  # the paper's three keep the authors' code's rule
    for name, (mean, std) in FEATURE_NORMALISATION.items():
        cfg = timm.models.get_pretrained_cfg(REGISTERED_BACKBONES[name][0])  # timm's record of the authors' values
        assert tuple(cfg.mean) + tuple(cfg.std) == pytest.approx(mean + std, abs=1e-6), name
    data = build_dataset("synthetic", {"num_classes": 2, "image_size": 8, "train_per_class": 2, "test_per_class": 1})
    for name in ("clip-vitl14", "clip-vitb16"):
        backbone = build_backbone(name, {"pretrained": False, "kwargs": {**tiny(name), "num_classes": 8}}, (8, 8, 3))
        own = FEATURE_NORMALISATION.get(name, (data.mean, data.std))
        assert Encoder(backbone, data, "cpu").norm == own
        x = torch.full((1, 3, 8, 8), 0.5)
        expected = (0.5 - torch.tensor(own[0])) / torch.tensor(own[1])
        close(Encoder(backbone, data, "cpu").preprocess(x)[0, :, 0, 0], expected)


@pytest.mark.parametrize("name", VITS)
def test_prefix_then_tail_is_the_backbones_own_feature(name):
    """Patch 14 (a 2 x 2 grid of 28 px), registers and DINOv3's storage tokens (prefix tokens), DINOv3's rotary
    embedding (passed to every block, the tail's too): cut after any block, prefix + tail = the forward."""
    from bench.methods.tails import Tail
    from bench.features.tokens import Prefix

    backbone = build_backbone(name, {"pretrained": False, "kwargs": tiny(name)}, (8, 8, 3))
    scrambled(backbone.model)
    x = torch.randn(2, 3, backbone.input_size, backbone.input_size)
    with torch.no_grad():
        reference = backbone(x)
        for first in (1, 2):
            tokens = Prefix(backbone, first)(x)
            assert tokens.shape[1] == 4 + backbone.model.num_prefix_tokens
            close(Tail(backbone, first).eval()(tokens), reference)


def _source(name: str, **extra) -> torch.nn.Module:
    import timm

    model, defaults = REGISTERED_BACKBONES[name]
    return scrambled(timm.create_model(model.split(".")[0], pretrained=False, **{**defaults, **tiny(name), **extra}))


def _write(name: str, source: torch.nn.Module, path) -> None:
    """`source`'s weights in the file its authors publish, in their key layout."""
    from tests.fixtures_weights import dinov2_state, dinov3_state, write_openai_clip

    path.parent.mkdir(parents=True, exist_ok=True)
    if name.startswith("dinov2-"):
        torch.save(dinov2_state(source), path)
    elif name.startswith("dinov3-"):
        torch.save(dinov3_state(source), path)
    elif name.startswith("clip-"):
        write_openai_clip(source, path)
    else:  # timm's own layout, with the 21k classifier a bench backbone drops
        from safetensors.torch import save_file

        head = {"head.weight": torch.randn(10, source.num_features), "head.bias": torch.randn(10)}
        save_file({**{k: v.contiguous() for k, v in source.state_dict().items()}, **head}, str(path))


AUTHORS_FILES = ["dinov2-vits14", "dinov2-vitb14-reg4", "dinov3-vitb16", "clip-vitl14", "sup21k-vitb16"]


@pytest.mark.parametrize("name", AUTHORS_FILES)
def test_the_authors_file_under_its_published_name_gives_the_source_models_features(name, tmp_path):
    """Written in the authors' layout (DINOv2's mask token and registers, DINOv3's storage tokens, layer
    scales and masked key bias, OpenAI's TorchScript archive in fp16, timm's safetensors with a classifier),
    found in the weights directory by its published name: the features are the source model's."""
    source = _source(name)
    if name.startswith("clip-"):
        from tests.test_backbones import fp16_exact

        torch.nn.init.zeros_(source.head.bias)  # OpenAI's projection has no bias
        fp16_exact(source)
    _write(name, source, tmp_path / PUBLISHED_FILES[name])
    model = build_backbone(name, {"pretrained": True, "kwargs": tiny(name)}, (8, 8, 3), weights_dir=str(tmp_path))
    assert model.weights == str((tmp_path / PUBLISHED_FILES[name]).resolve())
    x = torch.randn(2, 3, model.input_size, model.input_size)
    with torch.no_grad():
        reference = source(x) if name.startswith("clip-") else source.forward_head(source.forward_features(x),
                                                                                    pre_logits=True)
        close(model(x), reference)


@pytest.mark.parametrize("name, target, complaint", [
    ("dinov2-vitb14", "dinov2-vitb14-reg4", r"not in the file \(reg_token"),  # registers missing
    ("dinov2-vitb14-reg4", "dinov2-vitb14", r"not the model's \(reg_token"),
    ("dinov3-vitb16", "sup21k-vitb16", r"not in the file \(pos_embed.*not the model's \(rope_embed.periods"),  # family
    ("dinov2-vits14", "clip-vitl14", r"not in the file \(norm_pre.weight.*not the model's \(patch_embed.proj.bias, blocks.0.ls1"),
    ("dinov2-vitb14", "sup21k-vitb16", r"patch embedding is 14x14 where the model's is 16x16"),  # never resampled
    ("sup21k-vitb16", "clip-vitl14", r"patch embedding is 16x16 where the model's is 14x14"),
])
def test_a_file_for_another_architecture_is_refused_with_the_keys_that_differ(name, target, complaint, tmp_path):
    path = tmp_path / PUBLISHED_FILES[name]
    _write(name, _source(name), path)
    with pytest.raises(BenchError, match=rf"do not fit backbone '{REGISTERED_BACKBONES[target][0]}'.*{complaint}"):
        build_backbone(target, {"pretrained": str(path), "kwargs": tiny(target)}, (8, 8, 3))


def test_a_missing_file_names_its_published_name_and_where_it_is_published(tmp_path):
    with pytest.raises(BenchError, match=r"no dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth in the weights directory "
                                         r".*github.com/facebookresearch/dinov3"):
        resolve_pretrained("dinov3-vitb16", True, str(tmp_path))
    for name in PAPER_BACKBONES:  # the paper's three are looked up as before
        assert PUBLISHED_FILES[name] in ("dino_vitbase16_pretrain.pth", "dino_resnet50_pretrain.pth", "ViT-B-16.pt")


def test_a_weights_directory_that_is_a_file_or_a_folder_in_a_files_place_is_said_as_such(tmp_path):
    """`bench run --weights-dir`: a file given as the folder, or a folder where a published file should be, is named
    for what it is, not reported as a missing file."""
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(BenchError, match=r"^the weights directory .*/file is a file; give the folder that holds"):
        resolve_pretrained("dino-vitb16", True, str(tmp_path / "file"))
    (tmp_path / PUBLISHED_FILES["dino-vitb16"]).mkdir()
    with pytest.raises(BenchError, match=rf"^backbone 'dino-vitb16': {tmp_path / PUBLISHED_FILES['dino-vitb16']} is a "
                                         rf"folder, where its weights file .* should be; move it away"):
        resolve_pretrained("dino-vitb16", True, str(tmp_path))


@pytest.mark.parametrize("name", ["dinov2-vitb14-reg4", "dinov3-vitb16", "clip-vitl14"])
def test_a_feature_bank_method_and_a_token_bank_tail_method_run_on_it(name, tmp_path):
    """Baseline on the feature bank and Joint (unfrozen) on the token bank (patch 14 and registers,
    DINOv3's rotary embedding in the tail, CLIP's projection): both finish, each bank built once."""
    from bench.features.bank import list_banks
    from bench.protocol.runner import execute
    from bench.runs.rundir import METRICS
    from tests.helpers import tiny_specs
    from tests.test_incremental import TINY_VIT

    kwargs = {f"backbone.kwargs.{k}": v for k, v in {**tiny(name, depth=2), "patch_size": patch_of(name)}.items()}
    options = {**{k: v for k, v in TINY_VIT.items() if k in ("method.epochs", "method.batch_size", "method.stage1_epochs",
                                                            "method.stage2_epochs")},
               **kwargs, "features.tokens": "bank"}
    specs = tiny_specs(methods=["Baseline", "Joint (unfrozen)"], backbone=name, **options)
    for spec in specs:
        metrics = pd.read_parquet(execute(spec, tmp_path) / METRICS)
        final = metrics[(metrics["group"] == "summary") & (metrics["metric"] == "A")]
        assert len(final) and final["value"].between(0, 100).all()
    banks = list_banks(tmp_path / "cache")
    assert sorted(b.kind for b in banks).count("token bank") == 1
    assert all(b.fields["backbone"] == name and b.fields["normalisation"] == [list(v) for v in
                                                                             FEATURE_NORMALISATION[name]] for b in banks)


# a system test of half a minute or more on 2 shared cores: `pytest -m scale` (.ci/run) runs it
@pytest.mark.scale
def test_the_backbones_grid_covers_every_registered_backbone_and_renders_tab4_extended(capsys, tmp_path):
    """The `backbones` grid: Baseline, Baseline++ and Joint (frozen) on every registered backbone, Joint
    (unfrozen) on every registered ViT, five datasets, both splits; `bench report` renders each block in
    Tab. 4's layout: the paper's rows first in the paper's order, then the field's, every run in its row."""
    from bench.config.grids import expand, load_grid
    from tests.test_cli import fake_run, run

    grid = load_grid("backbones")
    frozen, unfrozen = grid.blocks
    assert (frozen.layout, unfrozen.layout) == ("backbones", "backbones")
    assert frozen.methods == ("Baseline", "Baseline++", "Joint (frozen)") and unfrozen.methods == ("Joint (unfrozen)",)
    assert set(frozen.backbones) == set(REGISTERED_BACKBONES) and set(unfrozen.backbones) == set(VITS)
    assert set(grid.datasets) == {"cifar10", "cifar100", "tinyimagenet", "cub200", "herbarium19"}
    assert set(grid.splits) == {"2-step", "5-step"}
    assert len(expand(grid)) == 10 * (3 * len(REGISTERED_BACKBONES) + len(VITS))
    # the paper's Tab. 4 cells are runs of this grid: the same run ids
    tab4 = {s.run_id for s in expand(load_grid("paper")) if s.method == "Baseline" and s.split == "5-step"
            and s.dataset == "cifar10" and s.backbone in ("dino-resnet50", "clip-vitb16")}
    assert tab4 <= {s.run_id for s in expand(grid)}

    specs = expand(grid, datasets=["cifar10"])
    values = {}
    for i, spec in enumerate(specs):  # a distinct A per run, to find each run's row again
        values[(spec.split, spec.method, spec.backbone)] = a = 10.0 + i * 0.5
        fake_run(tmp_path, spec, a)
    code, _, err = run(capsys, "report", "--grid", "backbones", "--results", str(tmp_path), "--format", "markdown")
    assert code == 0, err
    folder = tmp_path / "reports" / "backbones"
    order = ["ResNet50-DINO", "ViT-B/16-DINO", "ViT-B/16-CLIP", "ViT-S/14-DINOv2", "ViT-B/14-DINOv2", "ViT-L/14-DINOv2",
             "ViT-S/14-DINOv2-reg4", "ViT-B/14-DINOv2-reg4", "ViT-L/14-DINOv2-reg4", "ViT-B/16-DINOv3", "ViT-L/14-CLIP",
             "ViT-B/16-IN21k"]
    backbone_of = {SHOWN_NAMES[name]: name for name in REGISTERED_BACKBONES}
    for table, methods, shown in (("table_frozen.md", frozen.methods, order), ("table_unfrozen.md", unfrozen.methods,
                                                                             order[1:])):
        lines = [[c.strip() for c in line.strip().strip("|").split("|")]
                 for line in (folder / table).read_text().splitlines() if line.startswith("|")]
        header, rows = lines[0], lines[2:]
        several = len(methods) > 1
        assert header[:3 if several else 2] == (["split", "method", "backbone"] if several else ["split", "backbone"])
        expected = [(split, method, name) for split in ("2-step", "5-step") for method in methods for name in shown]
        got = [(r[0] or None, r[1] if several else methods[0], r[2 if several else 1]) for r in rows]
        split = None  # the split column names a split on its first row only
        for (s, method, name), (want_split, want_method, want_name) in zip(got, expected):
            split = s or split
            assert (split, method, name) == (want_split, want_method, want_name)
        assert len(got) == len(expected)
        for row, (want_split, method, name) in zip(rows, expected):
            a = float(row[-1].strip("*"))
            assert a == pytest.approx(values[(want_split, method, backbone_of[name])])

"""The engine of the methods that fine-tune a ViT's last blocks: the frozen prefix, trainable tails,
the token source, the one epoch loop, and the refusal of backbones without blocks."""
from __future__ import annotations

import copy

import pytest
import torch

from bench.features.tokens import Prefix, first_trainable_block
from bench.methods.loop import train_epochs
from bench.methods.tails import Tail


def tiny_vit(name: str = "vit_base_patch16_224", **extra):
    from bench.features.backbones import build_backbone

    kwargs = {"embed_dim": 16, "depth": 12, "num_heads": 2, "img_size": 16, "patch_size": 8, **extra}
    return build_backbone(f"timm:{name}", {"pretrained": False, "kwargs": kwargs}, (16, 16, 3))


@pytest.mark.parametrize("trainable, first", [(1, 11), ("blocks.11", 11), ("blocks.10", 10), (2, 10)])
def test_only_the_tails_blocks_train_and_the_prefix_keeps_no_graph(trainable, first):
    backbone = tiny_vit()
    assert first_trainable_block(12, trainable) == first
    prefix, tail = Prefix(backbone, first), Tail(backbone, first)
    assert [n for n, _ in tail.named_parameters()] == [f"blocks.{k}" for k, _ in backbone.model.blocks[first:].named_parameters()]
    assert set(tail.trainable_state()) == {k for k, _ in backbone.model.blocks[first:].state_dict().items()}
    tokens = prefix(torch.randn(2, 3, 16, 16))
    assert not tokens.requires_grad  # no activations kept for the frozen prefix
    tail(tokens).sum().backward()
    assert all(p.grad is not None for p in tail.parameters())
    assert all(p.grad is None for p in backbone.parameters())  # the shared backbone never trains


def test_an_unknown_block_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown block 'block.11'.*blocks.0 .. blocks.11"):
        first_trainable_block(12, "block.11")
    with pytest.raises(ValueError, match="cannot unfreeze the last 13 blocks of a 12-block backbone"):
        first_trainable_block(12, 13)


@pytest.mark.parametrize("name, extra, dim", [("vit_base_patch16_224", {}, 16),
                                              ("vit_base_patch16_clip_quickgelu_224", {"num_classes": 8}, 8)])
def test_prefix_then_tail_is_the_backbones_own_feature(name, extra, dim):
    """DINO's CLS after the final norm; CLIP's projection (here 8-d) applied after it."""
    backbone = tiny_vit(name, **extra)
    x = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        out = Tail(backbone, 11).eval()(Prefix(backbone, 11)(x))
    assert out.shape == (3, dim)
    torch.testing.assert_close(out, backbone(x))


def test_a_tails_feature_is_fp32_or_wider_never_narrowed_from_float64():
    """bf16 and fp32 give fp32 (what heads and losses read); a float64 tail (the checks against authors' code) stays
    float64 to the end, so a chain of steps keeps float64's agreement."""
    backbone = tiny_vit()
    x = torch.randn(3, 3, 16, 16)
    tail = Tail(backbone, 11).eval()
    with torch.no_grad():
        tokens = Prefix(backbone, 11)(x)
        assert tail(tokens).dtype == torch.float32
        assert tail(tokens.bfloat16().float()).dtype == torch.float32
        wide = copy.deepcopy(backbone).double()
        out = Tail(wide, 11).eval()(Prefix(wide, 11)(x.double()))
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.float(), tail(tokens), rtol=1e-4, atol=1e-5)


def test_a_tail_snapshot_copies_the_blocks_and_shares_the_backbone():
    backbone = tiny_vit()
    tail = Tail(backbone, 10)
    teacher = tail.frozen_copy()
    assert teacher._finish[0] is backbone.model and not teacher.training
    assert all(not p.requires_grad for p in teacher.parameters())
    with torch.no_grad():
        next(tail.parameters()).add_(1.0)
    assert not torch.equal(next(tail.parameters()), next(teacher.parameters()))
    twin = copy.deepcopy(tail)
    assert twin._finish[0] is backbone.model and sum(p.numel() for p in twin.parameters()) == sum(
        p.numel() for p in backbone.model.blocks[10:].parameters())


def test_the_epoch_loop_steps_cosine_shuffles_and_zips():
    """Two zipped sources of 5 and 3 rows in batches of 2: ceil(3/2) = 2 iterations per epoch, each
    with a batch of every source; lr from the cosine schedule stepped at each epoch's start."""
    weight = torch.nn.Parameter(torch.zeros(1))
    seen = []
    gen = torch.Generator().manual_seed(0)
    hp = {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "eta_min": 0.001}
    opt_lr = []

    def loss_of(index):
        seen.append([i.tolist() for i in index])
        return (weight * 1.0).sum()

    real_step = torch.optim.SGD.step

    def spy(self, *a, **k):
        opt_lr.append(self.param_groups[0]["lr"])
        return real_step(self, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.optim.SGD, "step", spy)
        losses = train_epochs([weight], hp, epochs=2, sizes=[5, 3], batch_size=2, gen=gen, loss_of=loss_of)
    assert len(seen) == 4 and all(len(batch) == 2 for batch in seen)
    assert [len(b[1]) for b in seen] == [2, 1, 2, 1]  # the shorter source decides; its last batch is partial
    expected = torch.Generator().manual_seed(0)
    first = [torch.randperm(5, generator=expected), torch.randperm(3, generator=expected)]
    assert seen[0] == [first[0][:2].tolist(), first[1][:2].tolist()]
    from bench.methods.loop import cosine_lr

    assert opt_lr == [cosine_lr(0, 2, 0.1, 0.001)] * 2 + [0.001] * 2
    torch.testing.assert_close(weight.detach(), torch.tensor([-2 * cosine_lr(0, 2, 0.1, 0.001) - 2 * 0.001]))
    lr0 = cosine_lr(0, 2, 0.1, 0.001)  # the loss is the weight itself: 0, -lr0 | -2 lr0, -2 lr0 - 0.001
    assert losses == [pytest.approx(-lr0 / 2), pytest.approx(-2 * lr0 - 0.0005)]  # means over the first source's rows


@pytest.mark.parametrize("backbone", ["dino-resnet50", "pixels"])
def test_a_tail_method_on_a_backbone_without_blocks_is_refused_before_anything_runs(capsys, tmp_path, backbone):
    from bench.cli import main

    code = main(["run", "--methods", "Joint (unfrozen)", "--backbone", backbone, "--cluster", "debug",
                 "--results", str(tmp_path)])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert f"Joint (unfrozen) trains a ViT's last blocks; backbone {backbone!r} has none" in line
    assert "dino-vitb16, clip-vitb16" in line
    assert not (tmp_path / "runs").exists()


# --- precision: the trained blocks compute in the run's `precision.tails` on CUDA ---------------------

def test_autocast_is_bf16_on_cuda_only_when_the_precision_says_so():
    """No GPU here: the choice of autocast, which `autocast_for` hands to `torch.autocast`."""
    from bench.features.precision import autocast_args

    assert autocast_args("cuda", "fp32") == dict(device_type="cuda", dtype=torch.bfloat16, enabled=False)
    assert autocast_args("cuda", "bf16") == dict(device_type="cuda", dtype=torch.bfloat16, enabled=True)
    assert not autocast_args("cpu", "bf16")["enabled"]
    with pytest.raises(ValueError, match="unknown precision 'fp16'; choose from fp32, bf16"):
        autocast_args("cuda", "fp16")


class Built(Exception):
    """Stops a run at its first step, once the runner has built and bound the method."""


@pytest.mark.parametrize("precision", [None, "bf16"])
def test_the_runs_tail_precision_reaches_every_trained_block(precision, tmp_path, monkeypatch):
    """A method built by the runner computes its tails, their frozen copies and ResTune's branches in
    the run's `precision.tails` (default fp32); the frozen prefix keeps its own (bf16 on CUDA)."""
    import contextlib

    import bench.protocol.runner as runner
    from bench.features.tokens import vit_of
    from bench.methods.restune import ResidualEncoder, ResTune
    from tests.helpers import tiny_specs

    options = {"backbone.kwargs.depth": 2, **({"precision.tails": precision} if precision else {})}
    (spec,) = tiny_specs(methods=["ResTune"], backbone="timm:vit_tiny_patch16_224", **options)
    built = []

    def stop(self, step):
        built.append(self)
        raise Built

    monkeypatch.setattr(ResTune, "learn", stop)
    with pytest.raises(Built):
        runner.execute(spec, tmp_path)
    (method,) = built
    asked = []
    for module, block in (("bench.methods.tails", "tail"), ("bench.methods.restune", "branch")):
        monkeypatch.setattr(f"{module}.autocast_for",
                            lambda device, p, block=block: asked.append((block, p)) or contextlib.nullcontext())
    encoder = ResidualEncoder(method.new_tail(), [method._branch()])
    tokens = torch.randn(2, 5, vit_of(method.backbone).embed_dim)
    encoder(tokens)
    encoder.frozen_copy()(tokens)
    assert {block for block, _ in asked} == {"tail", "branch"}
    assert {p for _, p in asked} == {precision or "fp32"}


def test_the_default_precision_keeps_the_run_ids_runs_had_before():
    from dataclasses import asdict

    from bench.config.spec import RunSpec
    from tests.helpers import tiny_specs

    (default,) = tiny_specs(methods=["CaSSLe"], backbone="timm:vit_tiny_patch16_224")
    (bf16,) = tiny_specs(methods=["CaSSLe"], backbone="timm:vit_tiny_patch16_224", **{"precision.tails": "bf16"})
    assert default.config["precision"] == {"tails": "fp32"} and "precision" not in default.identity()["config"]
    before = RunSpec(**{**asdict(default), "config": {k: v for k, v in default.config.items() if k != "precision"}})
    assert before.run_id == default.run_id != bf16.run_id
    assert bf16.identity()["config"]["precision"] == {"tails": "bf16"}

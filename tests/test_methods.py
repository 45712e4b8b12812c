"""Every registered method end to end, and the pieces Baseline++ and Joint (frozen) add."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from bench.features.views import FeatureViews
from bench.protocol.runner import execute
from bench.runs.rundir import METRICS
from bench.config.presets import load_preset
from bench.methods.base import Step
from bench.methods.baseline_pp import BaselinePlusPlus
from bench.methods.blocks import CosineHead, PrototypeStats
from bench.methods.joint import JointFrozen
from bench.registries import METHODS, load_all
from tests.helpers import tiny_specs

load_all()
FEATURE_METHODS = sorted(name for name, cls in METHODS.module_dict.items()
                         if cls.runs_on.inputs == "features" and not name.startswith("_"))


@pytest.mark.parametrize("method", FEATURE_METHODS)
def test_every_method_runs_end_to_end_and_resumes(method, tmp_path):
    (spec,) = tiny_specs(methods=[method], splits=["5-step"], **{"dataset.num_classes": 10})
    out = execute(spec, tmp_path)
    frame = pd.read_parquet(out / METRICS)
    summary = frame[frame["group"] == "summary"]
    # A, A_sample, F, F_max for wo, w and wo_refit; All, Old, New for gcd and gcd_sep
    assert len(summary) == 12 + 6 and summary["value"].notna().all()
    assert frame["step"].max() == 4
    # a frozen encoder and frozen task heads give every re-fitted map its frozen one
    by = frame.set_index(["step", "group", "flavour", "metric"])["value"]
    refit = by.xs("wo_refit", level="flavour")
    assert len(refit) > 0 and refit.equals(by.xs("wo", level="flavour").loc[refit.index])


def test_prototype_statistics_by_hand():
    stats = PrototypeStats()
    x = torch.tensor([[0.0, 2.0], [2.0, 4.0], [5.0, 5.0]])
    stats.add_step(x, torch.tensor([0, 0, 2]), n_classes=3)  # class 1 received no sample
    torch.testing.assert_close(stats.means[0], torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(stats.stds[0], torch.sqrt(torch.tensor([1.0, 1.0]) + 1e-5))
    torch.testing.assert_close(stats.stds[2], torch.full((2,), math.sqrt(1e-5)))  # one sample
    assert 1 not in stats.means
    # σ̄ averages over all 3 classes, the skipped one counting as zeros (the code's behaviour)
    torch.testing.assert_close(stats.shared_std(), (stats.stds[0] + stats.stds[2]) / 3)
    # FRoST's code divides by n − 1: (1² + 1²)/1 = 2; a one-sample class still gets variance 0
    unbiased = PrototypeStats()
    unbiased.add_step(x, torch.tensor([0, 0, 2]), n_classes=3, unbiased=True)
    torch.testing.assert_close(unbiased.stds[0], torch.sqrt(torch.tensor([2.0, 2.0]) + 1e-5))
    torch.testing.assert_close(unbiased.stds[2], torch.full((2,), math.sqrt(1e-5)))


def test_replay_uses_per_class_or_shared_sigma():
    stats = PrototypeStats()
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(4000, 2, generator=gen) * torch.tensor([3.0, 3.0])
    b = torch.randn(4000, 2, generator=gen) * torch.tensor([0.1, 0.1]) + 10
    stats.add_step(torch.cat([a, b]), torch.cat([torch.zeros(4000), torch.ones(4000)]).long(), n_classes=2)
    x, y = stats.sample({0: 3000, 1: 3000}, shared_std=False, gen=gen)
    assert x[y == 1].std(0).max() < 0.2 and x[y == 0].std(0).min() > 2.5
    x, y = stats.sample({0: 3000, 1: 3000}, shared_std=True, gen=gen)
    shared = (3.0 + 0.1) / 2
    assert abs(x[y == 1].std(0).mean() - shared) < 0.1  # every class with the same σ̄
    torch.testing.assert_close(x[y == 1].mean(0), torch.tensor([10.0, 10.0]), atol=0.1, rtol=0)


def make_pp(**overrides) -> BaselinePlusPlus:
    params, _ = load_preset("Baseline++", "equations")
    return BaselinePlusPlus(4, 0, **{**params, **overrides})


def test_replay_batch_composition_paper_and_code():
    stats = PrototypeStats()
    stats.add_step(torch.randn(9, 4), torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2]), n_classes=3)
    counts = stats.replay_counts(256, 0, torch.Generator().manual_seed(0))
    assert sum(counts.values()) == 256 and set(counts) == {0, 1, 2}  # paper: as many as the batch
    assert stats.replay_counts(256, 12, torch.Generator()) == {0: 12, 1: 12, 2: 12}  # code: n_k per class


def test_student_initialisation_paper_vs_code():
    h0, h1, h2 = (CosineHead(4, n) for n in (2, 2, 3))
    prev = CosineHead(4, 4)
    code = make_pp(init_from="baseline_heads")
    code.heads, code.student = [h0, h1, h2], prev
    torch.testing.assert_close(code._init_student().weight, torch.cat([h0.weight, h1.weight, h2.weight]).detach())
    paper = make_pp(init_from="previous_student")
    paper.heads, paper.student = [h0, h1, h2], prev
    torch.testing.assert_close(paper._init_student().weight, torch.cat([prev.weight, h2.weight]).detach())


def test_presets_differ_where_the_spec_says():
    paper, _ = load_preset("Baseline++", "equations")
    code, overrides = load_preset("Baseline++", "code")
    differing = {k for k in paper if paper[k] != code[k]}
    assert differing == {"weight_decay", "ktrfr_epochs", "ktrfr_normalize_weights", "shared_std",
                         "replay_per_class", "init_from", "swap_reduction", "ktrfr_reduction",
                         "unbiased_variance"}
    assert (paper["swap_reduction"], code["swap_reduction"]) == ("sum", "mean")
    assert (paper["ktrfr_reduction"], code["ktrfr_reduction"]) == ("sum", "mean")
    assert overrides["cifar100/5-step"]["replay_per_class"] == 20
    assert load_preset("K-means", "code")[0] == {"init": "random", "n_init": 1, "max_iter": 200}
    assert load_preset("Baseline", "no_cosnorm")[0]["normalize_weights"] is False


@pytest.mark.parametrize("preset", ["equations", "code"])
def test_baseline_pp_code_preset_stores_the_codes_unbiased_sigma(preset, monkeypatch):
    """The code's prototypes (utils/feat_replay.py) use torch.var, ÷ (n − 1): σ_k = sqrt(var + 1e-5)
    differs from the ÷ n one by 29% on a class of 2 and 8% on a class of 10; σ̄ averages those σ."""
    gen = torch.Generator().manual_seed(0)
    two = torch.tensor([[5.0, 1.0], [9.0, 2.0]])  # class 0: the first coordinate is the larger
    ten = torch.rand(10, 2, generator=gen) * torch.tensor([1.0, 3.0]) + torch.tensor([0.0, 4.0])  # class 1
    head = CosineHead.from_weight(torch.eye(2))  # argmax = the larger coordinate: the pseudo-labels above
    monkeypatch.setattr("bench.methods.baseline.Baseline.learn", lambda self, step: self.heads.append(head))
    params, _ = load_preset("Baseline++", preset)
    method = BaselinePlusPlus(2, 0, **params)
    method.learn(Step(index=0, n_classes=2, offset=0, train=FeatureViews(torch.cat([two, ten]), torch.empty(12, 0, 2))))
    unbiased = preset == "code"
    for k, x in enumerate([two, ten]):
        torch.testing.assert_close(method.prototypes.stds[k], torch.sqrt(torch.var(x, 0, unbiased=unbiased) + 1e-5))
    stds = method.prototypes.stds
    torch.testing.assert_close(method.prototypes.shared_std(), (stds[0] + stds[1]) / 2)  # σ̄: the mean of these σ


@pytest.mark.parametrize("method", sorted(METHODS.module_dict))
def test_code_presets_train_on_the_authors_views_equations_presets_on_the_papers(method):
    """A preset sets `features` keys too: `Baseline:code` must not train on the paper's views; every
    variant of `code` (`no_cosnorm`, `sinkhorn`) keeps the authors' views."""
    from bench.config.presets import _read_config, preset_names, resolve_config
    from bench.registries import PRESETS_DIR

    presets = preset_names(_read_config(str(PRESETS_DIR / f"{METHODS.get(method).preset_file}.py")))
    for preset in presets:
        config = resolve_config(method, preset, "cifar10", "2-step", {}, {})
        assert config["features"]["policy"] == ("paper" if preset == "equations" else "code"), preset
        assert "features" not in config["method"]
    if "code" in presets:  # the command line still wins over the preset
        config = resolve_config(method, "code", "cifar10", "2-step", {}, {"features.policy": "paper"})
        assert config["features"]["policy"] == "paper"


def test_ktrfr_batch_is_its_own_key_so_baselines_cifar100_override_does_not_reach_it():
    from bench.config.presets import resolve_config

    config = resolve_config("Baseline++", "code", "cifar100", "5-step", {}, {})["method"]
    assert (config["batch_size"], config["ktrfr_batch_size"]) == (512, 256)


def test_ktrfr_loss_sums_two_means_in_paper_and_averages_all_rows_in_code():
    from bench.methods.baseline_pp import ktrfr_loss
    from bench.methods.blocks import hard_cross_entropy

    torch.manual_seed(0)
    current, replay = torch.randn(4, 3), torch.randn(2, 3)
    yc, yr = torch.tensor([0, 1, 2, 0]), torch.tensor([1, 2])
    per_row = [-torch.log_softmax(l / 0.1, 0)[y] for l, y in zip(torch.cat([current, replay]), torch.cat([yc, yr]))]
    by_hand_current, by_hand_replay = sum(per_row[:4]) / 4, sum(per_row[4:]) / 2
    torch.testing.assert_close(ktrfr_loss(current, yc, replay, yr, 0.1, "sum"), by_hand_current + by_hand_replay)
    torch.testing.assert_close(ktrfr_loss(current, yc, replay, yr, 0.1, "mean"), sum(per_row) / 6)
    nothing = ktrfr_loss(current, yc, replay[:0], yr[:0], 0.1, "sum")  # no old class to replay
    torch.testing.assert_close(nothing, hard_cross_entropy(current, yc, 0.1))


def test_ktrfr_draws_batches_of_its_own_size(monkeypatch):
    method = make_pp(ktrfr_epochs=1, ktrfr_batch_size=4, batch_size=512)
    method.heads = [CosineHead(4, 2).eval(), CosineHead(4, 2).eval()]
    method.prototypes.add_step(torch.randn(6, 4), torch.tensor([0, 0, 0, 1, 1, 1]), n_classes=2)
    data = FeatureViews(torch.randn(10, 4), torch.randn(10, 2, 4))
    sizes = []
    real = data.two_views
    monkeypatch.setattr(data, "two_views", lambda index, gen: sizes.append(len(index)) or real(index, gen))
    method._ktrfr(Step(index=1, n_classes=2, offset=2, train=data))
    assert sizes == [4, 4, 2]


def test_joint_trains_on_zipped_batches_labelled_by_each_tasks_own_head(monkeypatch):
    params, _ = load_preset("Joint (frozen)", "equations")
    joint = JointFrozen(4, 0, **{**params, "joint_epochs": 1, "joint_batch_size": 2})
    joint.heads = [CosineHead(4, 2).eval(), CosineHead(4, 3).eval()]
    seen = []
    real = torch.cat

    def spy(tensors, *a, **k):
        seen.append([t.shape for t in tensors])
        return real(tensors, *a, **k)

    past = FeatureViews(torch.randn(5, 4), torch.randn(5, 2, 4))
    current = FeatureViews(torch.randn(3, 4), torch.randn(3, 2, 4))
    step = Step(index=1, n_classes=3, offset=2, train=current, past=[past])
    monkeypatch.setattr("bench.methods.joint.torch.cat", spy)
    student = joint._joint(step)
    assert student.weight.shape == (5, 4)
    batches = [shapes for shapes in seen if len(shapes) == 4 and len(shapes[0]) == 2]
    # min(ceil(5/2), ceil(3/2)) = 2 iterations; each takes 2 views of a batch from every task
    assert len(batches) == 2
    labels = [shapes for shapes in seen if len(shapes) == 4 and len(shapes[0]) == 1]
    assert len(labels) == 2


def _tokens_of(backbone, spec, first, labels_in):
    """Live prefix tokens of the synthetic training images whose labels satisfy `labels_in`."""
    from bench.data import build_dataset
    from bench.features.views import Encoder
    from bench.features.tokens import LiveTokens, Prefix

    data = build_dataset("synthetic", spec.config["dataset"])
    prefix = Prefix(backbone, first)
    return LiveTokens(data.train.subset(labels_in(data.train.labels)), Encoder(backbone, data, "cpu"), prefix), prefix


def test_joint_unfrozen_trains_only_the_last_block_and_resumes(tmp_path):
    from bench.features.backbones import build_backbone
    from bench.methods.joint_unfrozen import JointUnfrozen

    (spec,) = tiny_specs(methods=["Joint (unfrozen)"], backbone="timm:vit_tiny_patch16_224",
                         **{"method.stage1_epochs": 2, "method.stage2_epochs": 2, "backbone.kwargs.depth": 2})
    out = execute(spec, tmp_path)
    frame = pd.read_parquet(out / METRICS)
    assert set(frame["step"]) == {0, 1} and frame["value"].notna().all()
    backbone = build_backbone(spec.backbone, spec.config["backbone"], (8, 8, 3))
    method = JointUnfrozen(32, 0, **spec.config["method"])
    method.bind(backbone)
    tokens, _ = _tokens_of(backbone, spec, method.first_trainable, lambda y: y < 3)
    step = Step(index=0, n_classes=3, offset=0, train=FeatureViews(torch.randn(6, 32), torch.randn(6, 2, 32)),
                tokens=tokens)
    method.learn(step)
    blocks, head = method.stage1[0]
    assert head.shape == (3, 32) and set(blocks) == {k for k in backbone.model.blocks[1:].state_dict()}
    tail, _ = method._model(0)
    fresh = build_backbone(spec.backbone, spec.config["backbone"], (8, 8, 3))
    assert len(fresh.model.blocks) == 2
    # the last block was trained; the shared backbone (prefix, norm, head) is untouched
    assert not torch.equal(tail.blocks[0].mlp.fc1.weight, fresh.model.blocks[1].mlp.fc1.weight)
    for (name, p), q in zip(backbone.model.named_parameters(), fresh.model.parameters()):
        torch.testing.assert_close(p, q, msg=name)


def test_joint_unfrozen_stage2_starts_fresh_and_labels_each_steps_images_with_its_own_stage1_pair(monkeypatch):
    """Step 2 at step 1: a fresh copy of the pre-trained tail and a head initialised from the stage-1
    heads, trained on zipped batches of both steps' tokens, each step's rows labelled by its own
    stage-1 (tail, head) pair inside its own class range, on the same prefix tokens."""
    from bench.features.backbones import build_backbone
    from bench.methods.joint_unfrozen import JointUnfrozen
    from bench.methods.tails import Tail

    (spec,) = tiny_specs(methods=["Joint (unfrozen)"], backbone="timm:vit_tiny_patch16_224",
                         **{"backbone.kwargs.depth": 2})
    backbone = build_backbone(spec.backbone, spec.config["backbone"], (8, 8, 3))
    method = JointUnfrozen(32, 0, **{**spec.config["method"], "stage2_epochs": 2, "stage2_batch_size": 10})
    method.bind(backbone)
    past, prefix = _tokens_of(backbone, spec, method.first_trainable, lambda y: y < 3)  # 36 images each
    current, _ = _tokens_of(backbone, spec, method.first_trainable, lambda y: (y >= 3) & (y < 6))
    current.prefix = past.prefix = prefix
    # stage-1 pairs that disagree with the pre-trained tail, so a step 2 that started from one of
    # them instead of a fresh copy would show
    for n in (3, 3):
        trained = Tail(backbone, 1)
        torch.nn.init.normal_(trained.blocks[0].mlp.fc2.weight, std=1.0)
        method.stage1.append((trained.trainable_state(), torch.randn(n, 32)))
    initial = []
    real_train = __import__("bench.methods.joint_unfrozen", fromlist=["x"]).train_epochs
    monkeypatch.setattr("bench.methods.joint_unfrozen.train_epochs",
                        lambda params, *a, **k: initial.extend(p.detach().clone() for p in params) or
                        real_train(params, *a, **k))
    calls = []
    real_loss = __import__("bench.methods.joint_unfrozen", fromlist=["x"]).hard_cross_entropy
    monkeypatch.setattr("bench.methods.joint_unfrozen.hard_cross_entropy",
                        lambda logits, y, t: calls.append((logits.shape, y.clone())) or real_loss(logits, y, t))
    step = Step(index=1, n_classes=3, offset=3, train=FeatureViews(torch.randn(36, 32), torch.randn(36, 2, 32)),
                tokens=current, past_tokens=[past])
    before = prefix.calls
    blocks, head = method._stage2(step)
    assert head.shape == (6, 32)
    # the student starts from a fresh copy of the pre-trained last block and the stage-1 heads
    pretrained = list(backbone.model.blocks[1].parameters())
    assert len(initial) == len(pretrained) + 1
    for start, weight in zip(initial, pretrained):
        torch.testing.assert_close(start, weight)
    torch.testing.assert_close(initial[-1], torch.cat([w for _, w in method.stage1]))
    assert not torch.equal(blocks["1.mlp.fc2.weight"], backbone.model.blocks[1].mlp.fc2.weight)  # it trained
    # ceil(36/10) = 4 iterations per epoch, 2 epochs; each: 2 views × 10 images × 2 steps
    # (the last, partial batch: 2 views × 6 × 2)
    assert [shape[0] for shape, _ in calls] == [40, 40, 40, 24] * 2
    for shape, y in calls:
        half = shape[0] // 2
        assert ((y[:half] >= 0) & (y[:half] < 3)).all() and ((y[half:] >= 3) & (y[half:] < 6)).all()
    # the prefix ran once per view and step of every batch: the two teachers and the student share it
    assert prefix.calls - before == 8 * 2 * 2


def test_the_paper_grids_run_the_configuration_that_produced_the_tables():
    """The paper's tables came from the authors' scripts: the grids that reproduce them run `code` (and
    Tab. 3's `no_cosnorm`, a change to `code`), with the scripts' values (review of issue 20)."""
    from bench.config.grids import expand, load_grid

    for name in ("paper", "full"):
        specs = expand(load_grid(name))
        assert {s.preset for s in specs} == {"code", "no_cosnorm"}, name
    by = {(s.method, s.preset, s.dataset, s.split): s.config["method"] for s in expand(load_grid("paper"))}
    ewc = by[("EwC", "code", "cifar10", "2-step")]
    assert (ewc["ewc_lambda"], ewc["swap_reduction"], ewc["weight_decay"]) == (10000.0, "mean", 5e-5)
    assert by[("LwF", "code", "cifar100", "5-step")]["kd_direction"] == "reversed"
    der = {key: by[("DER", "code", *key)] for key in [("cifar10", "5-step"), ("tinyimagenet", "5-step"),
                                                      ("cub200", "2-step")]}
    assert [(d["buffer_size"], d["warmup_epochs"], d["epochs"], d["batch_size"]) for d in der.values()] ==\
        [(200, 50, 50, 128), (200, 35, 35, 256), (500, 80, 80, 128)]  # scripts_il_der/DER_*.sh
    assert by[("ResTune", "code", "cifar10", "2-step")]["swap_reduction"] == "mean"
    assert by[("Baseline++", "code", "cifar10", "2-step")]["replay_per_class"] == 200
    assert by[("Baseline++", "no_cosnorm", "cifar10", "2-step")]["ktrfr_epochs"] == 100  # a variant of `code`
    assert by[("K-means", "code", "cifar10", "2-step")]["init"] == "random"


def test_equations_is_the_papers_text_and_code_the_default():
    from bench.config.spec import parse_method

    assert parse_method("EwC") == ("EwC", "code")
    equations, _ = load_preset("EwC", "equations")
    assert (equations["ewc_lambda"], equations["swap_reduction"], equations["weight_decay"]) == (8000.0, "sum", 1e-4)
    _, der = load_preset("DER", "equations")
    assert der["cifar10/5-step"] == {"warmup_epochs": 50, "epochs": 50, "batch_size": 128}  # the paper's buffer of 500


def test_the_epoch_loop_records_its_losses_with_the_step_in_progress_only():
    import torch

    from bench.methods.loop import train_epochs
    from bench.protocol.step import epochs_recorded

    w = torch.nn.Parameter(torch.tensor([2.0]))
    hp = {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "eta_min": 0.0}

    def run() -> list[float]:
        return train_epochs([w], hp, epochs=3, sizes=[4], batch_size=2, gen=torch.Generator().manual_seed(0),
                            loss_of=lambda index: (w ** 2).sum())

    with epochs_recorded() as kept:
        first, second = run(), run()
    assert kept == [first, second] and len(first) == 3 and first[0] > first[-1]  # one list per loop, as returned
    assert kept.units == ["epoch", "epoch"]  # what one value is the mean over (VB-CGCD's: an SVI step)
    run()  # outside a step: nothing is kept anywhere
    assert len(kept) == 2

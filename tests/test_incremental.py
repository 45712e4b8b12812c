"""EwC, LwF and DER (methods/finetuned.py and one file each): what each adds, against hand computations
on tiny models, and every tail method end to end with a kill after step 1 that resumes to the same state."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

import bench.runs.checkpoint as checkpoint
import bench.protocol.class_incd as class_incd
from bench.protocol.runner import execute
from bench.runs.rundir import METRICS
from bench.methods.base import Step
from bench.methods.buffers import ReservoirBuffer
from bench.methods.der import DER
from bench.methods.ewc import EwC, ewc_penalty, fisher_diagonal
from bench.methods.lwf import LwF, distillation
from bench.registries import METHODS
from tests.helpers import killed_then_resumed, tiny_specs
from tests.test_pins import digest

# the class-iNCD methods that train tails (the mixed setting's resume their runs under `bench check`'s kit)
TAIL_METHODS = sorted(name for name, cls in METHODS.module_dict.items()
                      if cls.runs_on.inputs == "tokens" and "incd" in cls.runs_on.settings)
TINY_VIT = {"backbone.kwargs.depth": 2, "method.warmup_epochs": 2, "method.epochs": 2, "method.stage1_epochs": 2,
            "method.stage2_epochs": 2, "method.batch_size": 16, "method.buffer_size": 8, "method.ssl_epochs": 2,
            "method.ssl_batch_size": 16, "method.proj_hidden_dim": 16, "method.pred_hidden_dim": 16,
            "method.distill_hidden_dim": 16, "method.output_dim": 8}


def tiny_vit_specs(name: str, splits=("2-step",), preset: str = "equations", **extra):
    """The smoke grid's tiny ViT, short steps; only the method keys `name` has."""
    from bench.config.presets import load_preset

    known = load_preset(name, preset)[0]
    options = {k: v for k, v in {**TINY_VIT, **extra}.items() if not k.startswith("method.") or k[7:] in known}
    return tiny_specs(methods=[f"{name}:{preset}"], backbone="timm:vit_tiny_patch16_224", splits=splits, **options)


class Scale(nn.Module):
    """A one-parameter stand-in for a tail: x ↦ w·x."""

    def __init__(self, w: float) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w * x


def identity_head() -> nn.Linear:
    head = nn.Linear(2, 2, bias=False)
    head.weight.data.copy_(torch.eye(2))
    return head.requires_grad_(False)


# --- EwC ---------------------------------------------------------------------------------------------

def test_fisher_by_hand():
    """logits = w·x with w = 1. For x = (1, 0) the argmax is 0 and dCE/dw = p_0 − 1 = −1/(1 + e);
    for x = (0, 2) it is 1 and dCE/dw = 2 (p_1 − 1) = −2/(1 + e²)."""
    g1, g2 = -1 / (1 + math.e), -2 / (1 + math.e ** 2)
    x1, x2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    # one image per batch: Σ grad² · 1, divided by ⌊2/1⌋·1
    f = fisher_diagonal(Scale(1.0), identity_head(), [x1, x2], batch_size=1)
    assert f["w"].item() == pytest.approx((g1 ** 2 + g2 ** 2) / 2, rel=1e-5)
    # both in one batch: the batch gradient is the mean, times the batch size, over ⌊2/2⌋·2
    f = fisher_diagonal(Scale(1.0), identity_head(), [torch.cat([x1, x2])], batch_size=2)
    assert f["w"].item() == pytest.approx(((g1 + g2) / 2) ** 2 * 2 / 2, rel=1e-5)
    # three images in batches of 2 and 1: divided by ⌊3/2⌋·2 = 2, as the code (not by 3)
    f = fisher_diagonal(Scale(1.0), identity_head(), [torch.cat([x1, x2]), x1], batch_size=2)
    assert f["w"].item() == pytest.approx((((g1 + g2) / 2) ** 2 * 2 + g1 ** 2) / 2, rel=1e-5)


def test_the_penalty_by_hand_and_only_on_the_tail():
    tail, head = Scale(3.0), nn.Linear(2, 2)
    penalty = ewc_penalty(tail, {"w": torch.tensor(2.0)}, {"w": torch.tensor(1.0)}, strength=10.0)
    assert penalty.item() == pytest.approx(10 / 2 * 2 * (3 - 1) ** 2)
    penalty.backward()
    assert tail.w.grad.item() == pytest.approx(10 * 2 * (3 - 1)) and head.weight.grad is None
    method = EwC(2, 0, ewc_lambda=10.0, fisher_alpha=0.5, unfreeze=1)
    assert method.regulariser(None, None, torch.zeros(1, 2), None).item() == 0.0  # step 0: no penalty


def test_the_fisher_is_fused_and_the_anchor_overwritten(monkeypatch):
    method = EwC(2, 0, ewc_lambda=10.0, fisher_alpha=0.5, batch_size=4, unfreeze=1)
    method._tail, method.heads = Scale(1.0), [identity_head(), identity_head()]
    news = iter([{"w": torch.tensor(4.0)}, {"w": torch.tensor(2.0)}])
    monkeypatch.setattr("bench.methods.ewc.fisher_diagonal", lambda *a: next(news))
    step = Step(index=0, n_classes=2, offset=0, train=None, tokens=type("T", (), {"batches": lambda self, b: []})())
    method.end_step(step)
    assert method.fisher["w"].item() == 4.0 and method.anchor["w"].item() == 1.0
    with torch.no_grad():
        method._tail.w.fill_(5.0)
    method.end_step(Step(index=1, n_classes=2, offset=2, train=None, tokens=step.tokens))
    assert method.fisher["w"].item() == 0.5 * 4.0 + 0.5 * 2.0  # α F_old + (1 − α) F_new
    assert method.anchor["w"].item() == 5.0  # one anchor, overwritten


# --- LwF ---------------------------------------------------------------------------------------------

def _tempered(logits, t):
    p = [math.exp(v) for v in logits]
    p = [v / sum(p) for v in p]
    q = [v ** (1 / t) for v in p]
    return [v / sum(q) for v in q]


@pytest.mark.parametrize("direction", ["standard", "reversed"])
def test_distillation_by_hand(direction):
    student, teacher, eps = [2.0, 0.0], [0.5, 0.0], 1e-5
    p_new, p_old = _tempered(student, 2), _tempered(teacher, 2)
    weights, logged = (p_old, p_new) if direction == "standard" else (p_new, p_old)
    smoothed = [v + eps / 2 for v in logged]
    smoothed = [v / sum(smoothed) for v in smoothed]
    expected = -sum(w * math.log(s) for w, s in zip(weights, smoothed))
    got = distillation(torch.tensor([student]), torch.tensor([teacher]), 2.0, direction)
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_distillation_direction_decides_where_the_student_moves():
    """The student (0.9 on class 0, tempered) is more confident than the teacher (0.6): the standard
    direction pulls it back towards the teacher; the authors' reversed one pushes it further to the
    teacher's mode."""
    teacher = torch.tensor([[0.8, 0.0]])
    for direction, sign in (("standard", 1.0), ("reversed", -1.0)):
        student = torch.tensor([[3.0, 0.0]], requires_grad=True)
        distillation(student, teacher, 2.0, direction).backward()
        assert torch.sign(student.grad[0, 0]).item() == sign, direction


# --- DER ---------------------------------------------------------------------------------------------

def test_reservoir_fills_in_order_then_keeps_a_uniform_sample():
    buffer = ReservoirBuffer(3)
    buffer.add(torch.arange(3).view(3, 1), torch.zeros(3, 1), torch.Generator())
    assert buffer.images.view(-1).tolist() == [0, 1, 2] and len(buffer) == 3
    kept = torch.zeros(20)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3000):
        buffer = ReservoirBuffer(5)
        buffer.add(torch.arange(20).view(20, 1), torch.arange(20.0).view(20, 1), gen)
        assert torch.equal(buffer.images.view(-1).float(), buffer.logits.view(-1))  # pairs stay pairs
        kept[buffer.images.view(-1)] += 1
    assert ((kept / 3000 - 5 / 20).abs() < 0.04).all()  # each of the 20 kept with probability 1/4
    images, logits = buffer.sample(3, gen)
    assert len(set(images.view(-1).tolist())) == 3 and torch.equal(images.view(-1).float(), logits.view(-1))


def test_replay_loss_by_hand():
    method = DER(2, 0, der_alpha=0.5, batch_size=2, unfreeze=1)
    method._tail, method.heads = Scale(1.0), [identity_head(), identity_head(), identity_head()]
    for target in (0.0, 1.0):
        buffer = ReservoirBuffer(2)
        buffer.add(torch.zeros(2, 1, 1, 1, dtype=torch.uint8), torch.full((2, 2), target), torch.Generator())
        method.buffers.append(buffer)
    tokens = type("T", (), {"views_of": lambda self, raw, gen: torch.ones(len(raw), 2)})()
    step = Step(index=2, n_classes=2, offset=4, train=None, tokens=tokens)
    loss = method.regulariser(step, None, torch.zeros(1, 2), torch.Generator())
    # head(tail(x)) = (1, 1) against stored (0, 0) and (1, 1): 0.5 · (MSE 1 + MSE 0)
    assert loss.item() == pytest.approx(0.5 * (1.0 + 0.0))


# --- the three on a tiny ViT -------------------------------------------------------------------------

def _two_steps(name, monkeypatch=None):
    """The method after learning two steps of the smoke grid's tiny ViT on synthetic images, and the
    per-step heads as they were after each step."""
    from bench.features.backbones import build_backbone
    from bench.data import build_dataset
    from bench.features.views import Encoder
    from bench.features.tokens import LiveTokens, Prefix

    (spec,) = tiny_vit_specs(name)
    backbone = build_backbone(spec.backbone, spec.config["backbone"], (8, 8, 3))
    method = METHODS.get(name)(backbone.feature_dim, 0, **spec.config["method"])
    method.bind(backbone)
    data = build_dataset("synthetic", spec.config["dataset"])
    prefix = Prefix(backbone, method.first_trainable)
    source = LiveTokens(data.train, Encoder(backbone, data, "cpu"), prefix)
    heads_after, calls = [], []
    for t in range(2):
        rows = torch.nonzero(torch.as_tensor(data.train.labels) // 3 == t).view(-1).numpy()
        before = prefix.calls
        method.learn(Step(index=t, n_classes=3, offset=3 * t, train=None, tokens=source.subset(rows), last=t == 1))
        calls.append(prefix.calls - before)
        heads_after.append([h.weight.detach().clone() for h in method.heads])
    return method, heads_after, calls, spec


def test_ewc_keeps_old_heads_fixed_lwf_and_der_train_them():
    for name, moves in (("EwC", False), ("LwF", True), ("DER", True)):
        method, heads_after, _, _ = _two_steps(name)
        assert torch.equal(heads_after[0][0], heads_after[1][0]) is not moves, name


def test_lwf_runs_the_prefix_once_per_view_though_a_teacher_reads_it():
    method, _, calls, spec = _two_steps("LwF")
    hp = spec.config["method"]
    iterations = -(-36 // hp["batch_size"])  # 36 images per step
    assert method.teacher is not None  # step 1 distilled from a teacher
    assert calls == [2 * iterations * (hp["warmup_epochs"] + hp["epochs"])] * 2


def test_der_keeps_one_buffer_per_step_but_the_last_of_that_steps_images():
    method, _, _, spec = _two_steps("DER")
    assert len(method.buffers) == 1 and len(method.buffers[0]) == spec.config["method"]["buffer_size"]
    from bench.data import build_dataset

    data = build_dataset("synthetic", spec.config["dataset"])
    step0 = {bytes(img) for img in data.train.images[data.train.labels < 3]}
    assert all(bytes(img.numpy()) in step0 for img in method.buffers[0].images)  # un-augmented, step 0's own


@pytest.mark.parametrize("entry", TAIL_METHODS + ["FRoST:sinkhorn", "EwC on the token bank", "DER on the token bank"])
def test_every_tail_method_resumes_after_step_1_to_the_same_state(entry, tmp_path, monkeypatch):
    """A run killed after step 1 (of 5) resumes from its checkpoint and ends with the same metrics
    and the same trained state (tails, heads, Fisher, buffers, teachers, branches, prototypes) as an
    uninterrupted one."""
    name, _, bank = entry.partition(" on the ")
    method, _, preset = name.partition(":")
    extra = {"features.tokens": "bank"} if bank else {}
    (spec,) = tiny_vit_specs(method, splits=["5-step"], preset=preset or "equations", **{"dataset.num_classes": 10}, **extra)
    states = {"whole": [], "resumed": []}
    real_save = checkpoint.save_checkpoint
    target = "whole"
    monkeypatch.setattr(checkpoint, "save_checkpoint",
                        lambda path, state: states[target].append(digest(state["method"])) or real_save(path, state))
    whole = pd.read_parquet(execute(spec, tmp_path / "whole") / METRICS)

    target = "resumed"  # killed after step 1 of 5, resumed after step 0
    resumed = pd.read_parquet(killed_then_resumed(spec, tmp_path / "resumed", METHODS.get(method), 1, monkeypatch)
                              / METRICS)
    keys = ["step", "group", "flavour", "metric"]
    pd.testing.assert_frame_equal(whole.sort_values(keys)[keys + ["value"]].reset_index(drop=True),
                                  resumed.sort_values(keys)[keys + ["value"]].reset_index(drop=True))
    assert states["whole"][-1] == states["resumed"][-1]


# --- a weight and the loss it balances are scaled together -------------------------------------------

def test_clustering_scale_by_hand():
    from bench.methods.blocks import clustering_scale

    assert clustering_scale({"swap_reduction": "mean"}) == 1.0
    assert clustering_scale({"swap_reduction": "sum"}) == 2.0  # the two views' means added (Eq. 1)
    assert clustering_scale({"swap_reduction": "sum"}, heads=2) == 4.0  # ResTune's mixed and residual heads
    with pytest.raises(ValueError, match="choose from sum, mean"):
        clustering_scale({"swap_reduction": "total"})


@pytest.mark.parametrize("reduction, expected", [("mean", 1.0 + 3.0), ("sum", 2.0 + 2 * 3.0)])
def test_a_summed_clustering_loss_takes_its_regulariser_with_it(reduction, expected, tmp_path, monkeypatch):
    """The main stage's objective is the swapped loss plus the regulariser, whose weight was tuned
    against the code's mean over the two views: summing the views (Eq. 1) doubles both, so the
    regulariser keeps its ratio to the clustering loss (with a swapped loss of 1 per mean and a
    regulariser of 3: 1 + 3 under `mean`, 2 + 6 under `sum`; the review found 2 + 3)."""
    import bench.methods.finetuned as finetuned

    seen = []

    def first_batch_only(parameters, hp, *, loss_of, sizes, **_):
        seen.append(float(loss_of([torch.arange(min(4, sizes[0]))])))
        return []

    monkeypatch.setattr(finetuned, "train_epochs", first_batch_only)
    monkeypatch.setattr(finetuned, "swapped_loss",
                        lambda a, b, hp: a.new_tensor(2.0 if hp["swap_reduction"] == "sum" else 1.0))
    monkeypatch.setattr(LwF, "regulariser", lambda self, step, tokens1, features1, gen: features1.new_tensor(3.0))
    (spec,) = tiny_vit_specs("LwF", preset="code", **{"method.swap_reduction": reduction})
    execute(spec, tmp_path)
    main_stage = seen[1::2]  # each step: warm-up, then main
    assert main_stage == [pytest.approx(expected)] * 2


def test_a_fine_tuned_methods_refitted_maps_are_read_through_the_moved_encoder_and_recompute(tmp_path, monkeypatch):
    """EwC fine-tunes its last block, so after step 1 task 0's head reads other features than when its
    map was frozen: the runner reads task 0's head on its mapping images again after step 1 has
    learned (and stores it), the run reports A and F in `wo_refit`, and the stored predictions
    recompute every flavour's rows."""
    import numpy as np

    from bench.protocol.recompute import replay
    from bench.runs.predictions import PREDICTIONS, Keys
    from bench.methods.ewc import EwC

    events = []
    learn, read = EwC.learn, class_incd._task_predictions
    monkeypatch.setattr(EwC, "learn", lambda self, step: events.append(f"learn {step.index}") or learn(self, step))
    monkeypatch.setattr(class_incd, "_task_predictions",
                        lambda method, inputs, task, index, *rest: events.append(f"read {task}")
                        or read(method, inputs, task, index, *rest))
    (spec,) = tiny_vit_specs("EwC", preset="code")
    out = execute(spec, tmp_path)
    assert events == ["learn 0", "read 0", "learn 1", "read 0", "read 1"]
    frame = pd.read_parquet(out / METRICS)
    assert set(frame["reported_A"]) == {"wo_refit/A"} and set(frame["reported_F"]) == {"wo_refit/F"}
    with np.load(out / PREDICTIONS) as stored:
        assert len(stored[Keys.refit_pred(1, 0)]) == len(stored[Keys.val_pred(0)])
        assert Keys.refit_pred(0, 0) not in stored
    now = {(r.step, r.group, r.flavour, r.metric): r.value for r in replay(out / PREDICTIONS)}
    recorded = frame.set_index(["step", "group", "flavour", "metric"])["value"].to_dict()
    assert {k for k in recorded if k[2] == "wo_refit"} and now.keys() == recorded.keys()
    assert all(now[k] == pytest.approx(recorded[k]) for k in recorded)

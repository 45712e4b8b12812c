"""ResTune and FRoST (methods/restune.py, methods/frost.py, methods/rankstats.py): their pieces against
hand computations on tiny models, and what each keeps from step to step on the smoke grid's tiny ViT.
Resuming after a kill is `test_incremental`'s test over every tail method."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.methods.blocks import CosineHead, PrototypeStats
from bench.methods.frost import feature_distance
from bench.methods.loop import step_lr, train_epochs
from bench.methods.rankstats import pairwise_bce, rank_pair_targets, sigmoid_rampup
from bench.methods.restune import BRANCH_NORM_EPS, restune_kd
from bench.registries import METHODS
from tests.test_incremental import tiny_vit_specs


def bound(name: str, preset: str = "equations", **extra):
    """A method bound to the smoke grid's tiny (2-block, random) ViT, and that backbone."""
    from bench.features.backbones import build_backbone

    (spec,) = tiny_vit_specs(name, preset=preset, **extra)
    backbone = build_backbone(spec.backbone, spec.config["backbone"], (8, 8, 3))
    method = METHODS.get(name)(backbone.feature_dim, 0, **spec.config["method"])
    method.bind(backbone)
    return method, backbone, spec


def learn_steps(method, spec, steps: int = 2, start: int = 0):
    """Learn steps `start`..`steps`−1 (3 classes each) of the synthetic images; returns every step's token source."""
    from bench.data import build_dataset
    from bench.features.views import Encoder
    from bench.features.tokens import LiveTokens, Prefix
    from bench.methods.base import Step

    data = build_dataset("synthetic", spec.config["dataset"])
    source = LiveTokens(data.train, Encoder(method.backbone, data, "cpu"), Prefix(method.backbone, method.first_trainable))
    sources = [source.subset(torch.nonzero(torch.as_tensor(data.train.labels) // 3 == t).view(-1).numpy())
               for t in range(steps)]
    for t in range(start, steps):
        method.learn(Step(index=t, n_classes=3, offset=3 * t, train=None, tokens=sources[t], last=t == steps - 1))
    return sources


# --- ResTune -----------------------------------------------------------------------------------------

def test_a_branch_is_the_pretrained_last_block_with_its_own_norm_and_the_mix_adds_them():
    """After two steps of no training: the base tail is the backbone's own last two blocks and each
    branch the pre-trained last block plus a norm of eps 1e-5 on the tokens entering the last block;
    mix_s = base + Σ_{i≤s} branch_i, which the unified head reads step by step."""
    method, backbone, spec = bound("ResTune")
    method.hparams.update(warmup_epochs=0, epochs=0)  # below what a config may ask for: nothing trains
    sources = learn_steps(method, spec, steps=3)
    assert method.first_trainable == 0 and len(method.encoder.branches) == 2  # unfreeze=2 of 2 blocks; steps 1, 2
    assert method.heads_res[0] is None and all(h is not None for h in method.heads_res[1:])
    vit = backbone.model
    tokens = sources[0].plain(torch.arange(4).numpy())
    with torch.no_grad():
        entry = vit.blocks[0](tokens)  # the tokens entering the last block
        base = vit.norm(vit.blocks[1](entry))[:, 0]
        norm = nn.LayerNorm(vit.norm.normalized_shape, eps=1e-5)
        norm.load_state_dict(vit.norm.state_dict())
        branch = norm(vit.blocks[1](entry))[:, 0]  # both branches are still the pre-trained block
        mixes, residuals = method.encoder(tokens)
    assert BRANCH_NORM_EPS == 1e-5 and vit.norm.eps == 1e-6
    assert all(b.norm.eps == 1e-5 for b in method.encoder.branches)
    torch.testing.assert_close(mixes[0], base, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(residuals[1], branch, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mixes[2], base + 2 * branch, rtol=1e-5, atol=1e-5)
    expected = torch.cat([h(m) for h, m in zip(method.heads_mix, [base, base + branch, base + 2 * branch])], dim=1)
    torch.testing.assert_close(method.logits(tokens), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(method.task_logits(tokens, 1), method.heads_mix[1](base + branch), rtol=1e-5, atol=1e-5)


def test_restune_kd_by_hand_and_only_the_encoders_get_its_gradient():
    head = CosineHead(2, 2, True)
    head.weight.data.copy_(torch.eye(2))
    head.requires_grad_(False).eval()
    teacher = [torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])]
    student = [torch.tensor([[1.0, 1.0]], requires_grad=True), torch.tensor([[2.0, 0.0]], requires_grad=True)]

    def ce(t, s):  # softmax targets and log-softmax of cosines / T, by hand
        tq = [math.exp(v / 2) for v in t]
        sq = [math.exp(v / 2) for v in s]
        return -sum(a / sum(tq) * math.log(b / sum(sq)) for a, b in zip(tq, sq))

    r = 1 / math.sqrt(2)
    expected = ce([1, 0], [r, r]) + 0.5 * ce([0, 1], [1, 0])  # w_0 = 1, w_1 = β = 0.5
    loss = restune_kd(student, teacher, [head, head], temperature=2.0, weight=0.5)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.backward()
    assert head.weight.grad is None and student[1].grad.abs().sum() > 0


def test_restune_trains_base_and_branches_never_the_old_heads():
    method, _, spec = bound("ResTune")
    learn_steps(method, spec, steps=1)
    head0, base0 = method.heads_mix[0].weight.detach().clone(), method.encoder.base.trainable_state()
    learn_steps(method, spec, steps=2, start=1)
    assert torch.equal(method.heads_mix[0].weight, head0)  # old heads are frozen
    after = method.encoder.base.trainable_state()
    assert any(not torch.equal(after[k], base0[k]) for k in base0)  # KD and the mixed loss move the base


# --- rank statistics -----------------------------------------------------------------------------------

def test_rank_pair_targets_by_hand():
    features = torch.tensor([[5.0, 4.0, 0.0, 1.0],   # top-2 {0, 1}
                             [4.0, 5.0, 1.0, 0.0],   # top-2 {0, 1}: same set, another order
                             [0.0, 5.0, 4.0, 1.0]])  # top-2 {1, 2}
    targets = rank_pair_targets(features, topk=2)
    assert targets.tolist() == [[1, 1, -1], [1, 1, -1], [-1, -1, 1]]
    assert rank_pair_targets(features, topk=4).eq(1).all()  # every set of all four dimensions is the same


def test_pairwise_bce_by_hand():
    p1 = torch.tensor([[0.8, 0.2], [0.3, 0.7]])
    p2 = torch.tensor([[0.6, 0.4], [0.1, 0.9]])
    targets = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    agree = [[0.8 * 0.6 + 0.2 * 0.4, 0.8 * 0.1 + 0.2 * 0.9], [0.3 * 0.6 + 0.7 * 0.4, 0.3 * 0.1 + 0.7 * 0.9]]
    expected = -(math.log(agree[0][0] + 1e-7) + math.log(1 - agree[0][1] + 1e-7)
                 + math.log(1 - agree[1][0] + 1e-7) + math.log(agree[1][1] + 1e-7)) / 4
    assert pairwise_bce(p1, p2, targets).item() == pytest.approx(expected, rel=1e-6)


def test_sigmoid_rampup_per_epoch():
    assert sigmoid_rampup(0, 50) == pytest.approx(math.exp(-5))
    assert sigmoid_rampup(25, 50) == pytest.approx(math.exp(-5 * 0.25))
    assert sigmoid_rampup(50, 50) == sigmoid_rampup(120, 50) == 1.0
    assert sigmoid_rampup(3, 0) == 1.0


def test_step_lr_drops_at_the_170th_epoch_and_the_loop_applies_it():
    assert [step_lr(e, 0.1, 170, 0.1) for e in (0, 168)] == [0.1, 0.1]
    assert step_lr(169, 0.1, 170, 0.1) == pytest.approx(0.01)
    assert step_lr(339, 0.1, 170, 0.1) == pytest.approx(0.001)
    # loss = w with SGD (no momentum, no decay): each epoch's one step moves w by −lr(epoch)
    w = nn.Parameter(torch.zeros(()))
    seen = []
    hp = dict(lr=0.1, momentum=0.0, weight_decay=0.0, eta_min=0.0)
    train_epochs([w], hp, epochs=4, sizes=[1], batch_size=1, gen=torch.Generator(), loss_of=lambda index: w * 1.0,
                 lr_at=lambda e: step_lr(e, 0.1, 2, 0.5), on_epoch=lambda e: seen.append(w.item()))
    moves = [a - b for a, b in zip(seen, seen[1:] + [w.item()])]
    assert moves == pytest.approx([0.1, 0.05, 0.05, 0.025])


# --- FRoST ---------------------------------------------------------------------------------------------

def test_feature_distance_by_hand():
    old, new = torch.tensor([[3.0, 0.0], [0.0, 4.0]]), torch.tensor([[0.0, 3.0], [4.0, 0.0]])
    # vec(old)/5 = (0.6, 0, 0, 0.8), vec(new)/5 = (0, 0.6, 0.8, 0): unsquared distance √2
    assert feature_distance(old, new).item() == pytest.approx(math.sqrt(2))
    assert feature_distance(old, 7 * old).item() == pytest.approx(0.0, abs=1e-6)  # the whole batch's scale is free


@pytest.mark.parametrize("preset", ["equations", "sinkhorn"])
def test_frost_continues_the_backbone_rebuilds_the_joint_head_and_replays_baseline_pps_prototypes(preset, monkeypatch):
    method, _, spec = bound("FRoST", preset=preset, **{"method.epochs": 2})
    assert isinstance(method.prototypes, PrototypeStats)
    added, sampled = [], []
    real_add, real_sample = PrototypeStats.add_step, PrototypeStats.sample
    monkeypatch.setattr(PrototypeStats, "add_step",
                        lambda self, f, y, n, unbiased: added.append((f, y, n, unbiased)) or real_add(self, f, y, n, unbiased))
    monkeypatch.setattr(PrototypeStats, "sample", lambda self, *a: sampled.append(a) or real_sample(self, *a))
    starts = []
    real_train = train_epochs

    def spy(parameters, hp, **kw):
        parameters = list(parameters)
        starts.append([p.detach().clone() for p in parameters])
        return real_train(parameters, hp, **kw)

    monkeypatch.setattr("bench.methods.frost.train_epochs", spy)
    sources = learn_steps(method, spec, steps=2)
    tail0, head0 = method.pairs[0]
    # step 1 starts from step 0's tail, and its joint head from the stored h^0 and the new head's init
    n_tail = len(tail0)
    assert all(torch.equal(a, b) for a, b in zip(starts[1][:n_tail], tail0.values()))
    new_head, joint = starts[1][n_tail], starts[1][n_tail + 1]
    assert torch.equal(joint[:3], head0) and torch.equal(joint[3:], new_head)
    # the prototypes of each step: its plain images through its own final (tail, head), offset labels
    assert [n for _, _, n, _ in added] == [3, 3]
    assert all(unbiased == (preset == "sinkhorn") for *_, unbiased in added)  # the code's n − 1 in its variants
    tail, head = method._model(0)
    with torch.no_grad():
        features = torch.cat([tail(x) for x in sources[0].batches()])
    torch.testing.assert_close(added[0][0], features)
    assert torch.equal(added[0][1], head(features).argmax(1)) and added[1][1].min() >= 3
    assert sampled and all(shared == (preset == "sinkhorn") for _, shared, _ in sampled)  # step 1 replays
    assert method.joint.shape == (6, method.feature_dim)


def test_frost_inference_is_the_joint_head_and_task_heads_are_the_stored_pairs():
    method, _, spec = bound("FRoST")
    sources = learn_steps(method, spec, steps=2)
    tokens = sources[0].plain(torch.arange(5).numpy())
    joint_tail, joint = method._model("joint")
    tail0, head0 = method._model(0)
    with torch.no_grad():
        torch.testing.assert_close(method.logits(tokens), joint(joint_tail(tokens)))
        torch.testing.assert_close(method.task_logits(tokens, 0), head0(tail0(tokens)))
    assert not torch.equal(method.pairs[0][0][next(iter(method.pairs[0][0]))],
                           method.pairs[1][0][next(iter(method.pairs[1][0]))])  # step 1 moved the backbone


def test_frost_step0_uses_the_task_head_and_kd_reads_the_previous_backbone(monkeypatch):
    method, _, spec = bound("FRoST", **{"method.epochs": 1})
    distances = []
    real = feature_distance
    monkeypatch.setattr("bench.methods.frost.feature_distance", lambda a, b: distances.append((a, b)) or real(a, b))
    learn_steps(method, spec, steps=1)
    assert method.joint is None and not distances  # step 0: no joint head, no KD
    torch.testing.assert_close(method.logits(torch.zeros(1, 5, 32)), method.task_logits(torch.zeros(1, 5, 32), 0))
    learn_steps(method, spec, steps=2, start=1)
    old, new = distances[0]
    assert not old.requires_grad and new.requires_grad  # the previous backbone is frozen; the student learns

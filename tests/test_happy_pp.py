"""Happy++ (methods/happy_pp.py, methods/happy_pp_parts.py): each piece against a hand-computed case on tiny tensors,
the SWA rate against torch's own schedulers, each switch changing what it learns in the mixed setting on a tiny ViT,
its defaults giving Happy, and its LoRA (methods/lora.py) by hand and in a run."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from bench.methods.gcd_losses import NormedHead, info_nce
from bench.methods.gcd_objective import Past, objective
from bench.methods.happy_parts import soft_entropy
from bench.methods.happy_pp_parts import (WeightAverage, confident_distil, confident_ratio, confident_targets,
                                          old_rows_l2, smooth_max, swa_lr)
from bench.errors import BenchError
from bench.methods.lora import LoRALinear, add_lora, terms_in
from bench.methods.loop import cosine_after_epoch
from tests.test_continual_gcd import losses, run
from tests.test_happy_parts import WEIGHTS, batch


def test_the_confident_ratio_ramps_as_np_linspace():
    assert [confident_ratio(e, 3) for e in range(5)] == [0.0, 0.5, 1.0, 1.0, 1.0]
    assert confident_ratio(0, 1) == 0.0 and confident_ratio(1, 1) == 1.0 and confident_ratio(0, 0) == 1.0


def test_confident_targets_make_the_most_confident_rows_one_hot():
    # rows' softmax at τ=1: row 0 is the most confident (top-1/top-2 largest), row 2 the least
    logits = torch.tensor([[3.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 0.1, 0.2]], dtype=torch.float64)
    soft = torch.softmax(logits, dim=1)
    half = confident_targets(logits, 1.0, 0.5)  # ⌊0.5·3⌋ = 1 row
    assert torch.equal(half[0], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(half[1:], soft[1:], rtol=1e-12, atol=0)
    full = confident_targets(logits, 1.0, 1.0)
    assert torch.equal(full, torch.eye(3, dtype=torch.float64)[[0, 0, 2]])
    torch.testing.assert_close(confident_targets(logits, 1.0, 0.0), soft, rtol=1e-12, atol=0)


def test_confident_distil_by_hand():
    a = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 1.0], [0.0, 3.0]], dtype=torch.float64)
    # ratio 1: every target one-hot; a → classes (0, 1), b → (0 on a tie: argmax's first, 1); τ_s = 1
    log_a, log_b = torch.log_softmax(a, 1), torch.log_softmax(b, 1)
    by_hand = (-(log_b[0, 0] + log_b[1, 1]) / 2 - (log_a[0, 0] + log_a[1, 1]) / 2) / 2
    assert math.isclose(float(confident_distil(a, b, 1.0, 1.0, 1.0)), float(by_hand), rel_tol=1e-12)
    # ratio 0: SimGCD's self-distillation, soft targets
    qa, qb = torch.softmax(a, 1), torch.softmax(b, 1)
    soft = (-(qa * log_b).sum(1).mean() - (qb * log_a).sum(1).mean()) / 2
    assert math.isclose(float(confident_distil(a, b, 1.0, 1.0, 0.0)), float(soft), rel_tol=1e-12)


def test_old_rows_l2_by_hand():
    rows = torch.tensor([[3.0, 4.0], [1.0, 0.0], [9.0, 9.0]], dtype=torch.float64)
    previous = torch.tensor([[3.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    raw = (0 + 16 + 1 + 4) / 4
    unit = ((0.6 - 1) ** 2 + 0.8 ** 2 + 1 + 1) / 4  # (0.6, 0.8) against (1, 0); (1, 0) against (0, 1)
    assert math.isclose(float(old_rows_l2(rows, previous)), raw + unit, rel_tol=1e-12)
    assert float(old_rows_l2(rows, rows[:2])) == 0.0  # the third row, new, is not held


def test_smooth_max_by_hand():
    terms = [torch.tensor(1.0, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64)]
    assert math.isclose(float(smooth_max(terms, 0.5)), 0.5 * math.log(math.exp(2) + math.exp(4)), rel_tol=1e-12)
    big = [torch.tensor(800.0, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)]
    assert math.isclose(float(smooth_max(big, 1.0)), 800.0, rel_tol=1e-12)  # no overflow


def test_the_weight_average_by_hand():
    layer = torch.nn.Linear(1, 1, bias=False)
    layer.weight.data.fill_(2.0)
    average = WeightAverage([layer], new=0.5, old=0.25)
    layer.weight.data.fill_(4.0)
    average.update()  # 0.5·4 + 0.25·2
    layer.weight.data.fill_(0.0)
    average.update()  # 0.5·0 + 0.25·2.5
    average.apply()
    assert float(layer.weight.detach()) == 0.625


@pytest.mark.parametrize("epochs", [30, 20])
def test_the_swa_rate_is_torchs_swalr_after_the_cosine(epochs):
    lr = 0.01
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=lr)
    cosine_sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs, eta_min=lr * 1e-3)
    swa_sched = torch.optim.swa_utils.SWALR(opt, anneal_epochs=2, swa_lr=0.5 * lr)
    theirs = []
    for epoch in range(epochs):  # the script's order: train, then step one scheduler or the other
        theirs.append(opt.param_groups[0]["lr"])
        opt.step()
        (swa_sched if epoch > 16 else cosine_sched).step()
    cosine = [cosine_after_epoch(e, epochs, lr, lr * 1e-3) for e in range(epochs)]
    ours = [swa_lr(e, cosine, 0.5 * lr, 17, 2) for e in range(epochs)]
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)
    assert ours[-1] == 0.5 * lr and ours[18] != cosine[18]


def test_happy_pp_at_its_defaults_is_happy(tmp_path):
    happy = losses(run("Happy", tmp_path / "happy"))
    plus = losses(run("Happy++", tmp_path / "plus"))
    assert happy.keys() == plus.keys()
    for key in happy:
        np.testing.assert_array_equal(happy[key], plus[key])


@pytest.mark.parametrize("on", [{"method.protogcd": True, "method.protogcd_ramp_epochs": 1},
                                # the old rows move away from the previous step's only after some steps
                                {"method.old_head_l2_weight": 100.0, "method.lr": 0.5},
                                {"method.stch_mu": 0.5},
                                {"method.ema_new": 0.5, "method.ema_old": 0.5},
                                {"method.swa": True, "method.swa_start": 0, "method.epochs": 3}])
def test_each_switch_changes_what_happy_pp_learns(on, tmp_path):
    longer = {k: v for k, v in on.items() if k in ("method.lr", "method.epochs")}
    plain = losses(run("Happy++", tmp_path / "off", **longer))
    switched = losses(run("Happy++", tmp_path / "on", **on))
    np.testing.assert_array_equal(plain[(0, 0)], switched[(0, 0)])  # the labelled step: Happy's
    assert not np.allclose(plain[(1, 0)], switched[(1, 0)], rtol=1e-6)


def test_a_lora_layer_is_its_base_plus_each_terms_low_rank_product_by_hand():
    base = torch.nn.Linear(3, 2).double()
    layer = LoRALinear(base)
    layer.add_term(2, None, torch.Generator().manual_seed(0))
    layer.add_term(1, 4.0, torch.Generator().manual_seed(1))  # scaling α/r = 4
    first, second = layer.terms
    assert torch.equal(first.b, torch.zeros(2, 2, dtype=torch.float64))  # B starts at zero: nothing changes yet
    bound = 1 / math.sqrt(3)  # Kaiming-uniform with a = √5: U(−1/√in, 1/√in), torch's own linear init
    assert first.a.abs().max() <= bound and first.a.std() > 0
    with torch.no_grad():
        first.b.copy_(torch.tensor([[1.0, 2.0], [0.0, -1.0]]))
        second.b.copy_(torch.tensor([[0.5], [3.0]]))
    x = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    by_hand = base(x) + x @ first.a.T @ first.b.T + 4.0 * (x @ second.a.T @ second.b.T)
    torch.testing.assert_close(layer(x), by_hand, rtol=1e-12, atol=0)
    # only the newest term trains
    assert [p.requires_grad for p in layer.parameters()] == [False, False, False, False, True, True]


def test_add_lora_wraps_each_linear_once_and_a_step_moves_only_the_newest_term():
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Sequential(torch.nn.Linear(4, 2)))
    assert add_lora(block, 2, None, torch.Generator().manual_seed(0)) == 2
    assert add_lora(block, 2, None, torch.Generator().manual_seed(1)) == 2  # the same two layers, a second term
    assert terms_in(block.state_dict()) == 2 and terms_in(torch.nn.Linear(2, 2).state_dict()) == 0
    before = {k: v.clone() for k, v in block.state_dict().items()}
    opt = torch.optim.SGD([p for p in block.parameters() if p.requires_grad], lr=0.5)
    block(torch.randn(8, 4)).pow(2).sum().backward()
    opt.step()
    moved = {k for k, v in block.state_dict().items() if not torch.equal(v, before[k])}
    # the newest terms' B (their A gets no gradient while B is zero) and the block's norm; no base weight, no older term
    assert moved == {"0.terms.1.b", "2.0.terms.1.b", "1.weight", "1.bias"}
    with pytest.raises(ValueError, match="a LoRA rank is a whole number >= 1"):
        add_lora(block, 0, None, torch.Generator())


def test_happy_pps_lora_trains_a_new_term_per_step_with_the_blocks_frozen_and_resumes(tmp_path, monkeypatch):
    from bench.methods.happy_pp import HappyPlusPlus
    from tests.helpers import killed_then_resumed
    from tests.test_continual_gcd import MIXED, TINY_VIT
    from tests.helpers import tiny_specs

    after: list[dict[str, torch.Tensor]] = []  # the tail's blocks as each step left them
    end_step = HappyPlusPlus.end_step

    def kept(self, step):
        after.append({k: v.detach().clone() for k, v in self.tail.blocks.state_dict().items()})
        return end_step(self, step)

    plain = losses(run("Happy++", tmp_path / "off"))
    monkeypatch.setattr(HappyPlusPlus, "end_step", kept)
    lora = losses(run("Happy++", tmp_path / "on", **{"method.lora_rank": 2, "method.lora_applied": True}))
    monkeypatch.setattr(HappyPlusPlus, "end_step", end_step)
    np.testing.assert_array_equal(plain[(0, 0)], lora[(0, 0)])  # the labelled step trains the block whole, as Happy
    assert not np.allclose(plain[(1, 0)], lora[(1, 0)], rtol=1e-6)
    assert [terms_in(state) for state in after] == [0, 1, 2, 3, 4, 5]  # one term per unlabelled step
    monkeypatch.setattr(HappyPlusPlus, "end_step", kept)
    scripts = losses(run("Happy++", tmp_path / "code", **{"method.lora_rank": 2}))  # the code preset: the script's
    monkeypatch.setattr(HappyPlusPlus, "end_step", end_step)
    code = after[6:]
    assert not np.allclose(scripts[(1, 0)], lora[(1, 0)], rtol=1e-6) and not np.allclose(scripts[(1, 0)], plain[(1, 0)])
    assert [terms_in(state) for state in code] == [0] * 6  # its terms never enter the forward: none is kept
    linear = [k for k in after[0] if k.endswith(("qkv.weight", "proj.weight", "fc1.weight", "fc2.weight"))]
    assert len(linear) == 4
    for t in range(1, 6):  # the linear weights stay the labelled step's, each term the step that trained it left it
        for key in linear:
            assert torch.equal(after[t][key.replace(".weight", ".base.weight")], after[0][key])
        earlier = [k for k in after[t - 1] if ".terms." in k]
        assert earlier and all(torch.equal(after[t][k], after[t - 1][k]) for k in earlier) or t == 1
        assert any(not torch.equal(after[t][k], after[t - 1][k]) for k in after[t - 1] if "norm" in k)  # norms train
        assert all(torch.equal(code[t][key], code[0][key]) for key in linear)  # the script's: the weights frozen
        assert any(not torch.equal(code[t][k], code[t - 1][k]) for k in code[t] if "norm" in k)
    (spec,) = tiny_specs(methods=["Happy++"], splits=["happy-5-stage"], backbone=TINY_VIT,
                         **{**MIXED, "method.lora_rank": 2, "method.lora_applied": True, "setting.selection": "last"})
    resumed = killed_then_resumed(spec, tmp_path / "killed", HappyPlusPlus, 2, monkeypatch)
    assert losses(resumed).keys() == lora.keys()
    for key in lora:  # a run killed after its second stage resumes its terms and ends where it would have
        np.testing.assert_allclose(losses(resumed)[key], lora[key], rtol=1e-5)
    with pytest.raises(BenchError, match="bad method.lora_rank=-1: 0 .* or a rank >= 1"):
        run("Happy++", tmp_path / "bad", **{"method.lora_rank": -1})


def test_happy_pps_objective_is_its_terms_by_hand():
    """The confident self-distillation at the epoch's ratio, L_l2 against the rows the previous step left, STCH over
    the five terms (the one switched off, L_kd, a zero in the stack); without STCH, L_l2 after the sum."""
    out = batch(1)
    s, h = out.logits, out.projections
    head = NormedHead(3, 5)
    rows = head.weight.detach()[:3] + 0.1
    w = replace(WEIGHTS, soft_entropy=(1.0, 1.0, 1.0), confident_ramp=3, l2=0.4, stch_mu=0.5)
    past = Past(known=3, rows=rows)
    loss, terms = objective(out, None, w, 1, torch.Generator(), head, past)
    cluster = confident_distil(s[:4], s[4:], 0.1, 0.04, 0.5) + soft_entropy(s, 3, 0.1)  # ρ(1) of a 3-epoch ramp
    l2 = 0.4 * old_rows_l2(head.weight, rows)
    stack = [float(cluster), float(info_nce(h[:4], h[4:], 1.0)), 0.0, 0.0, float(l2.detach())]
    assert float(loss) == pytest.approx(0.5 * math.log(sum(math.exp(t / 0.5) for t in stack)), rel=1e-6)
    assert set(terms) == {"distil", "entropy", "contrastive", "l2"}
    plain, _ = objective(out, None, replace(w, stch_mu=0.0), 1, torch.Generator(), head, past)
    assert float(plain) == pytest.approx(stack[0] + stack[1] + stack[4], rel=1e-6)

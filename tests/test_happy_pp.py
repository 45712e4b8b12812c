"""Happy++ (methods/happy_pp.py, methods/happy_pp_parts.py): each piece against a hand-computed case on tiny tensors,
the SWA rate against torch's own schedulers, each switch changing what it learns in the mixed setting on a tiny ViT,
its defaults giving Happy, and LoRA refused."""
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


def test_lora_is_refused_by_name(tmp_path):
    from bench.errors import BenchError

    with pytest.raises(BenchError, match=r"LoRA \(method.lora_rank=4\) is not implemented"):
        run("Happy++", tmp_path, **{"method.lora_rank": 4})



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

"""Happy++: bench's pieces (methods/happy_pp_parts.py) against the authors' on the same tiny float64 inputs
(float32 where the reference's own casts ask it).

    python benchmarks/happy_pp_reference.py --happy-repo DIR [--protogcd-repo DIR2]

DIR is a checkout of github mashijie1028/Happy-CGCD at a commit that has `train_happy_plus_plus.py`: its
`models/ema.py` (`EMA`) and `models/lora.py` (`Linear`, its LoRA layer; commit 6ed5306 has it, some later snapshots
do not, and then LoRA is skipped with a note) are imported from there, never copied. The confident self-distillation
the script calls, `DistillLoss_ratio`, is imported from DIR's `models/utils_simgcd.py` where that file has it,
else from DIR2, a checkout of github mashijie1028/ProtoGCD (`models/loss.py`, the class's origin). The script's
other switches are inline expressions of `train_online` (the L2 on the old rows, STCH) or torch's own (`SWALR`):
those are checked against torch's `weight_norm` layer and schedulers, the objects the script applies them to.
Prints the largest absolute difference per piece.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import torch

from bench.methods.happy_pp_parts import (WeightAverage, confident_distil, confident_ratio, old_rows_l2, smooth_max,
                                          swa_lr)
from bench.methods.loop import cosine_after_epoch


def module_at(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        sys.exit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def distillation(cls: type, gen: torch.Generator) -> float:
    """`DistillLoss_ratio` against `confident_distil` at every epoch of its ramp and after it, in float32: the
    reference writes its float32 one-hot targets into the teacher's probabilities, which float64 refuses."""
    batch, classes, epochs, ramp = 12, 7, 6, 4
    theirs = cls(num_classes=classes, nepochs=epochs, ramp_ratio_teacher_epochs=ramp, ncrops=2)
    worst = 0.0
    for epoch in range(epochs):
        logits = torch.randn(2 * batch, classes, generator=gen, dtype=torch.float64).float()
        expected = float(theirs(logits, logits.detach(), epoch))
        ours = float(confident_distil(logits[:batch], logits[batch:], 0.1, 0.05, confident_ratio(epoch, ramp)))
        worst = max(worst, abs(ours - expected))
    return worst


def weight_average(ema_module: ModuleType, gen: torch.Generator) -> float:
    """`EMA.update`/`apply_shadow` against `WeightAverage` over a few steps of random weights."""
    torch.manual_seed(0)
    mine, theirs = torch.nn.Linear(5, 3).double(), torch.nn.Linear(5, 3).double()
    theirs.load_state_dict(mine.state_dict())
    ours, reference = WeightAverage([mine], 0.7, 0.4), ema_module.EMA(theirs, 0.7, 0.4)
    for _ in range(5):
        delta = {k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in mine.state_dict().items()}
        with torch.no_grad():
            for model in (mine, theirs):
                for k, p in model.named_parameters():
                    p.add_(delta[k])
        ours.update(), reference.update(theirs)
    ours.apply(), reference.apply_shadow(theirs)
    return max(float((a - b).abs().max()) for a, b in zip(mine.parameters(), theirs.parameters()))


def old_rows(gen: torch.Generator) -> float:
    """The script's L2 (MSE on a weight-normalised layer's weight, weight_v, weight_g) against `old_rows_l2`."""
    seen, dim = 4, 6
    current = torch.nn.utils.weight_norm(torch.nn.Linear(dim, seen + 2, bias=False).double())
    previous = torch.nn.utils.weight_norm(torch.nn.Linear(dim, seen, bias=False).double())
    for layer in (current, previous):
        with torch.no_grad():
            layer.weight_v.copy_(torch.randn(layer.weight_v.shape, generator=gen, dtype=torch.float64))
            layer.weight_g.fill_(1.0)  # norm_last_layer: fixed at 1
        layer(torch.zeros(1, dim, dtype=torch.float64))  # the forward that computes `weight`
    mse = torch.nn.functional.mse_loss
    expected = sum(float(mse(getattr(current, a)[:seen], getattr(previous, a)[:seen])) for a in ("weight", "weight_v", "weight_g"))
    return abs(float(old_rows_l2(current.weight_v, previous.weight_v)) - expected)


def stch(gen: torch.Generator) -> float:
    terms = [t for t in torch.rand(5, generator=gen, dtype=torch.float64) * 3]
    mu = 0.3
    expected = mu * math.log(sum(math.exp(float(t) / mu) for t in terms))
    return abs(float(smooth_max(terms, mu)) - expected)


def swa(epochs: int = 30, lr: float = 0.01) -> float:
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=lr)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs, eta_min=lr * 1e-3)
    swalr = torch.optim.swa_utils.SWALR(opt, anneal_epochs=2, swa_lr=0.5 * lr)
    rates = [cosine_after_epoch(e, epochs, lr, lr * 1e-3) for e in range(epochs)]
    worst = 0.0
    for epoch in range(epochs):
        worst = max(worst, abs(opt.param_groups[0]["lr"] - swa_lr(epoch, rates, 0.5 * lr, 17, 2)))
        opt.step()
        (swalr if epoch > 16 else cosine).step()
    return worst


def lora(lora_module: ModuleType, gen: torch.Generator) -> dict[str, float]:
    """The script's `lora.Linear` after two sessions' `init_lora` against bench, float64. Its terms sit in an
    `nn.ParameterDict` through `add_module`, which its `len()` and `items()` do not see, so its forward is the plain
    layer's: bench's `code` preset (`freeze_linear`) is compared with that; its terms' arithmetic (each
    `LoRA_BA_Term` called alone, summed over the base layer) with bench's `LoRALinear` (`equations`)."""
    from bench.methods.lora import LoRALinear, freeze_linear

    theirs = lora_module.Linear(6, 4).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(4, 6, generator=gen, dtype=torch.float64))
        theirs.bias.copy_(torch.randn(4, generator=gen, dtype=torch.float64))
    base = torch.nn.Linear(6, 4).double()
    base.load_state_dict({"weight": theirs.weight.detach().clone(), "bias": theirs.bias.detach().clone()})
    ours = LoRALinear(base)
    their_terms = []
    for session, rank in enumerate((3, 2)):
        theirs.init_lora(session, r=rank)
        ours.add_term(rank, None, torch.Generator())
        term = theirs.lora_layers._modules[str(session)].double()
        with torch.no_grad():  # the same values (the script draws A from torch's global generator)
            term.a.copy_(torch.randn(term.a.shape, generator=gen, dtype=torch.float64))
            term.b.copy_(torch.randn(term.b.shape, generator=gen, dtype=torch.float64))
            ours.terms[-1].a.copy_(term.a)
            ours.terms[-1].b.copy_(term.b)
        their_terms.append(term)
    x = torch.randn(5, 6, generator=gen, dtype=torch.float64)
    plain = torch.nn.Linear(6, 4).double()
    plain.load_state_dict(base.state_dict())
    freeze_linear(plain)
    code = float((theirs(x) - plain(x)).abs().max())
    frozen = [p.requires_grad for p in (theirs.weight, theirs.bias)] == [p.requires_grad for p in plain.parameters()]
    summed = theirs.weight.new_zeros(5, 4) + torch.nn.functional.linear(x, theirs.weight, theirs.bias)
    for term in their_terms:
        summed = summed + term(x)
    out = ours(x)
    equations = float((summed - out).abs().max())
    summed.pow(2).sum().backward()
    out.pow(2).sum().backward()
    grads = max(float((a.grad - b.grad).abs().max())
                for a, b in ((their_terms[1].a, ours.terms[1].a), (their_terms[1].b, ours.terms[1].b)))
    flags = [p.requires_grad for p in (theirs.weight, theirs.bias, *(t for term in their_terms for t in (term.a, term.b)))]
    same_flags = flags == [p.requires_grad for p in ours.parameters()]  # W, b, the first term frozen; the newest trains
    print(f"models/lora.py after two init_lora: {len(theirs.lora_layers)} terms its forward reads, "
          f"{len(list(theirs.lora_layers.children()))} registered; trainable flags as bench's: {same_flags}")
    return {"its forward (the plain layer) vs code's frozen layer" + ("" if frozen else ": FROZEN FLAGS DIFFER"): code,
            "its terms summed vs LoRALinear (equations): output" + ("" if same_flags else ": FLAGS DIFFER"): equations,
            "its terms summed vs LoRALinear (equations): the new term's gradients": grads}


def lora_init(lora_module: ModuleType, seed: int = 7) -> float:
    """A new term's starting values: the script's `init_lora` draws A from torch's global generator, bench's
    `add_term` from the generator it is handed; seeded alike they must draw the same A (Kaiming-uniform, a = √5),
    both B zero and both scalings 1 (the script passes no α). float32, the dtype both draw in."""
    from bench.methods.lora import LoRALinear

    theirs, ours = lora_module.Linear(6, 4), LoRALinear(torch.nn.Linear(6, 4))
    torch.manual_seed(seed)
    theirs.init_lora(0, r=3)
    ours.add_term(3, None, torch.Generator().manual_seed(seed))
    term, mine = theirs.lora_layers._modules["0"], ours.terms[0]
    if term.scaling != mine.scaling or bool(term.b.any()) or bool(mine.b.any()):
        return math.inf
    return float((term.a - mine.a).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--happy-repo", type=Path, required=True)
    parser.add_argument("--protogcd-repo", type=Path)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    ema = module_at(args.happy_repo / "models" / "ema.py", "happy_ema")
    utils = module_at(args.happy_repo / "models" / "utils_simgcd.py", "happy_utils_simgcd")
    ratio = getattr(utils, "DistillLoss_ratio", None)
    if ratio is None:
        if args.protogcd_repo is None:
            sys.exit("DIR's models/utils_simgcd.py has no DistillLoss_ratio: pass --protogcd-repo")
        ratio = module_at(args.protogcd_repo / "models" / "loss.py", "protogcd_loss").DistillLoss_ratio
    rows = {"confident self-distillation (DistillLoss_ratio)": distillation(ratio, gen),
            "EMA (models/ema.py)": weight_average(ema, gen),
            "L2 on the old rows (weight_norm's weight, weight_v, weight_g)": old_rows(gen),
            "STCH (mu·log Σ exp)": stch(gen),
            "SWA rate (torch SWALR after CosineAnnealingLR)": swa()}
    lora_file = args.happy_repo / "models" / "lora.py"
    if lora_file.exists():
        lora_module = module_at(lora_file, "happy_lora")
        rows.update({f"LoRA (models/lora.py): {k}": v for k, v in lora(lora_module, gen).items()})
        rows["LoRA (models/lora.py): a new term's A, same seed (B zero, s = 1)"] = lora_init(lora_module)
    else:
        print(f"{lora_file} is not there (a commit before Happy++'s LoRA): LoRA not compared")
    for name, worst in rows.items():
        print(f"{name:<64} max |bench − reference| = {worst:.3e}")


if __name__ == "__main__":
    main()

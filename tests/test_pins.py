"""Regression pins: a method moved onto new machinery must train the same numbers as before.

`tests/data/joint_unfrozen_smoke.json` holds what Joint (unfrozen) trained on a tiny ViT before it
moved onto the prefix/tail engine (regenerate with `python -m tests.test_pins` only when a change is
meant to alter its training or the digest's format, and say so in the commit).

The pins must hold on any x86 CPU and torch release: AMD EPYC and Intel Xeon (AVX-512, AMX) run
different kernels, whose rounding moves every trained weight by about 1e-6 of its tensor's scale. A
tolerance absolute, or relative to the compared value itself, fails on sums that are near zero by
cancellation (a bias summing to 1e-6 with an L1 norm of 100); so each tensor's digest records its
L1 norm (`:abs`) and every value is compared within RTOL of its tensor's scale."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import bench.runs.checkpoint as checkpoint
import bench.protocol.runner as runner
from tests.helpers import tiny_specs

PIN = Path(__file__).parent / "data" / "joint_unfrozen_smoke.json"
OPTIONS = {"method.epochs": 3, "method.stage1_epochs": 2, "method.stage2_epochs": 2, "backbone.kwargs.depth": 2,
           "method.stage1_batch_size": 16, "method.stage2_batch_size": 8}


# Measured on this code (AMD EPYC, torch 2.15.0): forcing other kernels (ATEN_CPU_CAPABILITY=default,
# ONEDNN_MAX_CPU_ISA=AVX2, 1 thread) moved sums by at most 5.5e-7 of their L1 norm and sums of squares
# by at most 1.8e-6 of themselves. Real changes of what is trained move them far more: a temperature
# 0.1 -> 0.1001 by 9e-4 (sums) and 4e-3 (squares), lr 0.1 -> 0.101 by 4e-3 and 3e-2, one more epoch or
# the views' losses averaged instead of summed by 0.2 and 0.85. 2e-5 is ten times the noise.
RTOL = 2e-5


def digest(state) -> dict[str, float]:
    """Sum, sum of squares and L1 norm (the scale of the sum's rounding) of every tensor of a method
    state, by path (float64)."""
    out: dict[str, float] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, torch.Tensor):
            v = value.detach().double()
            out[prefix + ":sum"], out[prefix + ":sq"] = float(v.sum()), float((v * v).sum())
            out[prefix + ":abs"] = float(v.abs().sum())
        elif isinstance(value, dict):
            for k in sorted(value, key=str):
                walk(f"{prefix}.{k}", value[k])
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(f"{prefix}[{i}]", item)

    walk("", state)
    return out


def differences(now: dict[str, float], then: dict[str, float], rtol: float = RTOL) -> list[str]:
    """The keys of `then` whose value in `now` is missing or off by more than `rtol` of its tensor's
    scale: the L1 norm for a sum (|sum| <= L1, and its rounding grows with L1, not with |sum|), the
    value itself for a sum of squares or an L1 norm (sums of non-negative terms)."""
    out = []
    for key, pinned in then.items():
        path, kind = key.rsplit(":", 1)
        scale = then[path + ":abs"] if kind == "sum" else pinned
        if key not in now or abs(now[key] - pinned) > rtol * scale:
            out.append(f"{key}: {now.get(key)} vs pinned {pinned} (allowed {rtol:g} x {scale:.6g})")
    return out + [f"{key}: not pinned" for key in now.keys() - then.keys()]


def test_the_comparison_allows_float_noise_and_catches_a_real_change():
    then = {"w:sum": 1e-6, "w:sq": 66.0, "w:abs": 100.0}
    noise = {"w:sum": 1e-6 - 1e-6 * 100, "w:sq": 66.0 * (1 + 2e-6), "w:abs": 100.0 * (1 - 2e-6)}
    assert differences(noise, then) == []  # a near-zero sum moved by 1e-6 of its tensor's scale
    assert differences({**noise, "w:sum": 0.1}, then) == ["w:sum: 0.1 vs pinned 1e-06 (allowed 2e-05 x 100)"]
    assert [d.split(":")[1] for d in differences({**noise, "w:sq": 66.0 * 1.001}, then)] == ["sq"]
    assert differences({k: v for k, v in noise.items() if k != "w:abs"}, then)[0].startswith("w:abs: None")


def trained_states(tmp_path: Path, monkeypatch) -> list[dict[str, float]]:
    states = []
    real = checkpoint.save_checkpoint
    monkeypatch.setattr(checkpoint, "save_checkpoint", lambda path, state: states.append(digest(state["method"])) or
                        real(path, state))
    (spec,) = tiny_specs(methods=["Joint (unfrozen):equations"], backbone="timm:vit_tiny_patch16_224", **OPTIONS)
    runner.execute(spec, tmp_path)
    return states


def test_joint_unfrozen_trains_the_pinned_weights(tmp_path, monkeypatch):
    pinned = json.loads(PIN.read_text())
    states = trained_states(tmp_path, monkeypatch)
    assert len(states) == len(pinned) == 2
    for step, (now, then) in enumerate(zip(states, pinned)):
        assert differences(now, then) == [], f"step {step}"


if __name__ == "__main__":  # regenerate the pin
    import tempfile

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        PIN.write_text(json.dumps(trained_states(Path(d), mp), indent=1, sort_keys=True))
    print(f"wrote {PIN}", file=sys.stderr)

"""Regression pins: a method moved onto new machinery must train the same numbers as before.

`tests/data/joint_unfrozen_smoke.json` holds what Joint (unfrozen) trained on a tiny ViT before it
moved onto the prefix/tail engine (regenerate with `python -m tests.test_pins` only when a change is
meant to alter its training, and say so in the commit)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import bench.runner as runner
from tests.helpers import tiny_specs

PIN = Path(__file__).parent / "data" / "joint_unfrozen_smoke.json"
OPTIONS = {"method.epochs": 3, "method.stage1_epochs": 2, "method.stage2_epochs": 2, "backbone.kwargs.depth": 2,
           "method.stage1_batch_size": 16, "method.stage2_batch_size": 8}


def digest(state) -> dict[str, float]:
    """Sums and sums of squares of every tensor of a method state, by path (float64)."""
    out: dict[str, float] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, torch.Tensor):
            v = value.detach().double()
            out[prefix + ":sum"], out[prefix + ":sq"] = float(v.sum()), float((v * v).sum())
        elif isinstance(value, dict):
            for k in sorted(value, key=str):
                walk(f"{prefix}.{k}", value[k])
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(f"{prefix}[{i}]", item)

    walk("", state)
    return out


def trained_states(tmp_path: Path, monkeypatch) -> list[dict[str, float]]:
    states = []
    real = runner._save_checkpoint
    monkeypatch.setattr(runner, "_save_checkpoint", lambda path, state: states.append(digest(state["method"])) or
                        real(path, state))
    (spec,) = tiny_specs(methods=["Joint (unfrozen):equations"], backbone="timm:vit_tiny_patch16_224", **OPTIONS)
    runner.execute(spec, tmp_path)
    return states


def test_joint_unfrozen_trains_the_pinned_weights(tmp_path, monkeypatch):
    pinned = json.loads(PIN.read_text())
    states = trained_states(tmp_path, monkeypatch)
    assert len(states) == len(pinned) == 2
    for now, then in zip(states, pinned):
        assert set(now) == set(then)
        for key in then:
            assert now[key] == pytest.approx(then[key], rel=1e-5, abs=1e-6), key


if __name__ == "__main__":  # regenerate the pin
    import tempfile

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        PIN.write_text(json.dumps(trained_states(Path(d), mp), indent=1, sort_keys=True))
    print(f"wrote {PIN}", file=sys.stderr)

"""Continual SimGCD and Happy (methods/simgcd.py, methods/happy.py) in the mixed setting, end to end on a tiny ViT:
they train the last block on the prefix's tokens, each of Happy's parts changes what it learns, K can be estimated
on their own representation, and their metrics recompute from what they stored."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.protocol.recompute import replay
from bench.protocol.runner import execute
from bench.runs.predictions import PREDICTIONS, Keys, each, opened
from tests.helpers import tiny_specs

TINY_VIT = "timm:vit_tiny_patch16_224"
DATA = {"dataset.num_classes": 12, "dataset.train_per_class": 12, "dataset.test_per_class": 4}
SHORT = {"method.epochs": 2, "method.batch_size": 16, "method.proj_hidden_dim": 32, "method.proj_dim": 16}
MIXED = {**DATA, **SHORT, "method.labelled_epochs": 2}
# PromptCCD's pool fitted at every epoch from the second, two prompts an image. Its projector's hidden layers are
# wide as DINO's head (2048): its weights are drawn with std 0.02, so narrow layers shrink the output until the
# last bias's gradient (through the normalisation) dominates, and one step collapses every projection onto one point
PROMPTED = {**DATA, **SHORT, "method.epochs": 3, "method.head_dim": 64, "method.proj_hidden_dim": 2048,
            "method.prompt_from": 1,
            "method.refit_every": 1, "method.top_k": 2, "method.n_samples": 10}


def run(method: str, tmp: Path, split: str = "happy-5-stage", **options) -> Path:
    base = PROMPTED if method == "PromptCCD" else MIXED
    (spec,) = tiny_specs(methods=[method], splits=[split], backbone=TINY_VIT, **{**base, **options})
    return execute(spec, tmp)


def losses(out: Path) -> dict[tuple[int, ...], np.ndarray]:
    """Each step's training loss per epoch, as the run stored it, by (step, loop)."""
    with opened(out / PREDICTIONS) as stored:
        return each(stored, Keys.epoch_loss)


@pytest.mark.parametrize("method", ["SimGCD (continual)", "Happy", "PromptCCD"])
def test_it_runs_the_mixed_setting_and_its_rows_recompute(method, tmp_path):
    out = run(method, tmp_path)
    frame = pd.read_parquet(out / "metrics.parquet")
    summary = frame[frame.group == "summary"].set_index("metric")["value"]
    assert {"All", "Old_hard", "New_hard", "F"} <= set(summary.index)
    recomputed = {(r.step, r.group, r.flavour, r.metric): r.value for r in replay(out / PREDICTIONS)}
    measured = {(r.step, r.group, r.flavour, r.metric): r.value for r in frame.itertuples()}
    assert recomputed.keys() == measured.keys()
    assert all(np.isclose(recomputed[k], measured[k], rtol=1e-9, equal_nan=True) for k in measured)


@pytest.mark.parametrize("off", [{"method.init_new_head": False}, {"method.proto_weight": 0},
                                 {"method.w_old_new": 0},
                                 # the tail moves away from the previous step's only after some steps
                                 {"method.kd_weight": 0, "method.lr": 0.5, "method.epochs": 4}])
def test_each_of_happys_parts_changes_what_it_learns(off, tmp_path):
    longer = {k: v for k, v in off.items() if k in ("method.lr", "method.epochs")}
    full = losses(run("Happy", tmp_path / "full", **longer))
    without = losses(run("Happy", tmp_path / "without", **off))
    np.testing.assert_array_equal(full[(0, 0)], without[(0, 0)])  # the labelled step: no part
    assert not np.allclose(full[(1, 0)], without[(1, 0)], rtol=1e-6)


def test_happy_without_its_parts_and_with_the_global_entropy_is_continual_simgcd(tmp_path):
    off = {"method.init_new_head": False, "method.proto_weight": 0, "method.kd_weight": 0}
    simgcd = losses(run("SimGCD (continual)", tmp_path / "simgcd"))
    happy = losses(run("Happy", tmp_path / "happy", **off))
    # the same labelled step; then they differ only in the entropy term (global, or Happy's soft one)
    np.testing.assert_array_equal(simgcd[(0, 0)], happy[(0, 0)])
    assert not np.allclose(simgcd[(1, 0)], happy[(1, 0)], rtol=1e-6)
    soft = losses(run("Happy", tmp_path / "no-entropy", **off, **{"method.w_old_new": 0, "method.w_old_in": 0,
                                                                  "method.w_new_in": 0}))
    assert not np.allclose(soft[(1, 0)], happy[(1, 0)], rtol=1e-6)



def test_a_runs_numbers_come_from_its_seed_alone(tmp_path, monkeypatch):
    """Every draw of Happy's steps comes from the one source its seed and the step make (`methods.draws`): the
    global generators seeded otherwise change nothing (they drew the head's rows and φ before), another seed does."""
    import bench.protocol.runner as runner

    def metrics(out: Path) -> pd.Series:
        frame = pd.read_parquet(out / "metrics.parquet")
        return frame.set_index(["step", "group", "flavour", "metric"])["value"]

    first = run("Happy", tmp_path / "first")
    seeded = runner.seed_everything
    monkeypatch.setattr(runner, "seed_everything", lambda seed: seeded(seed + 12345))
    again = run("Happy", tmp_path / "global-seeded-otherwise")
    pd.testing.assert_series_equal(metrics(first), metrics(again))
    assert all(np.array_equal(a, losses(again)[k]) for k, a in losses(first).items())
    (spec,) = tiny_specs(methods=["Happy"], splits=["happy-5-stage"], seeds=[1], backbone=TINY_VIT, **MIXED)
    other = execute(spec, tmp_path / "seed-1")
    assert not np.allclose(losses(other)[(1, 0)], losses(first)[(1, 0)], rtol=1e-6)

def test_k_is_estimated_on_its_own_representation(tmp_path):
    out = run("SimGCD (continual)", tmp_path, **{"setting.k": "silhouette"})
    frame = pd.read_parquet(out / "metrics.parquet")
    given = frame[(frame.group == "k") & (frame.metric == "given")]["value"]
    assert len(given) == 5 and (given >= 1).all()


def test_promptccd_runs_its_own_protocol_and_prompts_change_what_it_learns(tmp_path):
    out = run("PromptCCD", tmp_path / "own", split="promptccd-3-stage",
              **{"setting.evaluation": "transductive", "setting.selection": "promptccd", "method.epochs": 2})
    frame = pd.read_parquet(out / "metrics.parquet")
    assert {"cgcd", "inductive"} <= set(frame.flavour)  # transductive rows, the test images' kept beside
    prompted = losses(run("PromptCCD", tmp_path / "prompted"))
    plain = losses(run("PromptCCD", tmp_path / "plain", **{"method.prompt_from": 99}))
    np.testing.assert_array_equal(prompted[(0, 0)][:1], plain[(0, 0)][:1])  # no prompt yet
    assert not np.allclose(prompted[(0, 0)][1:], plain[(0, 0)][1:], rtol=1e-6)


def test_promptccd_refuses_a_selection_that_would_score_centroids_it_has_not_made(tmp_path):
    from bench.errors import BenchError

    with pytest.raises(BenchError, match="use last or promptccd"):
        run("PromptCCD", tmp_path, **{"setting.selection": "oracle"})


def test_bench_list_methods_says_which_settings_each_method_runs(capsys):
    from bench.cli import main

    assert main(["list", "methods"]) == 0
    rows = {line.split("  ")[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert "mixed" in rows["Happy"] and "incd" in rows["EwC"] and "incd+mixed" in rows["VB-CGCD"]


def test_the_labelled_steps_own_entropy_weight_and_simgcds_own_preset():
    """`labelled_memax_weight` weighs the labelled step's ε·(log K − H(p̄)) alone (None: ε, every run before it);
    `simgcd_offline` is SimGCD's own scripts' labelled step: 200 epochs, ε 4 on CIFAR-100, 2 on CUB, 1 elsewhere."""
    from types import SimpleNamespace

    import torch

    from bench.config.presets import resolve_config
    from bench.errors import BenchError
    from bench.methods.gcd_losses import entropy_regulariser
    from bench.methods.gcd_objective import Outputs, Past, objective
    from bench.registries import METHODS, load_all

    load_all()
    cls = METHODS.get("SimGCD (continual)")
    code = resolve_config("SimGCD (continual)", "code", "cifar100", "happy-5-stage", {}, {})["method"]
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0], [2.0, 1.0, 0.0]])
    plain = entropy_regulariser(logits, 0.1)
    assert plain > 0  # the batch's mean prediction is not uniform: the term is not zero, so its weight shows
    labelled = SimpleNamespace(labels=torch.zeros(3, dtype=torch.long))
    unlabelled = SimpleNamespace(labels=None, offset=2)

    def term(own, step):
        owner = SimpleNamespace(hparams={**code, "memax_weight": 1.5, "labelled_memax_weight": own,
                                         "student_temperature": 0.1})
        out = Outputs(torch.zeros(6, 2), torch.cat([logits, logits]), torch.eye(2)[[0, 1, 0, 1, 0, 1]])
        past = None if step.labels is not None else cls.past(owner, step)
        assert past is None or past == Past(known=2)
        return objective(out, step.labels, cls.weights(owner, step), 0, torch.Generator(), past=past)[1]["entropy"]

    torch.testing.assert_close(term(4.0, labelled), 4.0 * plain)
    torch.testing.assert_close(term(4.0, unlabelled), 1.5 * plain)
    torch.testing.assert_close(term(None, labelled), 1.5 * plain)
    own = {d: resolve_config("SimGCD (continual)", "simgcd_offline", d, "happy-5-stage", {}, {})["method"]
           for d in ("cifar100", "cub200", "cifar10")}
    assert {d: (c["labelled_epochs"], c["labelled_memax_weight"]) for d, c in own.items()} == {
        "cifar100": (200, 4.0), "cub200": (200, 2.0), "cifar10": (200, 1.0)}
    assert (code["labelled_epochs"], code["labelled_memax_weight"], code["epochs"]) == (100, None, 30)
    assert own["cifar100"]["epochs"] == 30  # the steps after the labelled one stay Happy's
    with pytest.raises(BenchError, match="method.labelled_memax_weight='x': must be None"):
        cls(feature_dim=8, seed=0, **{**code, "labelled_memax_weight": "x"})

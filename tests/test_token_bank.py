"""The token bank (bench/token_bank.py): the prefix's tokens stored once per key, the same as the
live prefix gives for the same view draws; a build killed midway never looks complete; tail methods
run and resume on it; the run ids of runs without it do not change."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bench.bank import list_banks
from bench.runner import METRICS, execute
from bench.token_bank import BankTokens, build_token_bank
from bench.tokens import LiveTokens
from tests.test_discovery import bound
from tests.test_incremental import tiny_vit_specs

FIELDS = {"format": 1, "kind": "tokens", "test": True}


def sources_of(method, spec):
    from bench.data import build_dataset
    from bench.features import Encoder
    from bench.tokens import Prefix

    data = build_dataset("synthetic", spec.config["dataset"])
    encoder, prefix = Encoder(method.backbone, data, "cpu"), Prefix(method.backbone, method.first_trainable)
    return {"train": LiveTokens(data.train, encoder, prefix), "test": LiveTokens(data.test, encoder, prefix)}


def test_the_bank_holds_what_the_live_prefix_gives_for_the_same_draws(tmp_path):
    method, _, spec = bound("EwC")
    live = sources_of(method, spec)
    arrays = build_token_bank(tmp_path, FIELDS, live, views=3, seed=7, batch_size=16, dtype="float16",
                              log=lambda line: None)
    n = len(live["train"])
    assert arrays["train_views"].shape[:2] == (n, 3) and arrays["test_plain"].shape[0] == len(live["test"])
    gen = torch.Generator().manual_seed(7)  # the build's draws: batch by batch, view by view
    for start in range(0, n, 16):
        index = np.arange(start, min(start + 16, n))
        for v in range(3):
            expected = live["train"].one_view(index, gen).half().float()
            torch.testing.assert_close(torch.from_numpy(arrays["train_views"][index, v].astype(np.float32)), expected)
    torch.testing.assert_close(torch.from_numpy(arrays["test_plain"][:5].astype(np.float32)),
                               live["test"].plain(np.arange(5)).half().float())
    tokens = BankTokens(arrays, "train", np.arange(n), live["train"], torch.device("cpu")).subset(np.arange(10, 20))
    torch.testing.assert_close(tokens.plain(np.array([1])), torch.from_numpy(arrays["train_plain"][[11]].astype(np.float32)))


def test_two_different_stored_views_per_image_in_the_order_asked_for():
    """Stored view v of image i holds (i, v): what two_views returns says which it read."""
    grid = np.stack(np.meshgrid(np.arange(20), np.arange(3), indexing="ij"), -1)  # 20 × 3 × 2
    arrays = {"train_views": grid[:, :, None, :].astype(np.float16), "train_plain": np.zeros((20, 1, 2), np.float16)}
    tokens = BankTokens(arrays, "train", np.arange(20), live=type("L", (), {"images": None, "subset": lambda s, i: s})(),
                        device=torch.device("cpu")).subset(np.arange(10, 20))
    for seed in range(20):
        first, second = tokens.two_views(torch.tensor([3, 0, 5]), torch.Generator().manual_seed(seed))
        assert first[:, 0, 0].tolist() == second[:, 0, 0].tolist() == [13.0, 10.0, 15.0]
        assert (first[:, 0, 1] != second[:, 0, 1]).all()


def test_a_build_killed_midway_never_looks_complete(tmp_path, monkeypatch):
    method, _, spec = bound("EwC")
    live = sources_of(method, spec)
    calls = []
    real = LiveTokens.one_view

    def dies(self, index, gen):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed mid-build")
        return real(self, index, gen)

    monkeypatch.setattr(LiveTokens, "one_view", dies)
    with pytest.raises(KeyboardInterrupt):
        build_token_bank(tmp_path, FIELDS, live, views=2, seed=0, batch_size=8, dtype="float16", log=lambda line: None)
    assert list_banks(tmp_path) == [] and list((tmp_path / "banks").glob(".*.building"))
    monkeypatch.setattr(LiveTokens, "one_view", real)
    arrays = build_token_bank(tmp_path, FIELDS, live, views=2, seed=0, batch_size=8, dtype="float16",
                              log=lambda line: None)
    (bank,) = list_banks(tmp_path)
    assert bank.kind == "token bank" and arrays["train_views"].shape[1] == 2
    assert not list((tmp_path / "banks").glob(".*.building"))  # the next builder cleared the remains


def test_float8_stores_a_byte_per_value(tmp_path):
    method, _, spec = bound("EwC")
    live = sources_of(method, spec)
    arrays = build_token_bank(tmp_path, FIELDS, live, views=2, seed=0, batch_size=16, dtype="float8",
                              log=lambda line: None)
    assert arrays["train_views"].dtype == np.uint8
    tokens = BankTokens(arrays, "test", np.arange(len(live["test"])), live["test"], torch.device("cpu"), "float8")
    exact = live["test"].plain(np.arange(4))
    assert (tokens.plain(np.arange(4)) - exact).abs().max() <= 0.07 * exact.abs().max()  # e4m3: 3 mantissa bits


@pytest.mark.parametrize("name", ["EwC", "Joint (unfrozen)"])
def test_tail_methods_run_on_the_token_bank_and_one_bank_serves_every_seed(name, tmp_path):
    specs = [tiny_vit_specs(name, seeds=(seed,), **{"features.tokens": "bank"})[0] for seed in (0, 1)]
    for spec in specs:
        metrics = pd.read_parquet(execute(spec, tmp_path) / METRICS)
        assert set(metrics["features"]) == {"token bank V=2" + ("; head warm-up bank V=2" if name.startswith("Joint") else "")}
    kinds = sorted(b.kind for b in list_banks(tmp_path / "cache"))
    assert kinds.count("token bank") == 1  # both seeds read one bank


def test_runs_without_the_token_bank_keep_their_ids():
    (live,) = tiny_vit_specs("EwC")
    (bank,) = tiny_vit_specs("EwC", **{"features.tokens": "bank"})
    assert "tokens" not in live.identity()["config"]["features"] and "token_dtype" not in live.identity()["config"]["features"]
    assert live.run_id != bank.run_id and bank.identity()["config"]["features"]["tokens"] == "bank"

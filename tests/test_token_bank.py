"""The token bank (bench/features/token_bank.py): the prefix's tokens stored once per key, the same as the
live prefix gives for the same view draws; a build killed midway never looks complete; tail methods
run and resume on it; the run ids of runs without it do not change."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bench.features.bank import list_banks
from bench.protocol.runner import execute
from bench.runs.rundir import METRICS
from bench.features.token_bank import BankTokens, build_token_bank
from bench.features.tokens import LiveTokens
from tests.test_discovery import bound
from tests.test_incremental import tiny_vit_specs

FIELDS = {"format": 1, "kind": "tokens", "test": True}


def sources_of(method, spec):
    from bench.data import build_dataset
    from bench.features.views import Encoder
    from bench.features.tokens import Prefix

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
    tokens = BankTokens(grid_bank(), "train", np.arange(20), live=type("L", (), {"images": None, "subset": lambda s, i: s})(),
                        device=torch.device("cpu")).subset(np.arange(10, 20))
    for seed in range(20):
        first, second = tokens.two_views(torch.tensor([3, 0, 5]), torch.Generator().manual_seed(seed))
        assert first[:, 0, 0].tolist() == second[:, 0, 0].tolist() == [13.0, 10.0, 15.0]
        assert (first[:, 0, 1] != second[:, 0, 1]).all()


def grid_bank(n: int = 20, views: int = 3) -> dict[str, np.ndarray]:
    """Stored view v of image i holds the token (i, v)."""
    grid = np.stack(np.meshgrid(np.arange(n), np.arange(views), indexing="ij"), -1)  # n × V × 2
    return {"train_views": grid[:, :, None, :].astype(np.float16), "train_plain": np.zeros((n, 1, 2), np.float16)}


def test_a_teacher_labels_each_stored_view_once_and_the_draws_stay_those_of_two_views():
    """Joint (unfrozen)'s step 2 on a token bank: the labels of stored views come from a table made
    once, and tokens and labels are what labelling `two_views`' tokens batch by batch gives."""
    from bench.methods.tails import TeacherLabels

    calls = []

    def teacher(tokens):  # a label that says which image and view it saw
        calls.append(len(tokens))
        return (tokens[:, 0, 0] * 10 + tokens[:, 0, 1]).long()

    live = type("L", (), {"images": None, "subset": lambda s, i: s})()
    tokens = BankTokens(grid_bank(), "train", np.arange(20), live, torch.device("cpu")).subset(np.arange(5, 20))
    labelled = TeacherLabels(tokens, teacher, batch_size=4)
    assert calls == [4] * 9 + [3] * 3  # each of the 15 images' 3 stored views, once, batch by batch
    for seed in range(10):
        index = torch.randperm(15, generator=torch.Generator().manual_seed(100 + seed))[:6]
        t1, t2, y1, y2 = labelled.two_views(index, torch.Generator().manual_seed(seed))
        e1, e2 = tokens.two_views(index, torch.Generator().manual_seed(seed))
        assert torch.equal(t1, e1) and torch.equal(t2, e2)
        assert torch.equal(y1, teacher(e1)) and torch.equal(y2, teacher(e2))
        assert (y1 // 10 == index + 5).all() and (y1 != y2).all()
    assert len(calls) == 12 + 20  # two_views labelled nothing: only the checks above called the teacher

    class Fresh:  # live tokens: every draw is new, so each batch is labelled as it comes
        def two_views(self, index, gen):
            return tokens.two_views(index, gen)

    fresh = TeacherLabels(Fresh(), teacher, batch_size=4)
    assert fresh.table is None
    t1, _, y1, _ = fresh.two_views(torch.tensor([0, 3]), torch.Generator().manual_seed(0))
    assert torch.equal(y1, teacher(t1)) and len(calls) == 32 + 2 + 1


def test_reading_ahead_gives_the_same_tokens_and_is_used():
    live = type("L", (), {"images": None, "subset": lambda s, i: s})()
    arrays = grid_bank()
    ahead = BankTokens(arrays, "train", np.arange(20), live, torch.device("cpu")).subset(np.arange(5, 20))
    plain = BankTokens(arrays, "train", np.arange(20), live, torch.device("cpu"), read_ahead=False).subset(np.arange(5, 20))
    batches = [torch.tensor([3, 0, 14]), torch.tensor([7, 2]), torch.tensor([1, 9, 4, 11])]
    for k, index in enumerate(batches):
        if k + 1 < len(batches):  # as the loop does: the next batch named before this one is read
            ahead.read_ahead(batches[k + 1])
            plain.read_ahead(batches[k + 1])
        for seed in range(3):
            first, second = (torch.equal(a, b) for a, b in zip(ahead.two_views(index, torch.Generator().manual_seed(seed)),
                                                               plain.two_views(index, torch.Generator().manual_seed(seed))))
            assert first and second
    assert ahead.read_ahead_hits == 2 * 3 * 2 and plain.read_ahead_hits == 0  # every read of batches 2 and 3
    ahead.read_ahead(torch.tensor([0, 1]))
    ahead.two_views(torch.tensor([1, 0]), torch.Generator())  # other images: read directly
    assert ahead.read_ahead_hits == 12


def test_the_epoch_loop_names_each_next_batch_before_computing_the_current_one():
    from bench.methods.loop import train_epochs

    events = []

    class Source:
        def read_ahead(self, index):
            events.append(("ahead", index.tolist()))

    w = torch.nn.Parameter(torch.zeros(()))

    def loss_of(index):
        events.append(("batch", index[0].tolist()))
        return w * 0

    train_epochs([w], {"lr": 0.1, "momentum": 0, "weight_decay": 0, "eta_min": 0}, epochs=2, sizes=[5, 7],
                 batch_size=2, gen=torch.Generator().manual_seed(0), loss_of=loss_of, read_ahead=[Source(), object()])
    # 3 batches per epoch (the shorter source's): the first and second name the next, the last none
    assert [kind for kind, _ in events] == ["ahead", "batch", "ahead", "batch", "batch"] * 2
    for epoch in (0, 5):
        assert events[epoch][1] == events[epoch + 3][1] and events[epoch + 2][1] == events[epoch + 4][1]


def test_a_run_reading_ahead_trains_exactly_what_a_run_without_does(tmp_path, monkeypatch):
    import dataclasses

    hits = []
    real = BankTokens._read_ahead_block

    def counted(self, index):
        block = real(self, index)
        hits.append(block is not None)
        return block

    monkeypatch.setattr(BankTokens, "_read_ahead_block", counted)
    import bench.runs.checkpoint

    states, save = [], bench.runs.checkpoint.save_checkpoint  # what each step trained: stage-1 and stage-2 weights
    monkeypatch.setattr(bench.runs.checkpoint, "save_checkpoint", lambda path, state: (states.append(state["method"]), save(path, state)))
    (spec,) = tiny_vit_specs("Joint (unfrozen)", **{"features.tokens": "bank", "method.stage1_batch_size": 8,
                                                    "method.stage2_batch_size": 8})
    outputs = {}
    for read_ahead in (True, False):
        run = dataclasses.replace(spec, location={**spec.location, "read_ahead": read_ahead})
        out = execute(run, tmp_path / str(read_ahead))
        outputs[read_ahead] = (pd.read_parquet(out / METRICS), dict(np.load(out / "predictions.npz")))
        assert any(hits) == read_ahead
        hits.clear()
    pd.testing.assert_series_equal(outputs[True][0]["value"], outputs[False][0]["value"])
    (_, ahead), (_, plain) = states[:2], states[2:]  # step 2's state: both stages of both steps
    tensors = [(a, b) for k in ("stage1", "stage2") for a, b in zip(torch.utils._pytree.tree_leaves(ahead[k]),
                                                                     torch.utils._pytree.tree_leaves(plain[k]))]
    assert len(tensors) > 4 and all(torch.equal(a, b) for a, b in tensors)
    assert outputs[True][1].keys() == outputs[False][1].keys()
    assert all(np.array_equal(outputs[True][1][k], outputs[False][1][k]) for k in outputs[True][1])


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


def test_once_the_banks_exist_the_tail_methods_never_run_the_prefix(tmp_path, monkeypatch):
    """Every view, evaluation image and replayed buffer image (DER) of EwC, LwF, DER, FRoST and
    Joint (unfrozen) comes from the token bank; only CaSSLe's asymmetric views are drawn fresh."""
    from bench.features.tokens import Prefix

    options = {"features.tokens": "bank", "method.batch_size": 8}
    execute(tiny_vit_specs("EwC", seeds=(9,), **options)[0], tmp_path)  # builds the token bank
    calls, real = [], Prefix.__call__
    monkeypatch.setattr(Prefix, "__call__", lambda self, x: (calls.append(len(x)), real(self, x))[1])
    for name in ("EwC", "LwF", "DER", "FRoST", "Joint (unfrozen)"):
        (spec,) = tiny_vit_specs(name, **options)
        assert (execute(spec, tmp_path) / METRICS).exists()
        assert calls == [], name
    (spec,) = tiny_vit_specs("DER", **{**options, "features.tokens": "live"})
    execute(spec, tmp_path)
    assert calls  # the same run on live tokens does run it (the spy works)


def test_runs_without_the_token_bank_keep_their_ids():
    (live,) = tiny_vit_specs("EwC")
    (bank,) = tiny_vit_specs("EwC", **{"features.tokens": "bank"})
    assert "tokens" not in live.identity()["config"]["features"] and "token_dtype" not in live.identity()["config"]["features"]
    assert live.run_id != bank.run_id and bank.identity()["config"]["features"]["tokens"] == "bank"


def test_the_command_line_sets_reading_ahead_as_a_machine_setting():
    from bench.cli import build_parser
    from bench.cli.common import expand

    def spec_of(*extra):
        args = build_parser().parse_args(["run", "--grid", "smoke", "--methods", "EwC", *extra])
        return expand(args)[1][0]

    default, off, on = spec_of(), spec_of("--read-ahead", "off"), spec_of("--read-ahead", "on")
    assert "read_ahead" not in default.location  # the runner's default: on for a GPU only
    assert (off.location["read_ahead"], on.location["read_ahead"]) == (False, True)
    assert default.run_id == off.run_id == on.run_id  # it changes no result, so not the run's identity


@pytest.mark.parametrize("how", ["truncate", "overwrite"])
def test_a_damaged_token_bank_is_set_aside_and_rebuilt_when_opened(tmp_path, how):
    from tests.test_bank import damage

    method, _, spec = bound("EwC")
    live = sources_of(method, spec)
    first = {k: np.array(v) for k, v in build_token_bank(tmp_path, FIELDS, live, views=2, seed=0, batch_size=16,
                                                         dtype="float16", log=lambda line: None).items()}
    (bank,) = list_banks(tmp_path)
    damage(bank.path / "train_views.npy", how)
    lines = []
    again = build_token_bank(tmp_path, FIELDS, live, views=2, seed=0, batch_size=16, dtype="float16", log=lines.append)
    assert all(np.array_equal(again[k], first[k]) for k in first)
    assert sum(f"token bank {bank.key} is damaged (train_views.npy" in line for line in lines) == 1, lines
    assert len(list((tmp_path / "banks").glob(f"{bank.key}.damaged-*"))) == 1


def test_a_large_token_bank_verifies_each_chunk_when_a_read_first_touches_it(tmp_path, monkeypatch):
    """Above VERIFY_AT_OPEN_BYTES the open checks sizes and shapes only; a damaged chunk is caught by
    the first read that touches it, before its values are returned, and the bank is moved aside."""
    from bench.features import bank as bank_module
    from bench.features.bank import DamagedBank

    monkeypatch.setattr(bank_module, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(bank_module, "VERIFY_AT_OPEN_BYTES", 0)
    method, _, spec = bound("EwC")
    live = sources_of(method, spec)
    def build(log):
        return build_token_bank(tmp_path, FIELDS, live, views=2, seed=0, batch_size=16, dtype="float16", log=log)
    first = np.array(build(lambda line: None)["train_views"])
    (bank,) = list_banks(tmp_path)
    path = bank.path / "train_views.npy"
    size = path.stat().st_size
    with path.open("r+b") as fh:  # the last row's bytes, same size
        fh.seek(size - 100)
        fh.write(bytes(range(100)))
    lines = []
    arrays = build(lines.append)
    assert not any("damaged" in line for line in lines)  # not hashed whole at open
    n = len(live["train"])
    tokens = BankTokens(arrays, "train", np.arange(n), live["train"], torch.device("cpu"), read_ahead=False)
    torch.testing.assert_close(tokens.stored_views(np.arange(2), np.zeros(2, dtype=int)),
                               torch.from_numpy(first[:2, 0].astype(np.float32)))
    with pytest.raises(DamagedBank, match=f"token bank {bank.key} is damaged .*train_views.npy bytes"):
        tokens.stored_views(np.array([n - 1]), np.array([1]))
    assert not bank.path.exists() and len(list((tmp_path / "banks").glob(f"{bank.key}.damaged-*"))) == 1
    assert np.array_equal(build(lambda line: None)["train_views"], first)  # the next open rebuilds it

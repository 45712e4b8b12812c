"""What a method is fed: the step's unlabelled training data, and the batches it is evaluated on.

A method reads either frozen features (`inputs = "features"`, from the shared feature bank,
`bench.features.bank`) or the frozen prefix's tokens of the images (`inputs = "tokens"`, computed now,
`bench.features.tokens`, or read from the token bank, `bench.features.token_bank`). Both banks are keyed by what their
content depends on (`bank_fields`), so every seed and method of a grid shares them. Labels never
pass through here: a `Step` (`bench.protocol.step.step_of`) holds images' features or tokens in a seeded order.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import torch

from bench.config.spec import FEATURE_MODES, RunSpec
from bench.core.progress import LoggedProgress
from bench.data import ImageSet
from bench.splits.layout import TaskLayout
from bench.errors import BenchError
from bench.features.bank import default_cache_dir, load_or_build, weights_identity
from bench.features.tokens import LiveTokens, Prefix
from bench.features.views import Encoder, FeatureViews, LiveViews, extract
from bench.protocol.hooks import MethodHooks, TailHooks

# the feature banks loaded while runs step together in one process: each read once, one copy in memory for all
_SHARED_BANKS: ContextVar[dict[tuple[str, str], dict[str, torch.Tensor]] | None] = ContextVar("shared_banks",
                                                                                             default=None)


@contextmanager
def sharing_banks() -> Iterator[None]:
    """Within it, runs that read the same feature bank share its loaded tensors (read-only to every run)."""
    token = _SHARED_BANKS.set({})
    try:
        yield
    finally:
        _SHARED_BANKS.reset(token)


if TYPE_CHECKING:  # imported where a run builds a token bank
    from bench.features.token_bank import BankTokens

Log = Callable[[str], None]


def bank_fields(spec: RunSpec, data: Any, backbone: Any) -> dict[str, Any]:
    """What a bank's content depends on besides its views (the feature and token banks' keys)."""
    feat = spec.config["features"]
    return {"dataset": spec.dataset, "dataset_options": spec.config["dataset"], "data_root": str(data.root),
            "classes": data.num_classes,
            "sizes": [len(data.train), len(data.test), len(data.val) if data.val is not None else 0],
            "backbone": spec.backbone, "pretrained": weights_identity(backbone.weights),
            "backbone_kwargs": spec.config["backbone"]["kwargs"], "policy": [data.augmentation, feat["policy"]],
            "bank_seed": feat["bank_seed"],
            # the tuning protocol's held-out images stand in for the test set (absent otherwise: banks keep their keys)
            **({"holdout": [spec.config["tuning"]["holdout"], spec.config["tuning"].get("holdout_seed", 0)]}
               if spec.config.get("tuning", {}).get("holdout") else {}),
            # a domain-shifted stream's images: each once per domain (absent otherwise: banks keep their keys)
            **({"domains": data.extra["stream"]["names"]} if "stream" in data.extra else {}),
            # a backbone with its own normalisation says so (absent otherwise: older banks keep their keys)
            **({"normalisation": [list(backbone.mean), list(backbone.std)]}
               if getattr(backbone, "mean", None) is not None else {})}


def cache_of(spec: RunSpec, results: Path) -> Path:
    """Where a run's banks live: the machine's `cache_dir` (a location setting), else beside the results."""
    return Path(spec.location.get("cache_dir") or default_cache_dir(results))


def features_for(spec: RunSpec, data: Any, backbone: Any, device: torch.device, views: int,
                 log: Log, results: Path) -> tuple[FeatureViews, FeatureViews, FeatureViews]:
    """Train, val and test features for a run.

    `bank` mode reads them from the shared feature bank (built on first use): V stored views per
    training image, drawn with `features.bank_seed`, so every seed and method shares one bank.
    `exact` mode reads only the plain features from the bank and draws fresh augmented views
    through the backbone at every epoch (`LiveViews`), as the paper does.
    """
    feat = spec.config["features"]
    mode = feat["mode"]
    if mode not in FEATURE_MODES:
        raise BenchError(f"unknown features.mode {mode!r}; choose from {', '.join(FEATURE_MODES)}")
    encoder = Encoder(backbone, data, device, feat["policy"])
    stored_views = views if mode == "bank" else 0
    fields = {"format": 1, **bank_fields(spec, data, backbone), "views": stored_views}

    def build() -> dict[str, torch.Tensor]:
        batch = feat["batch_size"]
        # counted in encoder passes: a training image is read 1 + V times, an evaluation image once
        total = len(data.train) * (1 + stored_views) + len(data.test) + (len(data.val) if data.val is not None else 0)
        progress = LoggedProgress("feature bank", total, log, unit="image passes")
        train = extract(encoder, data.train, views=stored_views, seed=feat["bank_seed"], batch_size=batch,
                        progress=progress.scaled(1 + stored_views))
        tensors = {"train_plain": train.plain, "train_views": train.views,
                   "test_plain": extract(encoder, data.test, views=0, seed=0, batch_size=batch, progress=progress).plain}
        if data.val is not None:
            tensors["val_plain"] = extract(encoder, data.val, views=0, seed=0, batch_size=batch, progress=progress).plain
        return tensors

    where = cache_of(spec, results)
    shared = _SHARED_BANKS.get()
    key = (str(where), json.dumps(fields, sort_keys=True, default=str))
    if shared is not None and key in shared:  # runs stepped together (`bench.protocol.batched`) hold one copy
        bank = shared[key]
        log("feature bank shared with the runs stepped together in this process")
    else:
        bank = {k: v.float() for k, v in load_or_build(where, fields, build, log).items()}
        if shared is not None:
            shared[key] = bank
    if mode == "bank":
        train = FeatureViews(bank["train_plain"], bank["train_views"])
    else:
        # the images without their labels: exact mode draws fresh views, never sees a label
        unlabelled = ImageSet(data.train.images, np.full(len(data.train), -1))
        train = LiveViews(bank["train_plain"], unlabelled, encoder)
    def plain_only(x: torch.Tensor) -> FeatureViews:
        return FeatureViews(x, x.new_empty(len(x), 0, x.shape[1]))

    val = train if data.val is None else plain_only(bank["val_plain"])
    return train, val, plain_only(bank["test_plain"])


class FeatureInputs:
    """Methods on frozen features (`inputs = "features"`): trained and evaluated on the feature bank."""

    def __init__(self, *, features: tuple[FeatureViews, FeatureViews, FeatureViews], device: torch.device,
                 **_: Any) -> None:
        self.sources = dict(zip(("train", "val", "test"), features))
        self.device = device

    def step_fields(self, of_task: list[np.ndarray], sees_past: bool) -> dict[str, Any]:
        return {}  # the features are every Step's `train`

    def batches(self, split: str, index: np.ndarray) -> Iterator[torch.Tensor]:
        plain = self.sources[split].plain[torch.as_tensor(index, dtype=torch.long)]
        return (plain[i: i + 4096].to(self.device) for i in range(0, len(plain), 4096))


class TokenInputs:
    """Methods that train tails (`inputs = "tokens"`): the frozen prefix's tokens of the images, up
    to the method's first trainable block, computed now (`bench.features.tokens.LiveTokens`) or, with
    `features.tokens=bank` in bank mode, read from the token bank (`bench.features.token_bank`)."""

    def __init__(self, *, method: TailHooks, backbone: Any, data: Any, device: torch.device, spec: RunSpec,
                 val_images: ImageSet, log: Log, results: Path, **_: Any) -> None:
        feat = spec.config["features"]
        encoder = Encoder(backbone, data, device, feat["policy"])
        prefix = Prefix(backbone, method.first_trainable)
        live = {"train": LiveTokens(data.train, encoder, prefix), "val": LiveTokens(val_images, encoder, prefix),
                "test": LiveTokens(data.test, encoder, prefix)}
        self.sources: dict[str, LiveTokens | BankTokens] = dict(live)
        self.batch_size = int(spec.config["backbone"]["batch_size"])
        if feat["mode"] == "bank" and feat["tokens"] == "bank":
            from bench.features.token_bank import BankTokens, build_token_bank, resident_copy

            fields = {"format": 1, "kind": "tokens", **bank_fields(spec, data, backbone),
                      "prefix_blocks": method.first_trainable, "views": feat["views"], "dtype": feat["token_dtype"],
                      "val": "held-out" if data.val is not None else "train"}
            # the val images are the training images where a dataset has no held-out split: stored once
            stored = {k: v for k, v in live.items() if k != "val" or data.val is not None}
            arrays = build_token_bank(cache_of(spec, results), fields, stored, feat["views"], feat["bank_seed"],
                                      feat["batch_size"], feat["token_dtype"], log)
            resident = resident_copy(arrays, device)
            # reading ahead changes no result, so it is a setting of the machine (location), not of the
            # run; by default on a GPU only, where the host is otherwise idle (on a CPU it measured slower)
            read_ahead = bool(spec.location.get("read_ahead", device.type == "cuda"))
            self.sources = {split: BankTokens(arrays, split if split in stored else "train", np.arange(len(source)),
                                              source, device, feat["token_dtype"], resident, read_ahead)
                            for split, source in live.items()}

    def step_fields(self, of_task: list[np.ndarray], sees_past: bool) -> dict[str, Any]:
        train = self.sources["train"]
        return {"tokens": train.subset(of_task[-1]),
                "past_tokens": [train.subset(rows) for rows in of_task[:-1]] if sees_past else []}

    def batches(self, split: str, index: np.ndarray) -> Iterator[torch.Tensor]:
        return self.sources[split].subset(index).batches(self.batch_size)


INPUTS: dict[str, Any] = {"features": FeatureInputs, "tokens": TokenInputs}


class Feed:
    """A run's data as its method sees it: what each step's `Step` is made of (`bench.protocol.step.step_of`), and
    the batches of the val and test images the runner evaluates it on. `train_task` is the task of each training
    image (None where a mixed protocol leaves classes out: its steps come from its manifest, not by task)."""

    def __init__(self, inputs: Any, train: FeatureViews | None, train_task: np.ndarray | None, seed: int,
                 device: torch.device, n_steps: int, sees_past_steps: bool) -> None:
        self.inputs, self.train, self.train_task = inputs, train, train_task
        self.seed, self.device, self.n_steps, self.sees_past_steps = seed, device, n_steps, sees_past_steps

    def batches(self, split: str, index: np.ndarray) -> Iterator[torch.Tensor]:
        """The method's inputs (features or tokens) of the `split` images `index`, in batches."""
        return self.inputs.batches(split, index)


def feed_for(spec: RunSpec, method: MethodHooks, data: Any, backbone: Any, device: torch.device, val_images: ImageSet,
             layout: TaskLayout, log: Log, results: Path, clock: float) -> Feed:
    """What `method` reads during the run: the feature bank, built (or read) only for a method that
    reads features, and its features or tokens (`INPUTS`). `clock` is when the run started (its log
    says how long the features took from there)."""
    train = val = test = None
    if method.runs_on.reads_features:
        train, val, test = features_for(spec, data, backbone, device, spec.config["features"]["views"], log,
                                        results=results)
        log(f"features ({spec.config['features']['mode']}): train {tuple(train.plain.shape)} with "
            f"{train.views.shape[1]} stored views, test {tuple(test.plain.shape)}, {time.monotonic() - clock:.1f}s")
    inputs = INPUTS[method.runs_on.inputs](method=method, backbone=backbone, data=data, device=device, spec=spec,
                                   features=(train, val, test), val_images=val_images, log=log, results=results)
    # a mixed protocol may leave classes out (its steps feed themselves from its manifest, not by task)
    train_task = layout.task_of(data.train.labels) if layout.num_classes == data.num_classes else None
    return Feed(inputs, train, train_task, spec.seed, device, spec.n_steps,
                method.runs_on.sees_past_steps)

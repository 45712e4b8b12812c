"""The hooks the protocol calls on a method, as a type: what `bench.methods.base.Method` implements and what the
step loop, the evaluation and the conformance kit may rely on. The protocol sits below the method zoo, so it
names the hooks here rather than importing the base class; a plugin subclasses `Method` and gets them all."""
from __future__ import annotations

from typing import Any, ClassVar, Mapping, Protocol

import torch

from bench.core.runs_on import RunsOn
from bench.protocol.step import Step


class MethodHooks(Protocol):
    """A method as the protocol sees it (`bench.methods.base.Method` documents each hook)."""

    runs_on: ClassVar[RunsOn]  # what it runs on: features or tokens, earlier steps, views
    reported: ClassVar[Mapping[str, tuple[str, str]]]  # which summary rows are its A and F
    hparam_choices: ClassVar[Mapping[str, tuple[Any, ...]]]
    feature_dim: int
    seed: int
    hparams: dict[str, Any]

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None: ...

    def bind(self, backbone: torch.nn.Module, precision: str = "fp32") -> None: ...

    def learn(self, step: Step) -> None: ...

    def logits(self, x: torch.Tensor) -> torch.Tensor: ...

    def embed(self, x: torch.Tensor) -> torch.Tensor: ...

    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class TailHooks(MethodHooks, Protocol):
    """A method on tokens, which trains a ViT's last blocks: the protocol also reads where its tail starts."""

    first_trainable: int  # the first block it trains (the frozen prefix ends before it)

"""The hook API every method implements; what the step loop hands it at each step is `Step`
(`bench.protocol.step`, imported from here too)."""
from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence, TypeVar

import torch

from bench.core.runs_on import RunsOn
from bench.protocol.step import Step

__all__ = ["Method", "REFITTED", "RunsOn", "Step", "built"]


# Where the paper's A and F of the methods whose testers re-fit every task's map come from
# (`utils/*_testers.py::test_ind_cluster`; bench.protocol.evaluate's `wo_refit`).
REFITTED: Mapping[str, tuple[str, str]] = {"A": ("wo_refit", "A"), "F": ("wo_refit", "F")}


T = TypeVar("T")


def built(part: T | None, what: str) -> T:
    """`part` where the protocol guarantees it by now (a head the first step built, the backbone `bind` gave, a
    labelled step's labels): a RuntimeError naming it if that guarantee was broken."""
    if part is None:
        raise RuntimeError(f"{what} is used before it exists")
    return part


class Method:
    """Base class. Subclasses are registered with `@METHODS.register_module(name=...)`.

    `hparams` are the resolved `method` section of the run's config (the preset's keys).
    """

    # What it can run on (features or tokens, whether it sees earlier steps, views, a warm-up on
    # features): one declaration that the runner, the catalogue and the checks before a run all read.
    runs_on: ClassVar[RunsOn] = RunsOn()
    # Where its reported A and F come from: (flavour, summary metric) of the evaluator's rows. The
    # paper reports every method task-agnostically ("wo"), except K-means' A (one Hungarian match);
    # for EwC, LwF, DER, CaSSLe and ResTune the authors' testers re-fitted each task's map at every
    # evaluation (`REFITTED`). Every run records all flavours; this says which one its A and F are.
    reported: ClassVar[Mapping[str, tuple[str, str]]] = {"A": ("wo", "A"), "F": ("wo", "F")}
    # the valid values of its string hyper-parameters, checked with every config value before a run
    hparam_choices: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    preset_file: ClassVar[str]  # registries/presets/<preset_file>.py
    # The hyper-parameters in which runs may differ and still learn together in one process (`bench tune --batch`,
    # `bench.protocol.batched`): a class that declares them implements `learn_batched`. Only the class's own
    # declaration counts: a subclass that learns otherwise is not batched by inheritance.
    batchable: ClassVar[tuple[str, ...]] = ()

    def __init__(self, feature_dim: int, seed: int, **hparams: Any) -> None:
        self.feature_dim = feature_dim
        self.seed = seed
        self.hparams = hparams

    def bind(self, backbone: torch.nn.Module, precision: str = "fp32") -> None:
        """Called by the runner with the frozen pre-trained backbone and the run's `precision.tails`
        before the first step (and after a resume): methods that build on it (`methods.tails.TailMethod`)
        keep both."""

    def learn(self, step: Step) -> None:
        raise NotImplementedError

    @classmethod
    def learn_batched(cls, methods: Sequence[Any], steps: Sequence[Step]) -> list[list[list[float]]]:
        """`methods[i].learn(steps[i])` for every i, computed together, each equal to its run alone (to float
        rounding); the methods differ only in their `batchable` hyper-parameters and the steps only in which object
        holds them. Returns, per method, what its training loops would record (`record_epochs`): their per-epoch
        losses. Called only for a class that declares `batchable`."""
        raise NotImplementedError

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Unified head over every class seen so far (N × Σ C_s). `x` holds what the method's
        `runs_on.inputs` declares: features, or the prefix's tokens."""
        raise NotImplementedError

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The method's representation of the images (N × D) that PromptCCD's evaluation and selection cluster
        (`setting.evaluation=transductive`, `setting.selection=promptccd`; `bench.protocol.transductive`). On frozen
        features it is the features themselves: such a method learns no representation, so every one of them
        scores the backbone's. A method that learns one (a tail, a prompt) returns it."""
        if self.runs_on.inputs == "features":
            return x
        raise NotImplementedError(f"{type(self).__name__} reads tokens: its embed() must return its representation")

    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        """Task-specific head of `task` (N × C_task)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

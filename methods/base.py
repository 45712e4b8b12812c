"""The hook API every method implements, and what the runner hands it at each step."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import torch

from bench.epoch_selection import LAST, EpochSelection
from bench.features import FeatureViews
from bench.runs_on import RunsOn

__all__ = ["Method", "REFITTED", "RunsOn", "Step"]


@dataclass
class Step:
    """Step `index` of the sequence: the UNLABELLED training data of this step's classes (in the `mixed`
    setting, `labels` holds the classes of a labelled stage's images, and a later stage's images are
    unlabelled images of this stage's `n_classes` new classes mixed with images of the `offset` classes
    seen before, in any proportion).

    `offset` is the first class index of the step and `n_classes` its class count (known to the
    method, as in the paper). `train` holds the step's features (stored plain features and views);
    methods that train tails (`runs_on.inputs == "tokens"`) also get `tokens`, the frozen prefix's
    tokens of the step's images (`bench.tokens`). `past` and `past_tokens` hold earlier steps' data and
    are filled only for methods that declare `runs_on.sees_past_steps` (the references)."""

    index: int
    n_classes: int
    offset: int
    train: FeatureViews
    last: bool = False  # the sequence's last step (the number of steps is known, as in the authors' code)
    past: list[FeatureViews] = field(default_factory=list)
    device: torch.device = torch.device("cpu")
    tokens: Any = None
    past_tokens: list[Any] = field(default_factory=list)
    # The class of each image of `train`, in 0..offset+n_classes-1: given ONLY in a labelled stage of the
    # `mixed` setting (stage 0, classes [0, n_classes)); None in every unlabelled step and in class-iNCD.
    labels: torch.Tensor | None = None
    # Which epoch of each training loop the stage keeps (`setting.selection` of the mixed setting): a method
    # that trains over epochs wraps each loop in `selection.over(parameters, logits)`; `last` does nothing.
    selection: EpochSelection = LAST


# Where the paper's A and F of the methods whose testers re-fit every task's map come from
# (`utils/*_testers.py::test_ind_cluster`; bench.evaluate's `wo_refit`).
REFITTED: Mapping[str, tuple[str, str]] = {"A": ("wo_refit", "A"), "F": ("wo_refit", "F")}


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

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Unified head over every class seen so far (N × Σ C_s). `x` holds what the method's
        `runs_on.inputs` declares: features, or the prefix's tokens."""
        raise NotImplementedError

    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        """Task-specific head of `task` (N × C_task)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

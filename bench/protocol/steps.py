"""What a setting gives the one step loop (`bench.protocol.runner.run_steps`): its steps, the rows each step
is evaluated to, and the run's summary. class-iNCD is the staged protocol with no labelled step and no earlier
classes in a step (`bench.protocol.class_incd`); the mixed setting of continual category discovery has both
(`bench.protocol.mixed`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from bench.splits.settings import setting_of
from bench.protocol import class_incd, mixed
from bench.protocol.feeding import Feed
from bench.protocol.step import Step
from bench.runs.predictions import is_mixed, layout_of
from bench.runs.rows import MetricRow
from bench.config.spec import RunSpec
from bench.protocol.hooks import MethodHooks


class Steps(Protocol):
    """A setting's steps of one run. `stored` is what the run keeps for `predictions.npz` (in its checkpoint
    until it ends; its keys are `bench.runs.predictions.Keys`): a step's evaluation adds to it, and a later step
    may read it. A step keeps nothing between `step` and `evaluate`: what the method was told at step t is the
    `Step` the loop hands back to `evaluate`."""


    def step(self, t: int, stored: Mapping[str, np.ndarray]) -> Step:
        """What the method learns from at step t: the step's data, and labels only where the setting gives them."""

    def evaluate(self, t: int, step: Step, method: MethodHooks, stored: dict[str, np.ndarray]) -> list[MetricRow]:
        """Step t's metric rows, on everything seen so far, for the method that learnt `step` (step t's, as `step`
        built it); what they were computed from goes into `stored`."""

    def summary(self, rows: list[MetricRow]) -> list[MetricRow]:
        """The run's summary rows (A, F, ...) from its per-step rows."""

    def describe(self, t: int, rows: list[MetricRow]) -> str:
        """Step t's line in the run's log."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def steps_for(spec: RunSpec, parts: Any, feed: Feed, out: Path, log: Callable[[str], None]) -> Steps:
    """The steps of run `spec` in its setting."""
    if setting_of(spec.config) == "mixed":
        return mixed.MixedSteps(spec, parts, feed, out, log)
    return class_incd.ClassIncrementalSteps(spec, parts, feed)


def reported_of(spec: RunSpec) -> Mapping[str, tuple[str, str]]:
    """The (flavour, metric) of the summary rows that are run `spec`'s A and F: its setting's in the mixed
    setting, else what its method declares (`Method.reported`)."""
    if setting_of(spec.config) == "mixed":
        return mixed.REPORTED
    from bench.registries import METHODS

    return METHODS.get(spec.method).reported


def replay(stored: Mapping[str, np.ndarray]) -> list[MetricRow]:
    """A finished run's metric rows, summary included, from its stored predictions alone, by the setting
    that stored them (`bench metrics recompute`)."""
    layout = layout_of(stored)
    if is_mixed(stored):
        return mixed.replay(stored, layout)
    return class_incd.replay(stored, layout)

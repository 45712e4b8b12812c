"""What the conformance checks (`bench.kit.conformance`) watch a method with: a spy on the Steps it is handed
(labels, earlier steps' data, its state round-tripped after every step, its earlier task heads' answers), a kill
as a step starts, and a dataset whose training labels are all wrong."""
from __future__ import annotations

import copy
import random
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import numpy as np
import torch

from bench.errors import first_line
from bench.protocol.hooks import MethodHooks
from bench.protocol.step import Step


@contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name = value` for the duration, restored whatever happens. An attribute a class only
    inherited is removed again, not pinned: a later change to the parent's must still reach it."""
    own = name in vars(owner)
    old = vars(owner)[name] if own else None
    setattr(owner, name, value)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, old)
        else:
            delattr(owner, name)


class Killed(BaseException):
    """What the kit raises inside `learn` to kill a run: a BaseException, as Ctrl-C, so the runner
    treats it as an interruption (the last checkpoint stays), not as a failure."""


@dataclass
class StepSpy:
    """Wraps the method class's `learn` for one run in `setting`: records what every Step carried and, after each
    step, checks that the method's state round-trips into a fresh instance."""

    cls: type[MethodHooks]
    setting: str = "incd"  # the run's: the mixed setting asks for no task's own head
    kill_at: int | None = None  # the step (0-based) as which the run is killed
    label_fields: list[str] = field(default_factory=list)
    past_fields: list[str] = field(default_factory=list)
    roundtrip_errors: list[str] = field(default_factory=list)
    heads_asked: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # task: (probe, answer)
    moved_heads: list[str] = field(default_factory=list)
    # what each instance was bound with (by id: the run's instances live as long as the spy), for a fresh one
    bound_with: dict[int, tuple[torch.nn.Module, str]] = field(default_factory=dict)

    @contextmanager
    def installed(self) -> Iterator[None]:
        real_learn, real_bind = self.cls.learn, self.cls.bind
        spy = self

        def bind(method: MethodHooks, backbone: torch.nn.Module, precision: str = "fp32") -> None:
            spy.bound_with[id(method)] = (backbone, precision)  # what a fresh instance must be bound with too
            real_bind(method, backbone, precision)

        def learn(method: MethodHooks, step: Step) -> None:
            if spy.kill_at is not None and step.index == spy.kill_at:
                raise Killed(f"killed as step {step.index + 1} starts")
            spy.inspect(step)
            real_learn(method, step)
            spy.roundtrip(method, step)
            spy.watch_heads(method, step)

        with patched(self.cls, "bind", bind), patched(self.cls, "learn", learn):
            yield

    def inspect(self, step: Any) -> None:
        """Every label-bearing field of the step (a `labels` array holding a class, not -1) and every
        earlier step's data it carries."""
        for path, labels in label_arrays(step, f"step {step.index + 1}"):
            if np.asarray(labels).size and (np.asarray(labels) >= 0).any():
                self.label_fields.append(path)
        for name in ("past", "past_tokens"):
            if getattr(step, name, None):
                self.past_fields.append(f"step {step.index + 1}.{name} holds {len(getattr(step, name))} step(s)")

    def roundtrip(self, method: MethodHooks, step: Step) -> None:
        """A fresh instance loaded with the trained one's `state_dict` must answer identically. Run
        under saved random states: the probe must not change what the run computes next."""
        with random_states_kept():
            try:
                fresh = type(method)(method.feature_dim, method.seed, **copy.deepcopy(method.hparams))
                if id(method) in self.bound_with:
                    fresh.bind(*self.bound_with[id(method)])
                fresh.load_state_dict(copy.deepcopy(method.state_dict()))
                x = probe(step, self.cls.runs_on.inputs)
                pairs = [("logits", method.logits(x), fresh.logits(x))]
                if self.setting == "incd":  # the mixed setting asks for no task's own head
                    pairs += [(f"task_logits(task {s + 1})", method.task_logits(x, s), fresh.task_logits(x, s))
                              for s in range(step.index + 1)]
                for what, a, b in pairs:
                    if a.shape != b.shape or not torch.equal(a, b):
                        self.roundtrip_errors.append(f"after step {step.index + 1}, {what} of the reloaded "
                                                     f"instance differs ({difference(a, b)})")
                        return
            except Exception as err:  # any failure to rebuild or answer is the check's failure
                self.roundtrip_errors.append(f"after step {step.index + 1}: {first_line(err)}")


    def watch_heads(self, method: MethodHooks, step: Step) -> None:
        """For a method that declares `runs_on.frozen_task_heads` (class-iNCD then reuses each task head's answer
        from its own step): every earlier task's head must answer the probe it was asked after its own step
        exactly as then. Run under saved random states, as `roundtrip`."""
        declared = self.cls.runs_on
        if not declared.frozen_task_heads or self.setting != "incd":
            return
        with random_states_kept():
            try:
                for task, (x, then) in self.heads_asked.items():
                    now = method.task_logits(x, task)
                    if now.shape != then.shape or not torch.equal(now, then):
                        self.moved_heads.append(f"after step {step.index + 1}, task_logits(task {task + 1}) "
                                                f"answers otherwise than after step {task + 1} ({difference(now, then)})")
                        return
                x = probe(step, declared.inputs).clone()  # a view of the step's features: kept as it is now
                self.heads_asked[step.index] = (x, method.task_logits(x, step.index).detach().clone())
            except Exception as err:  # any failure to answer is the check's failure
                self.moved_heads.append(f"after step {step.index + 1}: {first_line(err)}")


def label_arrays(obj: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(where, array) of every `labels`/`targets` attribute reachable from a Step's fields (a few
    levels: a token source holds an ImageSet, which holds the labels)."""
    if depth > 3 or obj is None or isinstance(obj, (torch.Tensor, np.ndarray, str, int, float, bool)):
        return
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from label_arrays(item, f"{path}[{i}]", depth + 1)
        return
    fields = getattr(obj, "__dict__", {})
    for name, value in fields.items():
        if name in ("labels", "targets", "y") and isinstance(value, (np.ndarray, torch.Tensor, list)):
            yield f"{path}.{name}", value.cpu().numpy() if isinstance(value, torch.Tensor) else value
        elif not name.startswith("__") and not isinstance(value, torch.nn.Module):
            yield from label_arrays(value, f"{path}.{name}", depth + 1)


def probe(step: Any, inputs: str) -> torch.Tensor:
    """A batch of what the method's heads read: the step's plain features, or its images' tokens."""
    if inputs == "tokens":
        return next(iter(step.tokens.batches(16)))
    return step.features.plain[:16]


def difference(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    return f"largest difference {(a.float() - b.float()).abs().max().item():.3g}"


@contextmanager
def random_states_kept() -> Iterator[None]:
    py, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        yield
    random.setstate(py)
    np.random.set_state(np_state)


def relabelled(build: Callable[..., Any], n_steps: int) -> Callable[..., Any]:
    """`build_dataset` with every training label moved to the next class of its own step (a cyclic
    shift within each step's classes): the same images in the same steps, every label wrong. A
    method that reads no label cannot tell."""
    from bench.data.base import ImageSet
    from bench.splits.layout import TaskLayout

    def build_relabelled(*args: Any, **kwargs: Any) -> Any:
        data = build(*args, **kwargs)
        layout = TaskLayout.contiguous(data.num_classes, n_steps)
        shifted = data.train.labels.copy()
        for offset, size in zip(layout.offsets, layout.sizes):
            mine = (data.train.labels >= offset) & (data.train.labels < offset + size)
            shifted[mine] = offset + (data.train.labels[mine] - offset + 1) % size
        # a new dataset object: the original (a reader may cache it) keeps its labels
        return replace(data, train=ImageSet(data.train.images, shifted))

    return build_relabelled

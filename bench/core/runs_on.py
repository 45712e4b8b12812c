"""What a method can run on, declared once per method class (`Method.runs_on`), and read by everything
that must know it before or while a run happens: the runner (what to build and feed, which heads to read
again), the command catalogue (`bench list methods`, the references in reports), the checks before anything
runs (a tail method on a backbone without blocks) and the metrics file's `features` and `tail_precision`
columns.

It lives outside `bench.methods` because the commands that run nothing read it without importing the
methods (and torch): `bench.registries.catalogue` stores it as a plain dict.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, Mapping

Inputs = Literal["features", "tokens"]
INPUTS: tuple[str, ...] = ("features", "tokens")
# the settings a method may declare: `bench.splits.settings.SETTINGS`' names (a test keeps the two the same)
SETTING_NAMES: tuple[str, ...] = ("incd", "mixed")


@dataclass(frozen=True)
class RunsOn:
    """A method's declared needs. Every field changes what a run builds, what reaches the method, how
    it is evaluated or which runs are refused; the defaults are a method on frozen features that sees only
    its own step, whose earlier heads are read again at every step."""

    # What the runner feeds `learn`, `logits` and `task_logits`: "features", frozen features of the
    # whole backbone (from the shared feature bank, any backbone: a ViT, a ResNet, raw `pixels`), or
    # "tokens", the frozen prefix's tokens for a method that trains a ViT's last blocks (`methods.tails`),
    # which needs a backbone with transformer blocks and a `method.unfreeze` key in its preset.
    inputs: Inputs = "features"
    # A reference method (K-means, the Joint methods) that may read earlier steps' data (`step.past`,
    # `step.past_tokens`); every other method gets only its own step, as the protocol demands. Reports
    # mark such methods and never bold them.
    sees_past_steps: bool = False
    # Whether augmented views of the training images reach it. False (K-means) means the run trains on
    # plain features only, and its metrics file says "plain features" rather than how views were drawn.
    trains_on_views: bool = True
    # A tail method whose head warm-up reads frozen features (`step.train`) before its blocks train
    # (Joint (unfrozen)): the runner then builds the feature bank for it too.
    warms_up_on_features: bool = False
    # The settings it can run (`bench.splits.settings.SETTINGS`): "incd", the paper's class-iNCD (every step
    # unlabelled images of new classes only), and "mixed", continual category discovery (a labelled first
    # step, then unlabelled steps mixing known and new classes: `step.labels` in the labelled step).
    # A run of a setting its method does not list is refused before anything runs.
    settings: tuple[str, ...] = ("incd",)
    # Whether each task's own head (`task_logits(x, s)`) answers at every later step exactly as it did at the
    # end of step s: the method reads frozen features, and nothing it learns later re-trains, re-normalises
    # or re-estimates an earlier step's head (its unified head may move). class-iNCD's evaluation then reads
    # no earlier head again for the re-fitted maps (`wo_refit`, which then equals `wo`): it reuses what each
    # head answered on its mapping images at its own step, T passes over them in a T-step run instead of
    # T(T+1)/2. Off unless declared, so a method that says nothing is re-read at every step;
    # `bench check method` tests the claim.
    frozen_task_heads: bool = False

    def __post_init__(self) -> None:
        if self.inputs not in INPUTS:
            raise ValueError(f"RunsOn.inputs {self.inputs!r}: choose from {', '.join(INPUTS)}")
        if self.warms_up_on_features and self.inputs != "tokens":
            raise ValueError("RunsOn.warms_up_on_features is for a method on tokens (one on features reads them anyway)")
        # a typo would leave a setting unrun and unchecked (`bench check` runs the settings declared)
        if not isinstance(self.settings, tuple) or not self.settings or not set(self.settings) <= set(SETTING_NAMES):
            raise ValueError(f"RunsOn.settings {self.settings!r}: a tuple of one or more of {', '.join(SETTING_NAMES)}, "
                             f"e.g. (\"mixed\",) or (\"incd\", \"mixed\")")
        if self.frozen_task_heads and self.inputs != "features":
            raise ValueError("RunsOn.frozen_task_heads is for a method on features: the blocks a method on tokens "
                             "trains move every task's head")

    @property
    def reads_features(self) -> bool:
        """Whether it reads `step.train` (the feature bank): the runner builds the bank only then."""
        return self.inputs == "features" or self.warms_up_on_features

    @property
    def trains_blocks(self) -> bool:
        """Whether it fine-tunes a ViT's last blocks: it needs a backbone with blocks (at least as many
        as it unfreezes), and its metrics record the precision they computed in."""
        return self.inputs == "tokens"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> "RunsOn":
        """From `to_dict`'s output; keys it does not know are ignored (a catalogue of another version)."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in entry.items() if k in names}
        if "settings" in known:  # a JSON list in the catalogue
            known["settings"] = tuple(known["settings"])
        return cls(**known)

"""What each method declares it runs on (`Method.runs_on`): one object that replaced several class
flags, pinned to what those flags said, and read the same way by the catalogue."""
from __future__ import annotations

import pytest

from bench.registries import METHODS, load_all
from bench.registries.catalogue import method_info
from bench.core.runs_on import RunsOn

# (inputs, sees_past_steps, trains_on_views, warms_up_on_features) as the class flags declared them
DECLARED = {
    "Baseline": ("features", False, True, False), "Baseline++": ("features", False, True, False),
    "CaSSLe": ("tokens", False, True, False), "DER": ("tokens", False, True, False),
    "EwC": ("tokens", False, True, False), "FRoST": ("tokens", False, True, False),
    "Joint (frozen)": ("features", True, True, False), "Joint (unfrozen)": ("tokens", True, True, True),
    "K-means": ("features", True, False, False), "LwF": ("tokens", False, True, False),
    "ResTune": ("tokens", False, True, False),
    # the continual-GCD baselines: plain features of their own step only
    "NCM + k-means": ("features", False, False, False), "Gaussian per class": ("features", False, False, False),
    "SimGCD (continual)": ("tokens", False, True, False), "Happy": ("tokens", False, True, False),
    "Happy++": ("tokens", False, True, False), "MetaGCD": ("tokens", False, True, False),
    "PromptCCD": ("tokens", False, True, False),
    "VB-CGCD": ("features", False, False, False),
}
# the methods whose earlier task heads answer at every step as at their own (methods/*.py say why each does);
# every other method's are read again at every step
FROZEN_TASK_HEADS = {"Baseline", "Baseline++", "Joint (frozen)", "K-means", "NCM + k-means", "Gaussian per class",
                     "VB-CGCD"}


def test_every_method_declares_what_its_flags_said():
    load_all()
    assert {name: (cls.runs_on.inputs, cls.runs_on.sees_past_steps, cls.runs_on.trains_on_views,
                   cls.runs_on.warms_up_on_features)
            for name, cls in METHODS.module_dict.items() if not name.startswith("_")} == DECLARED
    assert {name for name in DECLARED if METHODS.get(name).runs_on.frozen_task_heads} == FROZEN_TASK_HEADS
    # every method on frozen features declares it: none re-trains or re-estimates an earlier step's head
    assert FROZEN_TASK_HEADS == {name for name, flags in DECLARED.items() if flags[0] == "features"}


def test_what_follows_from_a_declaration():
    assert RunsOn().reads_features and not RunsOn().trains_blocks
    tail = RunsOn(inputs="tokens")
    assert tail.trains_blocks and not tail.reads_features
    assert RunsOn(inputs="tokens", warms_up_on_features=True).reads_features  # the bank is built for the warm-up
    assert not RunsOn().frozen_task_heads  # a method that says nothing has its earlier heads read again


def test_a_declaration_that_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="choose from features, tokens"):
        RunsOn(inputs="images")
    with pytest.raises(ValueError, match="warms_up_on_features"):
        RunsOn(warms_up_on_features=True)
    with pytest.raises(ValueError, match="frozen_task_heads is for a method on features"):
        RunsOn(inputs="tokens", frozen_task_heads=True)
    for settings in (("mixd",), (), "mixed", ["mixed"]):  # a typo, none, a string, a list
        with pytest.raises(ValueError, match=r"RunsOn.settings .*: a tuple of one or more of incd, mixed"):
            RunsOn(settings=settings)
    assert RunsOn(settings=("mixed",)).settings == ("mixed",)


def test_the_settings_a_method_may_declare_are_the_settings():
    from bench.core.runs_on import SETTING_NAMES
    from bench.splits.settings import SETTINGS

    assert SETTING_NAMES == tuple(SETTINGS)


def test_the_catalogue_keeps_the_declaration():
    for name in DECLARED:
        info = method_info(name)
        assert info.runs_on == METHODS.get(name).runs_on
        assert (info.inputs, info.sees_past_steps) == (info.runs_on.inputs, info.runs_on.sees_past_steps)
    # a catalogue written by a bench that knew more fields still reads
    assert RunsOn.from_dict({**RunsOn(inputs="tokens").to_dict(), "later": 1}) == RunsOn(inputs="tokens")
    # and one written before `frozen_task_heads` reads as the safe default: its heads are read again
    older = {k: v for k, v in RunsOn(frozen_task_heads=True).to_dict().items() if k != "frozen_task_heads"}
    assert RunsOn.from_dict(older) == RunsOn()
    assert RunsOn.from_dict(RunsOn(frozen_task_heads=True).to_dict()).frozen_task_heads

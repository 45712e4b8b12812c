"""Every config value of a run is checked before anything runs: its type against the default it
replaces, its range where one exists, its choices where there are some. One line names the key, the
value and what is valid, so that `method.epochs=abc` or `method.epochs=-3` never reaches a run.

The type comes from the default: the method's `equations` dict (which names every key) for `method` keys, `DEFAULT_SECTIONS`
for `features` and `backbone`, the reader's signature for `dataset` options. Ranges follow from the
key's name (every `*epochs` is a count of at least 1, every `*batch_size` too, ...), choices from the
method class (`Method.hparam_choices`) and from `bench.config.spec` for the shared sections.
"""
from __future__ import annotations

import inspect
import math
import re
from typing import Any, Callable, Mapping

from bench.errors import BenchError

# (test, what is valid) by key name; the first matching pattern applies
RANGES: list[tuple[str, Callable[[Any], bool], str]] = [
    (r"(.*_)?epochs$", lambda v: v >= 1, "an integer >= 1"),
    (r"(.*_)?batch_size$", lambda v: v >= 1, "an integer >= 1"),
    (r"(.*_)?iters?$|max_iter$|n_init$", lambda v: v >= 1, "an integer >= 1"),
    (r"lr$", lambda v: v > 0, "a number > 0"),
    (r"(temperature|sk_epsilon)$", lambda v: v > 0, "a number > 0"),
    (r"(eta_min|weight_decay|noise)$", lambda v: v >= 0, "a number >= 0"),
    (r"momentum$", lambda v: 0 <= v < 1, "a number in [0, 1)"),
    (r"(.*_)?(fraction|prob|p)$", lambda v: 0 <= v <= 1, "a probability in [0, 1]"),
    (r"replay_per_class$|(.*_)?seed$|val_per_class$", lambda v: v >= 0, "an integer >= 0"),
    (r"(num_classes|train_per_class|test_per_class|channels)$", lambda v: v >= 1, "an integer >= 1"),
    (r"views$", lambda v: v >= 0, "an integer >= 0"),
    (r"(.*_)?min_scale$", lambda v: 0 < v <= 1, "a number in (0, 1]"),
    (r"view_(brightness|contrast|saturation)$", lambda v: v >= 0, "a number >= 0"),
    (r"view_hue$", lambda v: 0 <= v <= 0.5, "a number in [0, 0.5]"),
    (r"image_size$", lambda v: v >= 4, "an integer >= 4"),
    (r"shrinkage$", lambda v: 0 < v <= 1, "a number in (0, 1]"),  # Gaussian per class: a covariance's
    (r"min_variance$", lambda v: v > 0, "a number > 0"),  # shrinkage and floor keep it invertible
]
NUMBER = (int, float)


def _type_name(value: Any) -> str:
    return {bool: "True or False", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a section"}.get(type(value), type(value).__name__)


def _type_ok(value: Any, default: Any) -> bool:
    if default is None:
        return True  # optional keys are checked by their own rule below
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, NUMBER) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, type(default))


def _fail(key: str, value: Any, valid: str) -> BenchError:
    return BenchError(f"bad config value {key}={value!r}: must be {valid}")


def check_value(key: str, value: Any, default: Any, choices: Mapping[str, tuple[Any, ...]] = {}) -> None:
    """Raise a one-line `BenchError` unless `value` may replace `default` for the dotted `key`."""
    name = key.rsplit(".", 1)[-1]
    if key in choices or name in choices:
        allowed = choices.get(key, choices.get(name, ()))
        if value not in allowed:
            raise _fail(key, value, f"one of {', '.join(map(str, allowed))}")
        return
    if not _type_ok(value, default):
        raise _fail(key, value, _type_name(default) + (f" (the default is {default!r})" if default is not None else ""))
    if isinstance(value, NUMBER) and not isinstance(value, bool):
        for pattern, test, valid in RANGES:
            if re.fullmatch(pattern, name):
                if not test(value):
                    raise _fail(key, value, valid)
                break


def check_method(params: Mapping[str, Any], defaults: Mapping[str, Any], choices: Mapping[str, tuple[Any, ...]],
                 n_steps: int) -> None:
    """A run's `method` section against its preset file's `equations` values and the class's choices."""
    for key, value in params.items():
        dotted = f"method.{key}"
        if key == "epochs_per_step":  # None, or one epoch count per step
            if value is not None and not (isinstance(value, (list, tuple)) and len(value) >= n_steps
                                          and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                                  for v in value)):
                raise _fail(dotted, value, f"None or a list of at least {n_steps} integers >= 1, one per step")
        elif re.fullmatch(r"view_.*_p", key):  # one probability per view (CaSSLe's asymmetric views)
            if not (isinstance(value, (list, tuple)) and len(value) == 2
                    and all(isinstance(v, NUMBER) and not isinstance(v, bool) and 0 <= v <= 1 for v in value)):
                raise _fail(dotted, value, "a list of two probabilities in [0, 1], one per view")
        elif key == "unfreeze":  # a count of last blocks or the name of the first trainable block
            if not ((isinstance(value, int) and not isinstance(value, bool) and value >= 1)
                    or (isinstance(value, str) and re.fullmatch(r"blocks\.\d+", value))):
                raise _fail(dotted, value, "an integer >= 1 (how many last blocks train) or a block name such as "
                                           "blocks.11")
        else:
            check_value(dotted, value, defaults.get(key), choices)


def check_sections(config: Mapping[str, Any], defaults: Mapping[str, Mapping[str, Any]],
                   choices: Mapping[str, tuple[Any, ...]]) -> None:
    """The `features`, `backbone` and `precision` sections against `bench.config.spec.DEFAULT_SECTIONS`."""
    for section in ("features", "backbone", "precision", "tuning"):
        for key, value in config.get(section, {}).items():  # a spec recorded before `precision` has none
            default = defaults[section].get(key)
            if section == "backbone" and key == "pretrained":  # True, False or a weights file
                if not isinstance(value, (bool, str)) or value == "":
                    raise _fail("backbone.pretrained", value, "true, false or the path of a weights file")
            elif key != "kwargs":  # model arguments: the model factory checks them
                check_value(f"{section}.{key}", value, default, choices)
    order = config.get("split", {}).get("class_order_seed")
    if order is not None and not (isinstance(order, int) and not isinstance(order, bool) and order >= 0):
        raise _fail("split.class_order_seed", order, "None (the canonical class order) or an integer >= 0")
    holdout = config.get("tuning", {}).get("holdout", 0.0)
    if not 0 <= holdout < 1:
        raise _fail("tuning.holdout", holdout, "a fraction in [0, 1): the share of each class's training images held "
                                               "out and scored in place of the test set (0: the test set)")
    tuning = config.get("tuning", {})
    if tuning.get("study") and (holdout or not tuning.get("study_protocol") or tuning.get("study_trials", 0) < 1):
        raise BenchError(f"tuning.study={tuning['study']!r} marks a run holding a study's best values on the reported "
                         "protocol: it takes tuning.study_protocol and tuning.study_trials >= 1, and no tuning.holdout "
                         "(bench tune sets them)")
    setting = config.get("setting", {})
    if holdout and (setting.get("draw") == "happy" or setting.get("manifest_file")):
        raise BenchError(f"tuning.holdout={holdout} holds training images out, which "
                         + ("Happy's replayed draw (setting.draw=happy) would hold" if setting.get("draw") == "happy"
                            else "a given split manifest (setting.manifest_file) indexes")
                         + ": tune on bench's own draw (setting.draw=bench)")
    feat = config["features"]
    if feat.get("mode") == "bank" and feat.get("views", 2) < 2:
        raise _fail("features.views", feat["views"], "an integer >= 2 in bank mode (two different views per draw)")


def check_dataset_options(reader: type, options: Mapping[str, Any]) -> None:
    """Dataset options against the reader's keyword defaults (`synthetic`'s `num_classes` ...)."""
    params = inspect.signature(reader).parameters
    for key, value in options.items():
        if key == "root" or key not in params:
            continue  # unknown names are the reader's to refuse, with its valid options
        default = params[key].default
        if default is inspect.Parameter.empty:
            continue
        check_value(f"dataset.{key}", value, default)

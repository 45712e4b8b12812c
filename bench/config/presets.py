"""A run's configuration, resolved in this order (later wins): the method's preset (`registries/presets/<slug>.py`:
`code`, the default, or a variant such as `equations`, with its per-dataset/split `overrides`; a preset may also
set `features` or `backbone` keys, as every `code` preset sets `features.policy`), the grid's `cfg`, then
`--cfg-options section.key=value` from the command line. Every value is then checked (`bench.config.validate`)
before anything runs.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Mapping, Sequence

from bench.config.spec import (DEFAULT_PRESET, DEFAULT_SECTIONS, EQUATIONS, PRESET_SECTIONS, read_config_file,
                               unknown_method)
from bench.errors import BenchError, closest, did_you_mean, suggestion, unknown


def preset_names(cfg: Mapping[str, Any]) -> list[str]:
    """Every top-level dict of a preset file except `overrides` is a preset (`equations` and `code` are
    required), the default first."""
    names = [k for k, v in cfg.items() if isinstance(v, Mapping) and k != "overrides" and not k.startswith("_")]
    return sorted(names, key=lambda k: (k != DEFAULT_PRESET, k != EQUATIONS, k))


@functools.lru_cache(maxsize=None)
def _read_config(path: str) -> dict[str, Any]:
    return read_config_file(path, "preset file")


def _preset(method: str, preset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The preset's dict and its per-dataset/split overrides: `equations` as written; `code` as its
    changes to `equations`; any other preset as its changes to `code`, its overrides merged over
    `code`'s (a variant of the authors' runs keeps their per-dataset schedules)."""
    from bench.registries.catalogue import method_info

    info = method_info(method)
    if info is None:
        raise unknown_method(method)
    cfg = copy.deepcopy(_read_config(str(info.preset_path())))
    if preset not in preset_names(cfg):
        raise unknown(f"preset of {method}", preset, preset_names(cfg))
    layers = {EQUATIONS: [EQUATIONS], DEFAULT_PRESET: [EQUATIONS, DEFAULT_PRESET]}.get(
        preset, [EQUATIONS, DEFAULT_PRESET, preset])
    params: dict[str, Any] = {}
    for layer in layers:
        params.update(cfg[layer])
    overrides = cfg.get("overrides", {})
    merged: dict[str, Any] = {}
    for layer in layers[1:] if preset != EQUATIONS else layers:  # `equations` has its own, from no other
        merged = deep_merge(merged, overrides.get(layer, {}))
    return params, merged


def load_preset(method: str, preset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The method's hyper-parameters for a preset and its per-dataset/split overrides (without the
    other sections a preset may set: `preset_sections`)."""
    params, overrides = _preset(method, preset)
    return {k: v for k, v in params.items() if k not in PRESET_SECTIONS}, overrides


def preset_sections(method: str, preset: str) -> dict[str, dict[str, Any]]:
    """The run-config sections other than `method` that a preset sets, e.g. the `code` presets'
    `features=dict(policy="code")`: what the authors ran is more than the method's keys."""
    params, _ = _preset(method, preset)
    return {k: dict(v) for k, v in params.items() if k in PRESET_SECTIONS}


def deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_options(config: dict[str, Any], options: Mapping[str, Any], *, allow_new: Sequence[str] = ()) -> dict[str, Any]:
    """Apply dotted `section.key=value` options, refusing keys the section does not know.

    Sections named in `allow_new` take any key (dataset reader options are checked by the reader).
    """
    out = copy.deepcopy(config)
    for dotted, value in options.items():
        parts = dotted.split(".")
        section = parts[0]
        if section not in out:
            raise BenchError(f"bad --cfg-options key {dotted!r}: unknown section {section!r}; valid sections: "
                             f"{', '.join(sorted(out))}{did_you_mean(section, out)}")
        if len(parts) < 2:
            raise BenchError(f"bad --cfg-options key {dotted!r}: use section.key=value, e.g. method.epochs=10")
        node = out[section]
        for i, part in enumerate(parts[1:], start=1):
            last = i == len(parts) - 1
            free = section in allow_new or (section == "backbone" and parts[1] == "kwargs")
            if part not in node and not free:
                keys = [f"{'.'.join(parts[:i])}.{k}" for k in sorted(node)]
                why = (" (the setting section's keys are a mixed split's: --splits happy-5-stage ...)"
                       if section == "setting" and list(node) == ["name"] else "")
                raise BenchError(f"bad --cfg-options key {dotted!r}: {part!r} is not a known key{why}; valid keys: "
                                 f"{', '.join(keys)}{'' if why else close_keys(part, node, parts[:i])}")
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise BenchError(f"bad --cfg-options key {dotted!r}: {'.'.join(parts[:i + 1])} is not a section")
    return out


def _matching_overrides(overrides: Mapping[str, Any], dataset: str, split: str) -> dict[str, Any]:
    """Preset overrides keyed `dataset`, `dataset/split` or `*/split` (most specific last)."""
    merged: dict[str, Any] = {}
    for key in (f"*/{split}", dataset, f"{dataset}/{split}"):
        merged.update(overrides.get(key, {}))
    return merged


def resolve_config(method: str, preset: str, dataset: str, split: str,
                   grid_cfg: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The run's config. A `method.<key>` setting (from the grid or the command line) applies to
    every method whose preset has that key and is skipped by the others, so `method.epochs=5`
    shortens every trained method of a grid and leaves K-means alone; `expand` refuses a key that
    no selected method knows."""
    params, overrides = load_preset(method, preset)
    params.update(_matching_overrides(overrides, dataset, split))
    config = {"method": params, **copy.deepcopy(DEFAULT_SECTIONS)}
    from bench.splits.settings import MIXED_SPLITS, mixed_setting

    if split in MIXED_SPLITS:  # the split names the setting: its section starts from the protocol's defaults
        from bench.data import draws_partition

        config["setting"] = mixed_setting(split, draws_partition(dataset))
    sections = _flatten(preset_sections(method, preset))
    for source in (sections, _flatten(grid_cfg), options):
        relevant = {k: v for k, v in source.items()
                    if not (k.startswith("method.") and k.split(".")[1] not in params)}
        config = apply_options(config, relevant, allow_new=("dataset",))
    if split in MIXED_SPLITS:
        from bench.splits.settings import with_manifest_file

        config["setting"] = with_manifest_file(config["setting"])
    return config


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and not dotted.startswith("backbone.kwargs."):
            flat.update(_flatten(value, dotted + "."))  # an empty section sets nothing
        else:
            flat[dotted] = value
    return flat


def close_keys(key: str, known: Any, prefix: Sequence[str]) -> str:
    """`; did you mean 'method.epochs'?`: the keys of a section closest to `key`, compared without the section's
    name (a shared `method.` would make every key look alike), given with it."""
    return suggestion(".".join([*prefix, k]) for k in closest(key, known))

"""A search space: the hyper-parameters a study samples, each a dotted config key (`method.lr`) with a range (`low`,
`high`, `log`, `int`) or `choices`. Declared beside the method's presets (`_search_space` in
`registries/presets/<slug>.py`, a name the preset loader skips) or in a JSON or YAML file (`--space FILE`: data only,
read with `yaml.safe_load`, never code). Every range is checked before a trial runs."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from bench.errors import BenchError

RANGE_KEYS = {"low", "high", "log", "int"}


@dataclass(frozen=True)
class Param:
    """One searched key: a float or integer range (`log`: sampled on a log scale), or a list of `choices`."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] = ()

    def describe(self) -> dict[str, Any]:
        if self.choices:
            return {"choices": list(self.choices)}
        return {"low": self.low, "high": self.high, "log": self.log, "int": self.integer}


def parse_space(data: Any, where: str) -> tuple[Param, ...]:
    """The parameters of a space's data (a mapping of dotted keys), or a BenchError naming the bad entry."""
    if not isinstance(data, Mapping) or not data:
        raise BenchError(f"{where}: a search space is a mapping of config keys (method.lr) to a range "
                         f"({{low, high, log, int}}) or {{choices: [...]}}; got {type(data).__name__ if data else 'nothing'}")
    params = []
    for key, spec in data.items():
        if not isinstance(key, str) or "." not in key:
            raise BenchError(f"{where}: {key!r} is not a config key (section.key, e.g. method.lr)")
        if not isinstance(spec, Mapping):
            raise BenchError(f"{where}: {key} must be a range {{low, high}} or {{choices: [...]}}, not {spec!r}")
        if "choices" in spec:
            choices = spec["choices"]
            if not isinstance(choices, list) or not choices or set(spec) != {"choices"}:
                raise BenchError(f"{where}: {key}: choices is a non-empty list, alone in its entry")
            params.append(Param(key, choices=tuple(choices)))
            continue
        unknown = set(spec) - RANGE_KEYS
        if unknown or not {"low", "high"} <= set(spec):
            raise BenchError(f"{where}: {key}: a range has low and high (and optionally log, int), not "
                             f"{', '.join(sorted(spec))}")
        low, high = spec["low"], spec["high"]
        integer, log = bool(spec.get("int", False)), bool(spec.get("log", False))
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
        if not numbers or (integer and not all(isinstance(v, int) for v in (low, high))):
            raise BenchError(f"{where}: {key}: low and high are {'integers' if integer else 'numbers'}, got "
                             f"{low!r} and {high!r}")
        if not low < high:
            raise BenchError(f"{where}: {key}: an {'empty' if low == high else 'inverted'} range [{low}, {high}]: "
                             f"low must be below high")
        if log and low <= 0:
            raise BenchError(f"{where}: {key}: a log range needs low > 0, got {low}")
        params.append(Param(key, float(low) if not integer else low, float(high) if not integer else high, log, integer))
    return tuple(params)


def read_space_file(path: Path) -> tuple[Param, ...]:
    """A space from a JSON or YAML file (data only)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise BenchError(f"--space {path}: cannot read it ({err.strerror})") from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as err:  # json and yaml raise their own types
        raise BenchError(f"--space {path}: not {'JSON' if path.suffix == '.json' else 'YAML'} "
                         f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from None
    return parse_space(data, f"--space {path}")


def preset_space(method: str) -> tuple[Param, ...]:
    """The `_search_space` the method's preset file declares, or a BenchError saying it declares none."""
    from bench.config.presets import _read_config
    from bench.registries.catalogue import method_info

    info = method_info(method)
    path = info.preset_path() if info is not None else None
    data = _read_config(str(path)).get("_search_space") if path is not None else None
    if not data:
        raise BenchError(f"{method} declares no search space beside its presets (`_search_space` in "
                         f"{path or 'its preset file'}): give one with --space FILE")
    return parse_space(data, f"{method}'s _search_space")


def canonical(params: tuple[Param, ...]) -> str:
    """The space as the study records it: a second tuner with another space is refused."""
    return json.dumps({p.key: p.describe() for p in params}, sort_keys=True)


def sample(trial: Any, params: tuple[Param, ...]) -> dict[str, Any]:
    """The trial's values, one per parameter, through Optuna's `suggest_*`."""
    values: dict[str, Any] = {}
    for p in params:
        if p.choices:
            values[p.key] = trial.suggest_categorical(p.key, list(p.choices))
        elif p.integer:
            values[p.key] = trial.suggest_int(p.key, int(p.low or 0), int(p.high or 0), log=p.log)
        else:
            values[p.key] = trial.suggest_float(p.key, float(p.low or 0.0), float(p.high or 0.0), log=p.log)
    return values

"""`bench report --store PATH`: a local grid's finished runs beside the store's entries on the same protocol (dataset,
split, backbone), each local method against each stored one with the paired image bootstrap
(`bench.reporting.image_bootstrap`) computed from both predictions, where both scored the very same test images in
the same order. Nothing of a stored method is run again: its predictions are what it is compared by."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from tabulate import tabulate

from bench.config.spec import RunSpec
from bench.core.storage import write_atomic
from bench.errors import first_line
from bench.reporting.image_bootstrap import NotBootstrapped, bootstrap_scores, load_scorer, paired
from bench.runs.rundir import DONE, METRICS
from bench.store.verify import verify_store

COMPARISON = "store_comparison.md"


@dataclass(frozen=True)
class Side:
    """One run on one side of the comparison: its protocol, label, seed, where its predictions lie, its reported A."""

    protocol: tuple[str, str, str]  # dataset, split label, backbone
    label: str
    seed: int
    run: Path
    source: str  # `flavour/metric` of its A
    level: str  # "local", or the store entry's level


def local_sides(directories: Iterable[Path]) -> list[Side]:
    sides = []
    for run in directories:
        if not (Path(run) / DONE).exists():
            continue
        try:
            spec = RunSpec.from_json((Path(run) / "spec.json").read_text())
            source = str(pd.read_parquet(Path(run) / METRICS, columns=["reported_A"])["reported_A"].iloc[0])
        except Exception:  # an unreadable run: the report says so; it has nothing to compare here
            continue
        sides.append(Side((spec.dataset, spec.split_label, spec.backbone), spec.label, spec.seed, Path(run), source,
                          "local"))
    return sides


def store_sides(store: Path) -> list[Side]:
    """The store's entries that recompute (recomputed or reproduced), as sides."""
    sides = []
    for verdict in verify_store(store, say=None):
        if verdict.checked is None or verdict.level is None:
            continue
        entry = verdict.checked.entry
        sides.append(Side((entry["dataset"], entry["split"], entry["backbone"]), entry["label"], int(entry["seed"]),
                          store / verdict.path, str(entry["reported"]["A"]), verdict.level))
    return sides


def compare_with_store(directories: Sequence[Path], store: Path, out: Path, resamples: int = 1000) -> Path:
    """Write `store_comparison.md` in `out`: per protocol the local grid shares with the store, each (local method,
    stored method) pair with both means, the paired difference, its 95% interval and P(local better)."""
    local, stored = local_sides(directories), store_sides(Path(store))
    protocols = sorted({s.protocol for s in local} & {s.protocol for s in stored})
    sections = [f"# The local runs beside the store {store}\n",
                "Each pair is compared on the test images both scored (the same images in the same order), by the "
                f"paired bootstrap over images and seeds ({resamples} resamples) from both runs' stored predictions.\n"]
    if not protocols:
        ran = sorted({" · ".join(s.protocol) for s in local})
        sections.append(f"No protocol of the local runs ({'; '.join(ran) or 'none finished'}) has an entry in the "
                        f"store that recomputes.\n")
    for protocol in protocols:
        sides = [s for s in local + stored if s.protocol == protocol]
        scorers, said = {}, []
        for side in sides:
            key = (f"{'local' if side.level == 'local' else 'store'}: {side.label}", side.seed)
            try:
                scorers[key] = load_scorer(side.run, side.source)
            except NotBootstrapped as err:
                said.append(f"{key[0]} seed {side.seed}: not bootstrapped ({first_line(err)})")
        scores = bootstrap_scores(scorers, resamples=resamples)
        means: dict[str, list[float]] = defaultdict(list)
        for key, scorer in scorers.items():
            means[key[0]].append(float(scorer.score(np.ones(scorer.images))[0]))
        levels = {f"store: {s.label}": s.level for s in sides if s.level != "local"}
        rows = []
        for first in sorted(k for k in means if k.startswith("local: ")):
            for second in sorted(k for k in means if k.startswith("store: ")):
                pair = paired(scorers, scores, first, second)
                rows.append([first[7:], f"{np.mean(means[first]):.2f} ({len(means[first])})", second[7:], levels[second],
                             f"{np.mean(means[second]):.2f} ({len(means[second])})"]
                            + ([f"{pair.diff:+.2f}", f"[{pair.low:+.2f}, {pair.high:+.2f}]", f"{pair.p_improvement:.2f}",
                                str(pair.seeds), str(pair.images)] if pair else ["", "", "", "0",
                                                                                 "not the same test images"]))
        sections.append(f"## {' · '.join(protocol)}\n\n" + tabulate(
            rows, headers=["local method", "A (seeds)", "store method", "level", "A (entries)", "local − store",
                           "95% interval", "P(local better)", "seeds paired", "images"], tablefmt="github",
            disable_numparse=True) + "\n"
            + "".join(f"\n- {line}" for line in said) + "\n")
    path = Path(out) / COMPARISON
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "\n".join(sections))
    return path

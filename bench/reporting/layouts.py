"""Which rows a table has and what their row headers say, one builder per paper table.

A `Shape` is format-free: the renderers in `table.py` turn it into LaTeX, Markdown or CSV, so
every layout shares one copy of the cell formatting and of the bolding. The layout names are
`bench.config.grids.LAYOUTS` (a grid block picks one with its `layout` key)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import pandas as pd

from bench.config.spec import DEFAULT_PRESET, method_label
from bench.features.weights import REGISTERED_BACKBONES, SHOWN_NAMES

YES, NO = "✓", "✗"  # the renderers draw these marks (LaTeX: \checkmark and $\times$)
# the paper's names of its backbones (its tables' CSVs) -> the registered names
PAPER_CSV_BACKBONES = {"ResNet50-DINO": "dino-resnet50", "ViT-B/16-DINO": "dino-vitb16", "ViT-B/16-CLIP": "clip-vitb16"}
# Tab. 4's rows in the paper's order, then the field's backbones in their registration order
BACKBONE_NAMES = {**{registry: shown for shown, registry in PAPER_CSV_BACKBONES.items()},
                  **{name: SHOWN_NAMES[name] for name in REGISTERED_BACKBONES}}
COSNORM_OFF = "no_cosnorm"  # the preset of Tab. 3's "w/o CosNorm" rows
KTRFR_METHOD = "Baseline++"  # the only method that trains KTRFR
OWN_BASELINES = ("Baseline", "Baseline++")  # the paper's methods: below the rule in the appendix's table
# Tab. 3's rows (a)-(d) as (method, preset); always shown, with `--` where runs are missing
ABLATION_ROWS = (("Baseline++", DEFAULT_PRESET), ("Baseline", DEFAULT_PRESET), ("Baseline++", COSNORM_OFF),
                 ("Baseline", COSNORM_OFF))


@dataclass(frozen=True)
class Row:
    label: str  # the scores' label whose cells fill the row (a label without scores shows `--`)
    header: tuple[str, ...]  # one text per row-header column
    keys: Mapping[str, str]  # the CSV's key columns for this row
    rule_above: bool = False  # a separating rule before it (Tab. 2: between references and baselines)


@dataclass(frozen=True)
class Shape:
    columns: tuple[str, ...]  # titles of the row-header columns (after the split column)
    align: str  # LaTeX alignment of those columns
    groups: tuple[tuple[str, tuple[Row, ...]], ...]  # (split, its rows), in order
    split_column: bool = True  # Tab. 4 has a single split and no split column
    key_columns: tuple[str, ...] = ("method",)  # the CSV's key columns, in order


def axes(scores: pd.DataFrame) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """Splits, datasets and per-split labels present in the scores, in their categorical order."""
    def ordered(column: str, present: set) -> list[str]:
        values = scores[column].cat.categories if hasattr(scores[column], "cat") else dict.fromkeys(scores[column])
        return [v for v in values if v in present]

    splits = ordered("split", set(scores["split"]))
    datasets = ordered("dataset", set(scores["dataset"]))
    labels = {s: ordered("label", set(scores.loc[scores["split"] == s, "label"])) for s in splits}
    return splits, datasets, labels


def _identity(scores: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    """label → (method, preset, backbone); frames without those columns read as (label, the default, "")."""
    return {str(r["label"]): (str(r.get("method", r["label"])), str(r.get("preset", DEFAULT_PRESET)),
                              str(r.get("backbone", ""))) for r in scores.drop_duplicates("label").to_dict("records")}


def _extra(label: str, identity: tuple[str, str, str]) -> str:
    """What `label` says besides its method and backbone: the configuration that sets its runs apart
    from others of the cell (`method.epochs=3`, `aggregate.config_labels`), or a version (`--by`); ""
    for most. Layouts that name rows by method and backbone add it, so that no two rows look alike."""
    method, preset, backbone = identity
    parts = label.split(" · ")
    if parts[0] != method_label(method, preset):  # a frame without identity columns: nothing to tell
        return ""
    return " · ".join(p for p in parts[1:] if p != backbone)


def comparison(scores: pd.DataFrame, references: Sequence[str]) -> Shape:
    """Tab. 5: one row per method label, in the grid's order."""
    splits, _, labels = axes(scores)
    groups = tuple((s, tuple(Row(l, (l,), {"method": l}) for l in labels[s])) for s in splits)
    return Shape(("method",), "l", groups)


def references_first(scores: pd.DataFrame, references: Sequence[str]) -> Shape:
    """Tab. 2: the references (never bold), a rule, then the incremental methods."""
    splits, _, labels = axes(scores)
    groups = []
    for split in splits:
        refs = [l for l in labels[split] if l in references]
        rest = [l for l in labels[split] if l not in references]
        rows = [Row(l, (l,), {"method": l, "reference": "yes"}) for l in refs]
        rows += [Row(l, (l,), {"method": l, "reference": "no"}, rule_above=bool(refs) and i == 0)
                 for i, l in enumerate(rest)]
        groups.append((split, tuple(rows)))
    return Shape(("method",), "l", tuple(groups), key_columns=("method", "reference"))


def baselines_last(scores: pd.DataFrame, references: Sequence[str]) -> Shape:
    """The appendix's CaSSLe table: the compared methods, a rule, then the paper's own baselines."""
    splits, _, labels = axes(scores)
    identity = _identity(scores)
    groups = []
    for split in splits:
        others = [l for l in labels[split] if identity[l][0] not in OWN_BASELINES]
        ours = [l for l in labels[split] if identity[l][0] in OWN_BASELINES]
        rows = [Row(l, (l,), {"method": l}) for l in others]
        rows += [Row(l, (l,), {"method": l}, rule_above=bool(others) and i == 0) for i, l in enumerate(ours)]
        groups.append((split, tuple(rows)))
    return Shape(("method",), "l", tuple(groups))


def ablation(scores: pd.DataFrame, references: Sequence[str]) -> Shape:
    """Tab. 3: rows (a)-(d) with a CosNorm and a KTRFR mark; CosNorm is off exactly in the
    `no_cosnorm` preset, KTRFR on exactly for Baseline++. Other labels follow as (e), (f), …"""
    splits, _, labels = axes(scores)
    identity = _identity(scores)
    groups = []
    for split in splits:
        present: dict[tuple[str, str], list[str]] = {}
        for label in labels[split]:  # one (method, preset) may have rows of several configurations
            present.setdefault(identity[label][:2], []).append(label)
        wanted = list(ABLATION_ROWS) + [key for key in present if key not in ABLATION_ROWS]
        rows = []
        for i, (method, preset) in enumerate(wanted):
            letter = f"({chr(ord('a') + i)})"
            cosnorm, ktrfr = preset != COSNORM_OFF, method == KTRFR_METHOD
            for label in present.get((method, preset), [method_label(method, preset)]):
                extra = _extra(label, identity[label]) if label in identity else ""
                keys = {"row": letter, "cosnorm": "yes" if cosnorm else "no", "ktrfr": "yes" if ktrfr else "no",
                        "method": " · ".join(filter(None, (method_label(method, preset), extra)))}
                rows.append(Row(label, (" ".join(filter(None, (letter, extra))), YES if cosnorm else NO,
                                        YES if ktrfr else NO), keys))
        groups.append((split, tuple(rows)))
    return Shape(("", "CosNorm", "KTRFR"), "lcc", tuple(groups), key_columns=("row", "cosnorm", "ktrfr", "method"))


def backbones(scores: pd.DataFrame, references: Sequence[str]) -> Shape:
    """Tab. 4: one row per backbone, named as in the paper (ResNet50-DINO, ViT-B/16-DINO, ViT-B/16-CLIP
    first, in that order, then the field's registered backbones: ViT-B/14-DINOv2, ...); a method
    column only when the block has several methods, a split column only when it has several splits."""
    splits, _, labels = axes(scores)
    identity = _identity(scores)
    methods = list(dict.fromkeys(method_label(*identity[l][:2]) for s in splits for l in labels[s]))
    rank = {b: i for i, b in enumerate(BACKBONE_NAMES)}
    groups = []
    for split in splits:
        def key(label: str, split: str = split) -> tuple[int, int, int]:
            backbone = identity[label][2]
            return (methods.index(method_label(*identity[label][:2])), rank.get(backbone, len(rank)),
                    labels[split].index(label))  # unknown backbones after the paper's, in grid order
        rows = []
        for label in sorted(labels[split], key=key):
            method, backbone = method_label(*identity[label][:2]), identity[label][2]
            extra = _extra(label, identity[label])  # two configurations of one backbone: two rows told apart
            shown = " · ".join(filter(None, (BACKBONE_NAMES.get(backbone, backbone), extra)))
            rows.append(Row(label, (method, shown) if len(methods) > 1 else (shown,),
                            {"method": " · ".join(filter(None, (method, extra))), "backbone": backbone}))
        groups.append((split, tuple(rows)))
    columns = ("method", "backbone") if len(methods) > 1 else ("backbone",)
    return Shape(columns, "l" * len(columns), tuple(groups), split_column=len(splits) > 1,
                 key_columns=("method", "backbone"))


BUILDERS: dict[str, Callable[[pd.DataFrame, Sequence[str]], Shape]] = {
    "comparison": comparison, "references": references_first, "ablation": ablation, "backbones": backbones,
    "baselines_last": baselines_last}


def shape_of(scores: pd.DataFrame, layout: str, references: Sequence[str] = ()) -> Shape:
    if layout not in BUILDERS:
        raise ValueError(f"unknown table layout {layout!r}; choose from {', '.join(BUILDERS)}")
    return BUILDERS[layout](scores, references)

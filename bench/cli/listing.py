"""`bench list KIND`: what is registered (methods with their slugs, datasets, splits, backbones, grids)."""
from __future__ import annotations

import argparse
from typing import Any

LIST_KINDS = ("methods", "datasets", "splits", "backbones", "grids")


def add_parser(sub: Any) -> None:
    lst = sub.add_parser("list", help="show what is registered")
    lst.add_argument("kind", choices=LIST_KINDS)


def command(args: argparse.Namespace) -> int:
    from bench.config.spec import SPLITS
    from bench.config.grids import grid_names, load_grid
    from bench.registries import DATASETS
    from bench.registries.catalogue import catalogue, known_method, method_names

    if args.kind == "methods":
        from bench.config.spec import method_slug, method_slugs
        from bench.config.presets import _read_config, preset_names

        method_slugs()  # two methods with one slug: an error naming both, before anything is listed
        for name in method_names():
            info = known_method(name)
            role = "reference, sees past steps" if info.sees_past_steps else "incremental"
            presets = preset_names(_read_config(str(info.preset_path())))
            settings = "+".join(info.runs_on.settings)  # incd: class-iNCD; mixed: continual category discovery
            print(f"{name:<18} {method_slug(name):<18} {info.inputs:<9} {settings:<10} {role}; "
                  f"presets: {', '.join(presets)}")
    elif args.kind == "datasets":
        DATASETS.import_from_location()
        for name, cls in sorted(DATASETS.module_dict.items()):
            print(f"{name:<14} {_first_doc_line(cls)}")
    elif args.kind == "splits":
        from bench.splits.settings import MIXED_SPLITS

        for name, n in SPLITS.items():
            print(f"{name:<17} class-iNCD: {n} tasks of contiguous classes in the dataset's canonical order")
        for name, mixed in MIXED_SPLITS.items():
            print(f"{name:<17} mixed setting ({mixed.source}): a labelled step, then {mixed.steps} steps of old "
                  f"and new classes (docs/settings.md)")
    elif args.kind == "backbones":
        from bench.features.weights import PUBLISHED_FILES

        # the registered backbones with the file their authors publish (found under --weights-dir), then the rest
        docs = catalogue()["backbone_docs"]
        names = [n for n in PUBLISHED_FILES if n in docs] + sorted(n for n in docs if n not in PUBLISHED_FILES)
        width = max(len(f) for f in PUBLISHED_FILES.values())
        for name in names:
            shown = "timm:<model name>" if name == "timm" else name
            print(f"{shown:<20} {PUBLISHED_FILES.get(name, '-'):<{width}} {docs[name]}")
    else:
        from bench.config.grids import expand

        names = grid_names()
        width = max(map(len, names), default=8)
        for name in names:
            g = load_grid(name)
            n = len(expand(g))
            print(f"{name:<{width}} {n:>4} runs: {', '.join(g.methods)} on {', '.join(g.datasets)}; "
                  f"{', '.join(g.splits)}; {', '.join(g.backbones)}; seeds {', '.join(map(str, g.seeds))}")
    return 0


def _first_doc_line(obj: Any) -> str:
    return (obj.__doc__ or "").strip().splitlines()[0] if obj.__doc__ else ""


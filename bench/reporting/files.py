"""A report's files: its tables in each format and its figures (radar plots, per-step curves)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

import pandas as pd

from bench.reporting.aggregate import (_value_text, accuracy_matrices, final_scores, flat_config, step_curves,
                                       step_forgetting)
from bench.reporting.table import TableFormat, escape_latex, render_table
from bench.core.storage import write_atomic

SUFFIX = {"latex": "tex", "markdown": "md", "csv": "csv"}
# in a report folder while `bench report` writes it: a folder that still holds it was left half-written (Ctrl-C)
INCOMPLETE = "INCOMPLETE"


def plain_name(text: str) -> str:
    """`text` as part of a file name a shell takes unquoted: every run of other characters than letters, digits,
    `.`, `_`, `+` and `-` becomes one `-` (`K known` → `K-known`, `happy-5-stage · draw 0` → `happy-5-stage-draw-0`)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", str(text)).strip("-") or "-"


def overrides_text(options: Mapping[str, Any] | None) -> str:
    """`--cfg-options` as the command took them (`setting.selection=last setting.evaluation=inductive`); "" for none."""
    return " ".join(f"{key}={_value_text(value)}" for key, value in (options or {}).items())


def report_title(grid: str, options: Mapping[str, Any] | None = None) -> str:
    """What every file of a report is headed with: its grid and the `--cfg-options` its runs were selected with, which
    may have changed what the grid's blocks define (a block's selection, its evaluation)."""
    given = overrides_text(options)
    return f"grid {grid}" + (f" with --cfg-options {given}" if given else "")


def block_title(grid: Any, block: Any, runs: Sequence[Any]) -> str:
    """A block's name as its runs ran it. The keys a grid's blocks set in their `cfg` are what tells its blocks apart
    (`setting.k` for K known and K estimated; `setting.selection` and `setting.evaluation` for Happy's selection and
    PromptCCD's protocol); where a run's value of one differs from what its block makes of it without `--cfg-options`
    (`--cfg-options setting.selection=last` on Happy's selection), the name says what the runs ran instead: `Happy's
    selection (overridden: setting.selection=last)`. A key a run lacks (a `method.` key of another method) tells
    nothing; other `--cfg-options` are in the report's title (`report_title`)."""
    from bench.config.presets import deep_merge, resolve_config

    defining = list(dict.fromkeys(key for b in grid.blocks for key in flat_config(b.cfg)))
    ran: dict[str, list[str]] = {}
    for spec in runs if defining else ():
        own = deep_merge(deep_merge(dict(grid.cfg), block.cfg), {"dataset": grid.dataset_options.get(spec.dataset, {})})
        meant = flat_config(resolve_config(spec.method, spec.preset, spec.dataset, spec.split, own, {}))
        actual = flat_config(spec.config)
        for key in defining:
            if key in actual and key in meant and actual[key] != meant[key]:
                values = ran.setdefault(key, [])
                if _value_text(actual[key]) not in values:
                    values.append(_value_text(actual[key]))
    if not ran:
        return block.name
    said = ", ".join(f"{key}={'|'.join(values)}" for key, values in ran.items())
    return f"{block.name} (overridden: {said})"


def latex_title(text: str) -> str:
    """`text` for a LaTeX caption: escaped, and `--cfg-options` kept two hyphens (LaTeX sets `--` as an en dash)."""
    return escape_latex(text).replace("--", "-{}-")


def markdown_header(title: str) -> str:
    """A markdown file's first lines: its caption, as pandoc reads one (`Table: ...`), then a blank line."""
    return f"Table: {title}.\n\n"


def row_order(frame: pd.DataFrame, specs: Sequence[Any]) -> list[str]:
    """The frame's row labels in the order of the runs they hold (`specs`, the grid's order): one
    method's rows (its backbones, configurations) stay together."""
    label_of = dict(zip(frame["run_id"], frame["label"].astype(str)))
    return list(dict.fromkeys(label_of[s.run_id] for s in specs if s.run_id in label_of))


def write_report(frame: pd.DataFrame, out_dir: Path, fmt: str, title: str,
                 order: Mapping[str, Sequence[str]] | None = None, exclude_from_best: Sequence[str] = (),
                 figures: bool = True, correction: str = "holm") -> list[Path]:
    """Write the table, and unless `figures` is False the radar plots and the per-step curves (a second
    format of the same report has them already); returns the files written. `correction`: the daggers'
    (`render_table`)."""
    if fmt not in SUFFIX:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(SUFFIX)}")
    if frame.empty:
        raise ValueError("no finished runs to report")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scores = final_scores(frame, order)
    seeds = sorted(set(scores["n"]))
    caption = (f"{latex_title(title)}: forgetting F (lower is better) and accuracy A (higher is better), "
               f"in \\%, mean $\\pm$ std over {'/'.join(map(str, seeds))} seed(s); best per column in bold"
               + (f" ({escape_latex(', '.join(exclude_from_best))}: reference methods, never bold)."
                  if exclude_from_best else "."))
    table = out_dir / f"table.{SUFFIX[fmt]}"
    head = markdown_header(title) if fmt == "markdown" else ""  # LaTeX: the caption; csv: tidy data, no preamble
    write_atomic(table, head + render_table(scores, cast(TableFormat, fmt), caption=caption,
                                            exclude_from_best=exclude_from_best, correction=correction))
    paths = [table]
    from bench.reporting.cgcd import cgcd_table, domain_table, render

    mixed = cgcd_table(frame)
    if not mixed.empty:  # the mixed setting's own table, beside the leaderboard
        paths.append(out_dir / f"cgcd.{SUFFIX[fmt]}")
        write_atomic(paths[-1], render(mixed, fmt, title))
    from bench.reporting.tuning import tuning_table

    tuned = tuning_table(frame)
    if not tuned.empty:  # the honest track beside the authors' tuning (docs/settings.md#tuning)
        paths.append(out_dir / f"tuning.{SUFFIX[fmt]}")
        write_atomic(paths[-1], render(tuned, fmt, title, "A (%) as each method's authors tune and select it, and "
                                                          "tuned by a bench study that never read the test images; "
                                                          "95% intervals over seeds"))
    domains = domain_table(frame)
    if not domains.empty:  # a domain-shifted stream's runs, by domain
        paths.append(out_dir / f"cgcd_domains.{SUFFIX[fmt]}")
        write_atomic(paths[-1], render(domains, fmt, title, "accuracy (%) after the last stage on each domain's test "
                                                            "images of the classes seen, mean ± std over seeds"))
    return paths + (write_figures(frame, out_dir, order, scores) if figures else [])


def write_figures(frame: pd.DataFrame, out_dir: Path, order: Mapping[str, Sequence[str]] | None = None,
                  scores: pd.DataFrame | None = None) -> list[Path]:
    """The radar plots, the per-step curves and the appendix's figures; `scores`: the frame's
    `final_scores`, if already computed."""
    from bench.reporting.plots import curve_plot, matrix_plot, radar_plot  # matplotlib: only where figures are drawn

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scores = final_scores(frame, order) if scores is None else scores
    paths: list[Path] = []
    # A radar needs at least three axes: one per split when splits cover several datasets,
    # otherwise one over every (split, dataset, metric).
    splits = [s for s in scores["split"].cat.categories if (scores["split"] == s).any()]
    if all(scores.loc[scores["split"] == s, "dataset"].nunique() >= 2 for s in splits):
        for split in splits:
            paths += radar_plot(scores, [split], out_dir / f"radar_{plain_name(split)}")
    else:
        paths += radar_plot(scores, splits, out_dir / "radar")
    curves = step_curves(frame, order)
    for (dataset, split), _ in curves.groupby(["dataset", "split"], observed=True):
        paths += curve_plot(curves, dataset, split, out_dir / f"curve_{plain_name(dataset)}_{plain_name(split)}")
    matrices = accuracy_matrices(frame, order)
    for (dataset, split), _ in matrices.groupby(["dataset", "split"], observed=True):
        paths += matrix_plot(matrices, dataset, split, out_dir / f"matrix_{plain_name(dataset)}_{plain_name(split)}")
    return paths + steps_figures(frame, out_dir, "steps", order, accuracy=curves)


def steps_figures(frame: pd.DataFrame, out_dir: Path, prefix: str, order: Mapping[str, Sequence[str]] | None = None,
                  accuracy: pd.DataFrame | None = None) -> list[Path]:
    """The appendix's figures: per dataset, per-step accuracy and forgetting of every method, one row
    per split (`<prefix>_<dataset>.png/.pdf`); `accuracy`: the frame's `step_curves`, if already computed."""
    from bench.reporting.plots import steps_plot

    accuracy = step_curves(frame, order) if accuracy is None else accuracy
    forgetting = step_forgetting(frame, order)
    paths = []
    for dataset in dict.fromkeys(accuracy["dataset"].astype(str)):  # in the report's order
        splits = list(dict.fromkeys(accuracy.loc[accuracy["dataset"] == dataset, "split"].astype(str)))
        paths += steps_plot(accuracy, forgetting, dataset, splits, Path(out_dir) / f"{prefix}_{plain_name(dataset)}")
    return paths


def block_reports(frame: pd.DataFrame, out_dir: Path, formats: Sequence[str], title: str,
                  blocks: Sequence[tuple[Any, Sequence[Any]]], order: Mapping[str, Sequence[str]],
                  exclude_from_best: Sequence[str] = (), correction: str = "holm", grid: Any = None
                  ) -> tuple[list[Path], list[tuple[str, str, pd.DataFrame]]]:
    """Per named block of a grid, given with its runs in the grid's order: its table in each text format
    (`table_<block>.<ext>`, in the block's layout, its daggers corrected with `correction`) and its appendix
    figures (`steps_<block>_<dataset>`); the files written, and the (title, layout, scores) of each block's
    table for the site. With the `grid`, a block whose runs ran another value of what defines it than its own is
    named with it (`block_title`), in its files' names too: `table_<block>-overridden-<key>-<value>.<ext>`
    (`table_Happy-s-selection-overridden-setting-selection-last.md`)."""
    paths: list[Path] = []
    tables = []
    for block, runs in blocks:
        part = frame[frame["run_id"].isin({s.run_id for s in runs})]
        if not block.name or not len(part):
            continue
        block_order = {**order, "label": row_order(part, runs)}
        scores = final_scores(part, block_order)
        # its name, or what its runs ran where --cfg-options overrode what defines it
        shown = block.name if grid is None else block_title(grid, block, runs)
        # no dot from a key (setting.selection) in an overridden block's names: a figure's stem would lose its end
        name = plain_name(block.name) if shown == block.name else plain_name(shown.replace(".", "-"))
        for fmt in formats:
            paths.append(Path(out_dir) / f"table_{name}.{SUFFIX[fmt]}")
            write_atomic(paths[-1], (markdown_header(f"{title}, {shown}") if fmt == "markdown" else "")
                         + render_table(scores, cast(TableFormat, fmt), layout=block.layout,
                                        exclude_from_best=exclude_from_best,
                                        caption=f"{latex_title(title)}, {latex_title(shown)}.", correction=correction))
        tables.append((f"table_{name} ({block.layout} layout)", block.layout, scores))
        paths += steps_figures(part, out_dir, f"steps_{name}", block_order)
    return paths, tables

"""The runs of a report's selection as the site sees them: the `Run` record, `collect_runs` (every run
with its state: done, failed, unfinished, not run, unreadable), its page's file name, and the pieces
that show states wherever a run or a cell appears: badges, a cell's missing value, links to its runs."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

import pandas as pd

from bench.reporting.site.html import e

DONE, FAILED, UNFINISHED, NOT_RUN, UNREADABLE = "done", "failed", "unfinished", "not run", "unreadable"
STATE_HELP = {
    DONE: "finished; its metrics are in the tables",
    FAILED: "failed: its error.txt says why; the next `bench run` retries it",
    UNFINISHED: "started but not finished: running now, or interrupted (the next `bench run` resumes it)",
    NOT_RUN: "never started: no run directory, or nothing in it yet",
    UNREADABLE: "finished, but its files cannot be read back or describe another run: in no row",
}


@dataclass
class Run:
    """One run of the report's selection and what the site says about it."""

    run_id: str
    directory: Path
    state: str
    why: str = ""  # the error's first line, or why a finished run is in no row
    split: str = "?"
    dataset: str = "?"
    label: str = "?"
    method: str = "?"
    preset: str = ""
    backbone: str = ""
    seed: int | None = None
    spec: Any = None
    page: str = ""  # runs/<page>.html
    siblings: list["Run"] = field(default_factory=list)  # the runs of its cell (the other seeds), itself included

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.split, self.dataset, self.label)


def _page_name(run_id: str) -> str:
    """The run page's file name: the run id when it is a plain name (it always is for bench's runs)."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", run_id):
        return run_id
    import hashlib

    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


def _first_line(path: Path) -> str:
    try:
        return (path.read_text(errors="replace").strip().splitlines() or [""])[0]
    except OSError:
        return ""


def collect_runs(frame: pd.DataFrame, runs: Iterable[tuple[Path, Any]], unplaced: Mapping[str, str],
                 label_of_spec: Any) -> list[Run]:
    """Every run of the selection with its state: the finished ones as the frame labels them, the others
    from their spec (`label_of_spec(spec)` gives their row's label)."""
    done = frame.drop_duplicates("run_id").set_index("run_id") if len(frame) else pd.DataFrame()
    out: list[Run] = []
    for directory, spec in runs:
        run_id = directory.name
        run = Run(run_id, directory, DONE, spec=spec, page=_page_name(run_id))
        if run_id in done.index:
            row = done.loc[run_id]
            run.split, run.dataset, run.label = str(row["split"]), str(row["dataset"]), str(row["label"])
            run.method, run.preset = str(row.get("method", row["label"])), str(row.get("preset", ""))
            run.backbone, run.seed = str(row.get("backbone", "")), int(row["seed"])
        else:
            if run_id in unplaced:
                run.state, run.why = UNREADABLE, unplaced[run_id]
            elif (directory / "error.txt").exists():
                run.state, run.why = FAILED, _first_line(directory / "error.txt")
            elif (directory / "log.txt").exists() or (directory / "checkpoint.pt").exists():
                run.state = UNFINISHED
            else:
                run.state = NOT_RUN
            if spec is not None:
                run.split, run.dataset, run.label = spec.split_label, spec.dataset, label_of_spec(spec)
                run.method, run.preset, run.backbone, run.seed = spec.method, spec.preset, spec.backbone, spec.seed
        out.append(run)
    cells: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for run in out:
        if run.spec is not None or run.state == DONE:
            cells[run.cell].append(run)
    for members in cells.values():
        members.sort(key=lambda r: (r.seed is None, r.seed or 0, r.run_id))
        for run in members:
            run.siblings = members
    return out


def _state_badge(state: str) -> str:
    return f'<span class="st st-{e(state.replace(" ", "-"))}" title="{e(STATE_HELP[state])}">{e(state)}</span>'


def _cell_state(members: Sequence[Run]) -> str:
    """What a cell without a finished run says instead of a number: its runs' states."""
    if not members:
        return NOT_RUN
    counts: dict[str, int] = defaultdict(int)
    for run in members:
        counts[run.state] += 1
    order = [FAILED, UNREADABLE, UNFINISHED, NOT_RUN]
    return ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s))


def _missing_td(members: Sequence[Run], extra: str = "") -> str:
    text = _cell_state(members)
    worst = next((s for s in (FAILED, UNREADABLE, UNFINISHED, NOT_RUN) if any(r.state == s for r in members)), NOT_RUN)
    link = next((r for r in members if r.state != NOT_RUN or r.spec is not None), None)
    inner = f'<a href="runs/{quote(link.page)}.html">{e(text)}</a>' if link else e(text)
    return f'<td data-v="" class="missing st-{e(worst.replace(" ", "-"))}" title="no finished run{e(extra)}">{inner}</td>'


def _run_links(members: Sequence[Run], prefix: str = "runs/") -> str:
    return " ".join(f'<a class="seed st-{e(r.state.replace(" ", "-"))}" href="{prefix}{quote(r.page)}.html" '
                    f'title="{e(r.run_id)}: {e(r.state)}{(": " + e(r.why)) if r.why else ""}">'
                    f'{e("s" + str(r.seed) if r.seed is not None else r.run_id)}</a>' for r in members)

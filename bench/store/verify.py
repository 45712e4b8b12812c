"""`bench store verify PATH [--since REV]`: what a store's CI runs on a pull request, and what a user runs locally.

Every entry is checked without running any of its code (`bench.store.checks`) and leaves with a level:

- `claimed`: a published number only (the tables under `claimed/`, each cell with its card);
- `recomputed`: its predictions give every number it claims, on a protocol bench registers;
- `reproduced`: recomputed, and another submission of the same run (its spec and its method's code) from another
  results folder agrees with it, every summary row within `REPRODUCE_TOLERANCE` points;
- or refused, with one line saying why. A refused entry leaves every other entry as it is.

Across entries: an entry held twice (the same content in two submissions), a second submission of a run from the
same results folder with other numbers, and a split manifest other than the store's for the same protocol and seed
are refused, the entry already in the store kept. With `--since REV` only the entries a pull request adds (the
files that differ from REV) are checked in full; the store's other entries are read as the store holds them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from bench.errors import first_line
from bench.store import gitops
from bench.store.checks import Checked, Refused, check_entry
from bench.store.claimed import CLAIM_COLUMNS
from bench.store.layout import (CLAIMED, ENTRY, REPRODUCE_TOLERANCE, SUBMISSION, SUBMISSIONS, check_store,
                                read_json)

Say = Callable[[str], None]


@dataclass
class Verdict:
    path: str  # relative to the store
    level: str | None  # one of LEVELS, None: refused
    why: str = ""
    checked: Checked | None = None
    claims: pd.DataFrame | None = None  # a claimed table's cells
    notes: list[str] = field(default_factory=list)

    @property
    def line(self) -> str:
        what = f"refused: {self.why}" if self.level is None else self.level + (f" ({self.why})" if self.why else "")
        return f"{self.path}: {what}" + "".join(f"; {n}" for n in self.notes)


def check_claimed(path: Path) -> pd.DataFrame:
    """A claimed table: its columns, a finite number per cell, a card (selection, K, seeds, who reported it)."""
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as err:
        raise Refused(f"not a CSV table ({first_line(err)})") from None
    missing = [c for c in CLAIM_COLUMNS if c not in table]
    if missing:
        raise Refused(f"no column {', '.join(missing)}")
    values = pd.to_numeric(table["value"], errors="coerce")
    bad = table.index[~values.notna() | ~values.abs().lt(float("inf"))].tolist()
    if bad:
        raise Refused(f"row {bad[0] + 2}: value {table['value'][bad[0]]!r} is not a finite number")
    for column in ("selection", "k", "seeds", "reported_by", "metric_definition"):
        empty = table.index[table[column].str.strip() == ""].tolist()
        if empty:
            raise Refused(f"row {empty[0] + 2}: its card has no {column} (say `not stated` where the paper does not)")
    return table.assign(value=values)


def entry_folders(store: Path) -> tuple[list[Path], list[Verdict]]:
    """The entry folders under submissions/, and a refusal for anything else found there (a stray file, a
    symlink): a submission holds its SUBMISSION.json and its entries' folders only."""
    folders, refused = [], []
    root = store / SUBMISSIONS
    for submission in sorted(root.iterdir()) if root.is_dir() else []:
        where = submission.relative_to(store).as_posix()
        if submission.is_symlink() or not submission.is_dir():
            refused.append(Verdict(where, None, "not a submission's folder (a submission is a folder of entries)"))
            continue
        for item in sorted(submission.iterdir()):
            if item.name == SUBMISSION and item.is_file() and not item.is_symlink():
                continue
            if item.is_symlink() or not item.is_dir():
                refused.append(Verdict(item.relative_to(store).as_posix(), None,
                                       "a symlink" if item.is_symlink() else f"a file beside the entries, not {SUBMISSION}"))
                continue
            folders.append(item)
    return folders, refused


def cross_check(verdicts: list[Verdict]) -> None:
    """The checks between entries, in the store's order (the first one held stays): duplicates, a run submitted
    twice from one results folder with other numbers, another split for the same protocol and seed, reproductions."""
    seen_ids: dict[str, str] = {}
    runs: dict[tuple[str, str], Verdict] = {}
    manifests: dict[tuple[str, str, int], tuple[str, str]] = {}
    for verdict in verdicts:
        if verdict.checked is None:
            continue
        entry = verdict.checked.entry
        refusal = None
        if entry["id"] in seen_ids:
            refusal = f"a duplicate of {seen_ids[entry['id']]}"
        elif (entry["run_id"], entry["origin"]) in runs:
            first = runs[(entry["run_id"], entry["origin"])]
            same = first.checked is not None and first.checked.entry["claims"] == entry["claims"]
            refusal = (f"a second submission of run {entry['run_id']} from the same results folder "
                       + (f"with the same numbers: a duplicate of {first.path}" if same
                          else f"with other numbers than {first.path}"))
        digest = entry["card"].get("manifest_sha256", "")
        key = (entry["dataset"], entry["split"], int(entry["seed"]))
        if refusal is None and digest and manifests.get(key, (digest, ""))[0] != digest:
            refusal = (f"its split manifest (sha256 {digest[:12]}) is not the one {manifests[key][1]} holds for "
                       f"{key[0]} · {key[1]} · seed {key[2]}")
        if refusal is not None:
            verdict.level, verdict.why, verdict.checked = None, refusal, None
            continue
        seen_ids[entry["id"]] = verdict.path
        runs[(entry["run_id"], entry["origin"])] = verdict
        if digest:
            manifests.setdefault(key, (digest, verdict.path))
    by_run: dict[tuple[str, str], list[Verdict]] = {}
    for verdict in verdicts:
        if verdict.checked is not None:
            entry = verdict.checked.entry
            by_run.setdefault((entry["run_id"], entry["method_sha256"]), []).append(verdict)
    for group in by_run.values():
        for a in group:
            for b in group:
                if a is b or a.checked is None or b.checked is None or a.checked.entry["origin"] == b.checked.entry["origin"]:
                    continue
                gap = max((abs(v - b.checked.summary.get(k, float("nan"))) for k, v in a.checked.summary.items()
                           if pd.notna(v) or pd.notna(b.checked.summary.get(k))), default=0.0)
                if gap <= REPRODUCE_TOLERANCE:
                    a.level, a.why = "reproduced", f"by {b.path}, every summary row within {REPRODUCE_TOLERANCE} points"
                else:
                    a.notes.append(f"{b.path} ran the same run and differs by {gap:.2f} points: not reproduced")


def verify_store(store: Path, since: str | None = None, say: Say | None = print) -> list[Verdict]:
    """Every claimed table and entry of the store at `store` (a checkout), with its level or why it is refused."""
    store = Path(store)
    check_store(store)
    changed = None
    if since is not None:
        changed = {p.split("/")[2] for p in gitops.changed_since(store, since) if p.startswith(f"{SUBMISSIONS}/")
                   and p.count("/") >= 3}
    verdicts: list[Verdict] = []
    for path in sorted((store / CLAIMED).rglob("*.csv")):
        where = path.relative_to(store).as_posix()
        try:
            table = check_claimed(path)
            verdicts.append(Verdict(where, "claimed", f"{len(table)} published cells", claims=table))
        except Refused as err:
            verdicts.append(Verdict(where, None, str(err)))
    folders, refused = entry_folders(store)
    entries: list[Verdict] = []
    for folder in folders:
        where = folder.relative_to(store).as_posix()
        try:
            if changed is not None and folder.name not in changed:
                checked = held(folder)
            else:
                checked = check_entry(folder)
            entries.append(Verdict(where, "recomputed", _describe(checked.entry), checked))
        except Refused as err:
            entries.append(Verdict(where, None, str(err)))
    entries.sort(key=lambda v: (_submitted(store, v.path), v.path))
    cross_check(entries)
    verdicts += refused + entries
    if say is not None:
        for verdict in verdicts:
            if changed is None or verdict.level is None or verdict.path.split("/")[-1] in changed:
                say(verdict.line)
        counts = {level: sum(v.level == level for v in verdicts) for level in ("claimed", "recomputed", "reproduced", None)}
        say(f"{len(verdicts)} checked{'' if since is None else f' ({len(changed or ())} new since {since})'}: "
            f"{counts['claimed']} claimed table(s), {counts['recomputed']} recomputed, {counts['reproduced']} "
            f"reproduced, {counts[None]} refused")
    return verdicts


def held(folder: Path) -> Checked:
    """An entry already in the store (checked when it came in): read, not recomputed."""
    from bench.config.spec import RunSpec

    entry = read_json(folder / ENTRY, ENTRY)
    summary = {(c[2], c[3]): float("nan") if c[4] is None else float(c[4]) for c in entry["claims"] if c[1] == "summary"}
    return Checked(entry, RunSpec.from_json((folder / "spec.json").read_text()), summary)


def _submitted(store: Path, path: str) -> str:
    """When an entry's submission was made (its SUBMISSION.json), for the store's order: the earlier one is held."""
    try:
        return str(read_json(store / Path(path).parent / SUBMISSION, SUBMISSION)["submitted"])
    except (OSError, ValueError, KeyError, TypeError):
        return "~"  # a submission that does not say when: after every one that does


def _describe(entry: dict[str, Any]) -> str:
    return f"{entry['label']} · {entry['dataset']} · {entry['split']} · seed {entry['seed']}"


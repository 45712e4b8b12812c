"""`bench publish --grid NAME --store PATH_OR_URL`: a grid's finished runs, bundled into a store checkout on a new
branch in one commit, ready for a pull request (pushed to the store's remote with `--push`).

Nothing unfinished (a run without its DONE marker, or whose files cannot be read back), nothing twice (an entry
whose content the store already holds is left out, and said), nothing that differs from the run folder (each
copy is read back against the run's file, and a run whose metrics do not recompute from its predictions is
refused until `bench metrics recompute` has been run on it)."""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from bench.core.provenance import utc_now
from bench.core.resources import VERSION
from bench.errors import BenchError
from bench.store import gitops
from bench.store.bundle import bundle_of, write_entry
from bench.store.layout import ENTRY, STORE_MARK, SUBMISSION, SUBMISSIONS, dump, origin_of, read_json

Say = Callable[[str], None]


@dataclass
class Published:
    checkout: Path
    branch: str
    submission: str
    entries: list[str] = field(default_factory=list)  # the new entries' ids
    skipped: list[str] = field(default_factory=list)  # one line per run left out, with why
    commit: str = ""
    pushed: bool = False


def open_store(store: str, checkout: Path | None, say: Say) -> tuple[Path, bool]:
    """The store's checkout to work in, and whether it is a clone bench made (of a URL or a bare repository): a
    work tree given is used as it is (it must have no uncommitted change)."""
    path = Path(store).expanduser()
    if path.exists() and gitops.is_work_tree(path):
        if gitops.git(path, "status", "--porcelain").strip():
            raise BenchError(f"the store checkout {path} has uncommitted changes: commit or remove them first")
        return path, False
    target = Path(checkout) if checkout is not None else Path(tempfile.mkdtemp(prefix="bench-store-"))
    if target.exists() and any(target.iterdir()):
        raise BenchError(f"--checkout {target} is not empty: name a new folder for the store's clone")
    gitops.git(None, "clone", "-q", store, str(target))
    say(f"cloned the store {store} into {target}")
    return target, True


def initialise_if_empty(checkout: Path, push: bool, say: Say) -> None:
    """A repository without any commit (`git init --bare`) becomes a store first: its `main` branch gets the
    ready store (`bench.store.claimed.init_store`), pushed with `push`."""
    if gitops.has_commits(checkout):
        return
    from bench.store.claimed import init_store

    gitops.git(checkout, "checkout", "-q", "-b", "main")
    init_store(checkout)
    gitops.commit(checkout, ["."], "A bench results store: the published tables as claimed entries, and its CI")
    say(f"the store was empty: made it a store on branch main ({STORE_MARK}, the claimed tables, its CI workflow)")
    if push:
        gitops.git(checkout, "push", "-q", "origin", "main")


def held_runs(checkout: Path) -> dict[tuple[str, str], str]:
    """(run id, origin) of every entry the store holds, with the entry's folder: a results folder submits a run once."""
    held = {}
    for path in sorted((checkout / SUBMISSIONS).glob(f"*/*/{ENTRY}")):
        try:
            entry = read_json(path, ENTRY)
            held[(str(entry["run_id"]), str(entry["origin"]))] = path.parent.relative_to(checkout).as_posix()
        except (OSError, ValueError, KeyError, TypeError):  # a damaged entry: verify refuses it, publish adds beside it
            continue
    return held


def publish(runs: Sequence[Path], store: str, *, grid: str, results: Path, push: bool = False,
            branch: str | None = None, checkout: Path | None = None, say: Say = print) -> Published:
    """Bundle the finished `runs` (directories) of `grid` under `results` into the store (module docstring)."""
    from bench.protocol.recompute import recompute_run
    from bench.runs.rundir import DONE, unreadable

    checkout_path, cloned = open_store(store, checkout, say)
    initialise_if_empty(checkout_path, push, say)
    if not (checkout_path / STORE_MARK).exists():
        raise BenchError(f"{store} is not a bench results store (no {STORE_MARK} at its top): `bench store init "
                         f"{store}` makes one")
    origin = origin_of(results)
    submission = f"{grid}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}-{origin[:8]}"
    branch = branch or f"publish/{submission}"
    outcome = Published(checkout_path, branch, submission)
    # a pull request goes into the store's main: the branch starts there, not from another submission's branch, and
    # what main holds is what is not published twice
    base = "main" if gitops.git(checkout_path, "rev-parse", "--verify", "-q", "refs/heads/main", check=False).strip() \
        else gitops.git(checkout_path, "rev-parse", "--abbrev-ref", "HEAD").strip()
    gitops.git(checkout_path, "checkout", "-q", base)
    held = held_runs(checkout_path)
    bundles = []
    for run in runs:
        if not (run / DONE).exists() or unreadable(run):
            outcome.skipped.append(f"{run.name}: not finished (no {DONE}, or its files cannot be read back)")
            continue
        checked = recompute_run(run, write=False)
        if checked.status != "unchanged":
            outcome.skipped.append(f"{run.name}: its metrics do not recompute from its predictions ({checked.status}"
                                   + (f": {checked.changed[0]}" if checked.changed else "")
                                   + "); `bench metrics recompute` first")
            continue
        bundle = bundle_of(run, origin, submission)
        if (bundle.spec.run_id, origin) in held:
            outcome.skipped.append(f"{run.name}: already in the store from this results folder (entry "
                                   f"{held[(bundle.spec.run_id, origin)]})")
            continue
        held[(bundle.spec.run_id, origin)] = bundle.id
        bundles.append(bundle)
    for line in outcome.skipped:
        say(f"left out {line}")
    if not bundles:
        if cloned and checkout is None:
            shutil.rmtree(checkout_path, ignore_errors=True)
        raise BenchError(f"nothing new to publish of grid {grid!r} under {results}: "
                         + (f"{len(outcome.skipped)} run(s) left out (above)" if outcome.skipped else "no finished run"))
    gitops.git(checkout_path, "checkout", "-q", "-b", branch, base)
    folder = checkout_path / SUBMISSIONS / submission
    try:
        for bundle in bundles:
            write_entry(bundle, folder / bundle.id)
            outcome.entries.append(bundle.id)
        (folder / SUBMISSION).write_text(dump({
            "submission": submission, "grid": grid, "origin": origin, "bench_version": VERSION,
            "submitted": utc_now(), "entries": outcome.entries}))
        outcome.commit = gitops.commit(checkout_path, [f"{SUBMISSIONS}/{submission}"],
                                       f"Publish {len(bundles)} run(s) of grid {grid} ({submission})")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        gitops.git(checkout_path, "checkout", "-q", base, check=False)
        gitops.git(checkout_path, "branch", "-q", "-D", branch, check=False)
        raise
    say(f"published {len(bundles)} run(s) of grid {grid} as {SUBMISSIONS}/{submission} on branch {branch} of "
        f"{checkout_path} (commit {outcome.commit[:12]}), based on {base}")
    if push:
        gitops.git(checkout_path, "push", "-q", "-u", "origin", branch)
        outcome.pushed = True
        say(f"pushed branch {branch} to the store's remote: open a pull request of it into {base}")
    else:
        say(f"not pushed: `git -C {checkout_path} push -u origin {branch}` (or `--push`) sends it for a pull request")
    return outcome


def init_command(store: str, push: bool = False, say: Say = print) -> Path:
    """`bench store init PATH|URL`: a new folder becomes a store's checkout (a git repository on branch main with
    the ready store committed); an empty bare repository or URL is cloned and made one (pushed with `push`)."""
    path = Path(store).expanduser()
    if path.exists() and gitops.is_work_tree(path):
        if (path / STORE_MARK).exists():
            raise BenchError(f"{path} is a store already ({STORE_MARK} at its top)")
        if gitops.has_commits(path):
            raise BenchError(f"{path} is a git repository with commits: a store starts from an empty one")
    elif not path.exists() or (path.is_dir() and not any(path.iterdir())):
        path.mkdir(parents=True, exist_ok=True)
        gitops.git(path, "init", "-q", "-b", "main")
    else:
        checkout, _ = open_store(store, None, say)
        if gitops.has_commits(checkout):
            raise BenchError(f"{store} has commits already: a store starts from an empty repository")
        initialise_if_empty(checkout, push, say)
        return checkout
    initialise_if_empty(path, False, say)
    return path

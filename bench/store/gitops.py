"""The git a store needs, through the `git` command (a store is an ordinary repository: a checkout, a bare one on
disk, or a URL): clone, branch, commit, push, and the files a revision range changed. Every failure is one line
naming the git command and what git said."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

from bench.errors import BenchError

# a commit needs an author: the user's own where git has one, else this (a CI machine, a container)
FALLBACK_IDENTITY = ("-c", "user.name=bench publish", "-c", "user.email=bench@localhost")


def git(where: Path | None, *args: str, check: bool = True) -> str:
    """`git -C where ARGS`'s stdout, or a BenchError with git's own message."""
    command = ["git", *(["-C", str(where)] if where is not None else []), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise BenchError("git is not installed: a results store is a git repository") from None
    if check and done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise BenchError(f"`git {' '.join(args)}` failed: {said[-1] if said else f'exit status {done.returncode}'}")
    return done.stdout


def is_work_tree(path: Path) -> bool:
    return path.is_dir() and git(path, "rev-parse", "--is-inside-work-tree", check=False).strip() == "true" \
        and Path(git(path, "rev-parse", "--show-toplevel").strip()).resolve() == path.resolve()


def has_commits(checkout: Path) -> bool:
    return bool(git(checkout, "rev-parse", "--verify", "-q", "HEAD", check=False).strip())


def identity(checkout: Path) -> Sequence[str]:
    named = git(checkout, "config", "user.name", check=False).strip() and \
        git(checkout, "config", "user.email", check=False).strip()
    return () if named else FALLBACK_IDENTITY


def commit(checkout: Path, paths: Sequence[str], message: str) -> str:
    """Commit `paths` (relative to the checkout) in one commit: its hash."""
    git(checkout, "add", "--", *paths)
    git(checkout, *identity(checkout), "commit", "-q", "-m", message)
    return git(checkout, "rev-parse", "HEAD").strip()


def changed_since(checkout: Path, since: str) -> list[str]:
    """The files that differ between `since` and HEAD (what a pull request adds), relative to the checkout."""
    base = git(checkout, "merge-base", since, "HEAD").strip()
    return [line for line in git(checkout, "diff", "--name-only", base, "HEAD").splitlines() if line]

"""`bench store init|verify|site`: make a results store, check one as its CI does, build its leaderboard
(docs/results-store.md; `bench publish` puts runs in one)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any



def add_parser(sub: Any) -> None:
    store = sub.add_parser("store", help="make a results store, verify one (its CI), build its leaderboard")
    store.add_argument("action", choices=("init", "verify", "site"))
    store.add_argument("path", metavar="PATH|URL",
                       help="the store's checkout (init: a new folder, a bare repository or a git URL)")
    store.add_argument("--since", metavar="REV",
                       help="verify: check in full only the entries added since REV (a pull request's base)")
    store.add_argument("--out", type=Path, metavar="DIR", help="site: where to write it (default: PATH/site)")
    store.add_argument("--push", action="store_true", help="init: push the new store's main branch to its remote")


def command(args: argparse.Namespace) -> int:
    if args.action == "init":
        from bench.store.publish import init_command

        init_command(args.path, push=args.push)
        return 0
    from bench.store.verify import verify_store

    if args.action == "verify":
        verdicts = verify_store(Path(args.path), since=args.since)
        return 1 if any(v.level is None for v in verdicts) else 0
    from bench.store.site import write_store_site

    verdicts = verify_store(Path(args.path), say=None)
    index = write_store_site(verdicts, args.out or Path(args.path) / "site")
    print(f"wrote the store's leaderboard: {index}")
    return 0

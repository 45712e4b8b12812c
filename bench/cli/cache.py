"""`bench cache list|remove`: the feature and token banks in the cache, and freeing them."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.api import DEFAULT_RESULTS
from bench.errors import BenchError


def add_parser(sub: Any) -> None:
    cache = sub.add_parser("cache", help="list or remove feature banks")
    cache.add_argument("action", choices=("list", "remove"))
    cache.add_argument("keys", nargs="*", help="with remove: the bank keys to remove")
    cache.add_argument("--all", action="store_true", help="with remove: every bank")
    cache.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    cache.add_argument("--cache-dir", help="the cache (else $BENCH_CACHE_DIR, else <results>/cache)")


def command(args: argparse.Namespace) -> int:
    from datetime import datetime

    from tabulate import tabulate

    from bench.features.bank import default_cache_dir, list_folders, remove_banks

    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir(args.results)
    if args.action == "list":
        folders = list_folders(cache)  # damaged and incomplete ones too, with their status
        banks = [b for b in folders if b.status == "ok"]
        rows = [(b.key, b.kind + (f" (prefix {b.fields['prefix_blocks']} blocks)" if "prefix_blocks" in b.fields else ""),
                 b.fields.get("dataset"), b.fields.get("backbone"), b.fields.get("views"),
                 f"{b.size_bytes / 2**20:.1f}", datetime.fromtimestamp(b.last_used).strftime("%Y-%m-%d %H:%M"), b.status)
                for b in folders]
        others = f"; {len(folders) - len(banks)} damaged or incomplete folder(s), `bench cache remove NAME` frees them"\
            if len(folders) > len(banks) else ""
        print(f"{len(banks)} bank(s) in {cache}, {sum(b.size_bytes for b in folders) / 2**20:.1f} MiB{others}")
        if rows:
            print(tabulate(rows, headers=("key", "kind", "dataset", "backbone", "views", "MiB", "last used", "status"),
                           tablefmt="github"))
        return 0
    if not args.keys and not args.all:
        raise BenchError("bench cache remove needs bank keys (see `bench cache list`) or --all")
    removed = remove_banks(cache, None if args.all else args.keys)
    print(f"removed {len(removed)} bank(s) from {cache}")
    return 0

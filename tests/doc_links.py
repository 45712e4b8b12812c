"""GitHub's heading anchors, and the `docs/<page>.md#<anchor>` references that point at them.

Pure file reading, shared by the documentation tests. `github_slug` follows the rule GitHub applies
to a heading's rendered text: lowercase; drop every character that is not a letter, a digit, a space,
`-` or `_`; each space becomes `-`. `anchors` numbers duplicates as GitHub does (`x`, `x-1`, `x-2`)
and also accepts explicit `<a id="…">` / `<a name="…">` anchors.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Directories never scanned: VCS, environments, caches, build outputs and run outputs (.gitignore's).
PRUNED_DIRS = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".whl", "node_modules", "build", "dist"}
PRUNED_PATHS = {"results/runs", "results/reports", "results/submitit", "results/partitions", "results/cache"}
SCANNED_SUFFIXES = (".py", ".md", ".sh", ".toml")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_HTML_ANCHOR = re.compile(r"""<a\s+(?:[^>]*?\s)?(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_NOT_SLUG = re.compile(r"[^\w\- ]", re.UNICODE)
# `docs/<page>.md` with an optional `#anchor`, not part of a longer path or URL.
DOC_REFERENCE = re.compile(r"(?<![\w./-])(docs/[\w./-]*?\.md)(?:#([\w-]+))?")


def heading_text(raw: str) -> str:
    """The text GitHub renders for a heading's Markdown: links become their text, code spans and
    emphasis lose their markers, HTML tags vanish."""
    text = _LINK.sub(r"\1", raw)
    text = _TAG.sub("", text)
    return text.replace("`", "").replace("*", "")


def github_slug(text: str) -> str:
    """The anchor GitHub generates from a heading's rendered text (before duplicate numbering)."""
    return _NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-")


def headings(markdown: str) -> list[str]:
    """ATX headings' rendered text, in order, skipping fenced code blocks."""
    found, fence = [], None
    for line in markdown.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        match = _ATX.match(line)
        if match:
            found.append(heading_text(match.group(2)))
    return found


def anchors(markdown: str) -> set[str]:
    """Every anchor a page has on GitHub: its headings' slugs (duplicates numbered) and explicit
    `<a id>`/`<a name>` anchors."""
    seen: dict[str, int] = {}
    result = set(_HTML_ANCHOR.findall(markdown))
    for text in headings(markdown):
        slug = github_slug(text)
        if slug in seen:
            seen[slug] += 1
            numbered = f"{slug}-{seen[slug]}"
            while numbered in seen:  # a later heading may already own "x-1"
                seen[slug] += 1
                numbered = f"{slug}-{seen[slug]}"
            seen[numbered] = 0
            result.add(numbered)
        else:
            seen[slug] = 0
            result.add(slug)
    return result


def scanned_files(root: Path = ROOT) -> list[Path]:
    """The repository's .py, .md, .sh and .toml files, outside the pruned directories."""
    files = []
    for directory, subdirs, names in os.walk(root):
        relative = Path(directory).relative_to(root).as_posix()
        subdirs[:] = sorted(d for d in subdirs
                            if d not in PRUNED_DIRS and not d.endswith(".egg-info")
                            and (f"{relative}/{d}" if relative != "." else d) not in PRUNED_PATHS)
        files.extend(Path(directory) / name for name in sorted(names) if name.endswith(SCANNED_SUFFIXES))
    return files


def doc_references(text: str) -> list[tuple[str, str | None, int]]:
    """(page, anchor or None, line number) of every `docs/<page>.md[#anchor]` in a text."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in DOC_REFERENCE.finditer(line):
            found.append((match.group(1), match.group(2), number))
    return found


def unresolved(page: str, anchor: str | None, root: Path = ROOT, cache: dict | None = None) -> str | None:
    """Why `page#anchor` (page relative to root) does not resolve, or None when it does."""
    cache = {} if cache is None else cache
    if page not in cache:
        target = root / page
        cache[page] = anchors(target.read_text(encoding="utf-8", errors="replace")) if target.is_file() else None
    if cache[page] is None:
        return f"{page} does not exist"
    if anchor is not None and anchor not in cache[page]:
        return f"{page} has no heading with anchor #{anchor}"
    return None

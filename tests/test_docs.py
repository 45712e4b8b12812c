"""The documentation cannot rot silently: its links resolve, the README stays short, and the commands
of the pages a newcomer follows run.

What is checked:

- every relative link of README.md and docs/*.md points at a file or folder of the repository, and
  its `#anchor` (also a same-page `#anchor`) is the slug of a heading of the target page, by GitHub's
  rule: lowercase, every character but letters, digits, spaces, `-` and `_` dropped, spaces turned
  into `-`, a repeated slug suffixed `-1`, `-2`, ...; http(s) and mailto links are not fetched;
- README.md has at most 160 lines;
- every shell command of the pages in RUN_PAGES is run, page by page, in the order the page shows it,
  in a fresh temporary directory, with this test's Python environment first on PATH (its `bench` and
  `python`), HF_HUB_OFFLINE=1, a private XDG_CACHE_HOME and no BENCH_* variable set; each must exit 0.

Conventions the pages follow:

- The commands are the lines of fenced code blocks whose info string is `bash`. Blank lines and lines
  starting with `#` are skipped; a line ending in `\\` continues on the next. Every other line is one
  command (no here-documents or multi-line `if`/`for`: write a file with the convention below, or
  continue the line). The commands of a page run in one shell, one after another, so `cd` and `export`
  carry over to the commands after them.
- A code block (any language) immediately preceded by a line `<!-- file: relative/path -->` (blank
  lines between are allowed) is not run: its text is written to that path, relative to the directory
  the page's commands are in at that point (the temporary directory unless one of them `cd`s), before
  the commands that follow it run.
- A bash block preceded by `<!-- not run by the suite: .ci/run runs it -->` is not run here (it sets up
  the virtual environment the suite runs in); each of its commands must appear verbatim in .ci/run
  instead, so that it cannot drift from what CI does.
- Commands must be quick on small data (the demo grid, the smoke grid, a plugin folder).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.doc_links import anchors as page_anchors

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
RUN_PAGES = ["getting-started.md", "adding-a-method.md", "continual-gcd.md"]
README_MAX_LINES = 160
NOT_RUN = "<!-- not run by the suite: .ci/run runs it -->"
FILE_MARK = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!\!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PAGE_TIMEOUT_S = 900


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


@dataclass
class Block:
    info: str
    lines: list[str]
    before: str  # the nearest non-blank line above the opening fence


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a page, in order."""
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match.group(2)
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence))
                                      and lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i])
            i += 1
        out.append(Block(match.group(3).strip().split(" ")[0].lower(), body, before))
        i += 1
    return out


def prose(text: str) -> list[str]:
    """The lines of a page outside fenced code blocks."""
    out, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(2)
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None:
            out.append(line)
    return out


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (the rule lives in tests/doc_links.py)."""
    return page_anchors(page.read_text(encoding="utf-8"))


def links(page: Path) -> list[str]:
    out = []
    for line in prose(page.read_text(encoding="utf-8")):
        line = re.sub(r"(`+)(.+?)\1", "", line)  # inline code holds no links
        out += LINK.findall(line) + IMAGE.findall(line)
    return out


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:: not fetched
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
            continue
        if not dest.is_relative_to(ROOT):
            problems.append(f"{target}: outside the repository")
            continue
        if anchor:
            if dest.suffix.lower() != ".md" or dest.is_dir():
                problems.append(f"{target}: an anchor into a file that is not a Markdown page")
            elif anchor not in anchors(dest):
                problems.append(f"{target}: no heading of {dest.relative_to(ROOT)} has the anchor #{anchor}")
    return problems


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_anchors_resolve(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken_links(page))


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; keep it at most {README_MAX_LINES}: move detail to docs/"


def test_readme_links_every_docs_page():
    text = README.read_text(encoding="utf-8") + (DOCS / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "README.md" and f"{p.name})" not in text]
    assert not missing, f"README.md and docs/README.md link no page {missing}"


def commands(lines: list[str]) -> list[str]:
    """A bash block's commands: comments and blank lines skipped, `\\` continuations joined."""
    out, pending = [], ""
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending.rstrip())
    return out


def normalised(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def steps(page: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """What running a page does, in order: ("file", path, text) as ("file", "path\\0text") and
    ("run", command); and the commands of its blocks marked as run by .ci/run."""
    out: list[tuple[str, str]] = []
    by_ci: list[str] = []
    for block in blocks(page.read_text(encoding="utf-8")):
        target = FILE_MARK.match(block.before)
        if target:
            out.append(("file", target.group(1) + "\0" + "\n".join(block.lines) + "\n"))
        elif block.info == "bash":
            if block.before == NOT_RUN:
                by_ci += commands(block.lines)
            else:
                out += [("run", cmd) for cmd in commands(block.lines)]
    return out, by_ci


def script(page_steps: list[tuple[str, str]], step: Path) -> str:
    """One bash script that runs a page's commands in order and stops at the first that fails, naming it."""
    parts = ["set -o pipefail"]
    for i, (kind, value) in enumerate(page_steps):
        if kind == "file":
            path, text = value.split("\0", 1)
            (step / f"{i}.txt").write_text(text, encoding="utf-8")
            parts.append(f'mkdir -p "$(dirname {quote(path)})" && cp {quote(str(step / f"{i}.txt"))} {quote(path)}')
            parts.append(f'echo "::step {i}:: wrote {path}"')
        else:
            parts.append(f'echo "::step {i}:: $ "{quote(value)}')
            parts.append(value)
            parts.append(f'__rc=$?; if [ "$__rc" -ne 0 ]; then echo "::failed {i}:: exit status $__rc"; exit 97; fi')
    return "\n".join(parts) + "\n"


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    env["XDG_CACHE_HOME"] = str(tmp / "xdg-cache")
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.mark.slow
# Each page runs its bench commands end to end: adding-a-method.md a dozen (two conformance kits, four grids: 75 s on
# two cores), getting-started.md the demo grid, its reports and the cache (34 s), continual-gcd.md a mixed plugin, its
# kit, a smoke run beside the peers and three reports. .ci/run's `pytest -m scale` step
# runs them, which keeps the README's test command within its 10 minutes.
@pytest.mark.scale
@pytest.mark.parametrize("name", RUN_PAGES)
def test_page_commands_run(name, tmp_path):
    page = DOCS / name
    assert page.exists(), f"docs/{name} is missing: its commands must run in the suite"
    assert (Path(sys.executable).parent / "bench").exists(), "the test's Python has no `bench` beside it"
    page_steps, by_ci = steps(page)
    assert any(kind == "run" for kind, _ in page_steps), f"docs/{name} shows no command to run"
    ci = normalised(CI.read_text(encoding="utf-8"))
    absent = [cmd for cmd in by_ci if normalised(cmd) not in ci]
    assert not absent, f"docs/{name}: commands marked as run by .ci/run that it does not run: {absent}"
    work, step = tmp_path / "work", tmp_path / "stage"
    work.mkdir()
    step.mkdir()
    (step / "page.sh").write_text(script(page_steps, step), encoding="utf-8")
    done = subprocess.run(["bash", str(step / "page.sh")], cwd=work, env=environment(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=PAGE_TIMEOUT_S)
    failed = re.search(r"^::failed (\d+):: (.*)$", done.stdout, re.M)
    if failed:
        kind, value = page_steps[int(failed.group(1))]
        pytest.fail(f"docs/{name}: `{value}` failed ({failed.group(2)}):\n{done.stdout[-6000:]}")
    assert done.returncode == 0, f"docs/{name}: the page's commands ended with status {done.returncode}:\n{done.stdout[-6000:]}"


@pytest.mark.parametrize("name", ["adding-a-method.md", "python-api.md"])
def test_the_plugin_pages_show_the_mixed_setting(name):
    """A plugin author of continual category discovery finds how to opt in: the labels of the labelled step, the
    declaration of the settings, and the template that does both."""
    text = (DOCS / name).read_text(encoding="utf-8")
    for said in ("step.labels", "RunsOn.settings", 'settings=("mixed",)', 'settings=("incd", "mixed")',
                 "bench new method ccd-proto --setting mixed", "the-mixed-setting"):
        assert said in text, f"docs/{name} does not say {said}"


def test_conventions_are_parsed():
    page = ("intro\n\n<!-- file: pkg/a.py -->\n```python\nx = 1\n```\n\n" + NOT_RUN + "\n```bash\npython3 -m venv .venv\n```\n"
            "```bash\n# a comment\nbench run \\\n  --grid demo\n\nls\n```\n")
    found = blocks(page)
    assert [b.info for b in found] == ["python", "bash", "bash"]
    assert FILE_MARK.match(found[0].before).group(1) == "pkg/a.py"
    assert found[1].before == NOT_RUN
    assert commands(found[2].lines) == ["bench run    --grid demo", "ls"]

"""Code comments and Markdown point only at documents the repository has (issue 23).

(a) Nothing cites the design notes that lived outside the repository (the methods spec and its
sources notes): their content is docs/methods.md. (b) Every `docs/<page>.md#<anchor>` reference in a
.py, .md, .sh or .toml file names a page that exists and an anchor GitHub generates from one of its
headings. Pure file reading.
"""
from __future__ import annotations

import re

import pytest

from tests.doc_links import ROOT, anchors, doc_references, github_slug, scanned_files, unresolved

# Spelled in two parts so that this file does not mention them itself.
EXTERNAL_DOCS = ("methods" + "-spec", "methods" + "-sources")
# These two hold example references in their own tests and docstrings.
SELF = {"tests/test_doc_references.py", "tests/doc_links.py"}


def _text(path):
    return path.read_text(encoding="utf-8", errors="replace")


def _rel(path):
    return path.relative_to(ROOT).as_posix()


def test_slug_rule():
    assert github_slug("Baseline") == "baseline"
    assert github_slug("Baseline++ (KTRFR)") == "baseline-ktrfr"
    assert github_slug("Joint (frozen)") == "joint-frozen"
    assert github_slug("Discrepancy 15") == "discrepancy-15"
    assert github_slug("Scripts' hyper-parameters") == "scripts-hyper-parameters"
    assert github_slug("A and F") == "a-and-f"
    assert github_slug("The code preset: EwC, LwF & DER (adapted)") == "the-code-preset-ewc-lwf--der-adapted"
    assert github_slug("snake_case and `code`") == "snake_case-and-code"
    assert github_slug("Théorème: été") == "théorème-été"
    page = "# T\n## Setup\n```\n## not a heading\n```\n## Setup\n## Setup\n### `bench run` --grid\n<a id=\"x\"></a>"
    assert anchors(page) == {"t", "setup", "setup-1", "setup-2", "bench-run---grid", "x"}


def test_references_find_pages_and_anchors():
    refs = doc_references("# see docs/methods.md#ewc and (docs/metrics.md), not https://x.org/docs/a.md#b")
    assert refs == [("docs/methods.md", "ewc", 1), ("docs/metrics.md", None, 1)]


def test_no_file_cites_the_external_design_notes():
    offenders = []
    for path in scanned_files():
        for number, line in enumerate(_text(path).splitlines(), start=1):
            if any(name in line for name in EXTERNAL_DOCS):
                offenders.append(f"{_rel(path)}:{number}: {line.strip()}")
    assert not offenders, "point at docs/methods.md instead:\n" + "\n".join(offenders)


def _all_references():
    refs = []
    for path in scanned_files():
        if _rel(path) in SELF:
            continue
        refs.extend((_rel(path), page, anchor, number) for page, anchor, number in doc_references(_text(path)))
    return refs


def test_code_points_at_docs_methods():
    # The methods and their presets cite their section of docs/methods.md (the guard against a
    # scan that silently finds nothing).
    cited = {(where, page) for where, page, _, _ in _all_references()}
    for name in ("baseline", "ewc", "lwf", "der", "restune", "frost", "cassle", "kmeans", "ncm_kmeans",
                 "gaussian_per_class", "vb_cgcd"):
        assert (f"methods/{name}.py", "docs/methods.md") in cited
        assert (f"registries/presets/{name}.py", "docs/methods.md") in cited


def test_every_docs_reference_resolves():
    cache: dict = {}
    broken = [f"{where}:{number}: {why}" for where, page, anchor, number in _all_references()
              if (why := unresolved(page, anchor, cache=cache))]
    assert not broken, "\n".join(broken)


def test_a_missing_page_or_anchor_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n## Baseline\n## Baseline\n", encoding="utf-8")
    refs = doc_references("# docs/page.md#baseline-1 docs/page.md#nope docs/missing.md#baseline docs/page.md")
    assert [unresolved(page, anchor, root=tmp_path) for page, anchor, _ in refs] == [
        None, "docs/page.md has no heading with anchor #nope", "docs/missing.md does not exist", None]


def test_methods_page_in_page_links_resolve():
    text = _text(ROOT / "docs" / "methods.md")
    own = anchors(text)
    missing = sorted({a for a in re.findall(r"\]\(#([^)\s]+)\)", text) if a not in own})
    assert not missing, f"docs/methods.md links to missing anchors: {missing}"


@pytest.mark.parametrize("number", range(1, 23))
def test_discrepancies_are_numbered_in_methods_page(number):
    # Comments cite "discrepancy N"; each has its own heading (#discrepancy-N).
    assert f"discrepancy-{number}" in anchors(_text(ROOT / "docs" / "methods.md"))

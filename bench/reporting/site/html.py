"""The site's markup primitives, shared by every part: escaping (`e`), numbers, key-value tables,
anchors (`_slug`) and the page skeleton (`_document`) that links the two assets. Nothing here knows
about runs or metrics."""
from __future__ import annotations

import math
import re
from html import escape  # the standard library's: absolute imports never find this module
from typing import Any, Iterable


def e(value: Any) -> str:
    """Text for HTML, quotes included (safe in attributes)."""
    return escape(str(value), quote=True)


def _num(value: Any, digits: int = 1) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower() or "x"


def _kv_table(pairs: Iterable[tuple[str, Any]], cls: str = "kv") -> str:
    return (f'<table class="{cls}"><tbody>' + "".join(f'<tr><th scope="row">{e(k)}</th><td>{e(v)}</td></tr>'
                                                      for k, v in pairs) + "</tbody></table>")


def _document(title: str, body: str, root: str = "") -> str:
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)}</title><link rel=\"stylesheet\" href=\"{root}site.css\"></head>"
            f"<body>{body}<script src=\"{root}site.js\"></script></body></html>\n")

"""The explorer page: one self-contained HTML file (inline CSS and JavaScript from ``assets/``, the data as inline
JSON; no server, no network request) for :func:`bertology.explorer.load.load_explorer_data`'s dict. Pure."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any


def asset(name: str) -> str:
    """A file of the page's template (explorer.html, .css, .js), package data of bertology.explorer."""
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


# Characters that JSON leaves as they are but an HTML <script> element does not: "<" starts "</script>" and
# "<!--" (whose "escaped" parser state swallows the page's own script), ">" and "&" are escaped for the same
# reason in other contexts; U+2028/2029 end a line in older JavaScript. Each becomes its JSON \\u escape, so
# JSON.parse gives back exactly the original text.
_SCRIPT_ESCAPES = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_json(data: Any) -> str:
    """JSON that is safe as the text of an HTML <script> element, whatever strings `data` holds: every "<",
    ">", "&", U+2028 and U+2029 is written as its \\uXXXX escape (JSON.parse restores them). Pure."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.translate(_SCRIPT_ESCAPES)


def render_explorer(data: dict) -> str:
    """The whole self-contained explorer page (HTML text) for :func:`bertology.explorer.load.load_explorer_data`'s dict. Pure.

    The template's placeholders are filled in one pass, so text inside the data (or the model's name) that
    looks like a placeholder stays text."""
    title = f"bertology explorer — {html.escape(str(data.get('model', '?')))}"
    js = asset("explorer.js")
    fills = {"TITLE": title, "CSS": asset("explorer.css"), "JS": js.replace("</script", "<\\/script"),
             "DATA": script_json(data)}
    return re.sub(r"\{\{(TITLE|CSS|JS|DATA)\}\}", lambda m: fills[m.group(1)], asset("explorer.html"))

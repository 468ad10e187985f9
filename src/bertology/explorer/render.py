"""The explorer page: one self-contained HTML file (inline CSS and JavaScript from ``assets/``, the data as inline
JSON; no server, no network request) for :func:`bertology.explorer.load.load_explorer_data`'s dict. Pure.

The JavaScript is the modules of :data:`SCRIPTS`, concatenated in that order into one inline script, each in its
own function of ``app``: the namespace object they share (a module reads what earlier modules put there and adds
its own exports; a view's renderer goes into ``app.render``)."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any


def asset(name: str) -> str:
    """A file of the page's template (explorer.html, .css, a module of SCRIPTS), package data of bertology.explorer."""
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


# The page's script modules in the order they run; each may use what the ones before it export.
SCRIPTS = (
    "util.js",         # DOM builders, formatting, the tooltip, segmented buttons
    "state.js",        # the data, the selection (URL hash), go(): select and render
    "colour.js",       # colour scales, the variants' colours, legends
    "decode.js",       # the embedded attention maps, inflated on demand
    "claims.js",       # the claims matrix and picker
    "sieve.js",        # a head's sieve roles: test table, histograms
    "tables.js",       # the task's tables that are not per head
    "grid.js",         # the overview: a statistic on the layer x head grid
    "example-nav.js",  # the example picker and text
    "map.js",          # one head's map: heatmap, line view, small map
    "arcs.js",         # dependency arcs over a head's attention
    "head.js",         # the head view
    "tokens.js",       # the token views of an example
    "example.js",      # the example view
    "main.js",         # the page frame and the start
)


def explorer_script() -> str:
    """The page's JavaScript: the modules of :data:`SCRIPTS` in order, each wrapped in a function of the shared
    namespace ``app``, all in one strict-mode function (nothing but ``window.bertologyExplorer`` is global)."""
    parts = [f"/* ---- {name} */\n(app => {{\n{asset(name)}}})(app);\n" for name in SCRIPTS]
    return "(() => {\n'use strict';\nconst app = {};\n" + "".join(parts) + "})();\n"


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


def script_text(js: str) -> str:
    """JavaScript safe as the text of an HTML <script> element: "</script" (any case) becomes "<\\/script" and
    "<!--" becomes "<\\!--", the same text inside a JavaScript string or template literal (the modules hold
    neither; tests/test_explorer.py checks it). Pure."""
    return re.sub(r"<!--", r"<\\!--", re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE))


def render_explorer(data: dict) -> str:
    """The whole self-contained explorer page (HTML text) for :func:`bertology.explorer.load.load_explorer_data`'s dict. Pure.

    The template's placeholders are filled in one pass, so text inside the data (or the model's name) that
    looks like a placeholder stays text."""
    title = f"bertology explorer — {html.escape(str(data.get('model', '?')))}"
    fills = {"TITLE": title, "CSS": asset("explorer.css"), "JS": script_text(explorer_script()),
             "DATA": script_json(data)}
    return re.sub(r"\{\{(TITLE|CSS|JS|DATA)\}\}", lambda m: fills[m.group(1)], asset("explorer.html"))

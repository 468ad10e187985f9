"""results/report.html: every table and figure of a run on one self-contained page (images embedded).

Sections follow the papers; each says in a sentence or two what it measures and what the paper found, so
a reader can compare at a glance. They are declared with their analyses (:mod:`bertology.analyses`, the types in :mod:`bertology.registry`).
The page shows the files the report rule declares as its inputs, nothing else (no crawling of results/):
a section's tables are the inputs its path templates (:mod:`bertology.pipeline.layout`) match, and its figures the
declared figures with its file-name prefix (one file per figure and task); a declared figure no section
claims lands in "Other figures", so nothing produced is hidden. The step that writes the page is
:func:`bertology.steps.report.report`.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bertology import __version__

from bertology.pipeline import layout
from bertology.analyses import REGISTRY
from bertology.registry import Section


#: the report's sections, in the order of declaration (:meth:`bertology.registry.Registry.report_sections`): each
#: analysis declares its own section (title, what it measures, what the paper found, its figures and tables)
SECTIONS: tuple[Section, ...] = REGISTRY.report_sections()


def figure_html(path: Path, wide: bool = False, caption: str | None = None) -> str:
    """A figure embedded (base64 PNG) with its caption (the file's stem unless given), anchored by its stem."""
    from bertology.claims.render import figure_anchor

    data = base64.b64encode(path.read_bytes()).decode()
    title = html.escape(path.stem)
    cls = " class=wide" if wide else ""
    text = html.escape(caption) if caption is not None else title
    return (f'<figure id="{figure_anchor(path.stem)}"{cls}><img alt="{title}" src="data:image/png;base64,{data}">'
            f"<figcaption>{text}</figcaption></figure>")


def table_html(path: Path, results: Path, max_rows: int = 60) -> str:
    """A CSV as an HTML table (its first `max_rows` rows) and its path relative to the results root's parent."""
    df = pd.read_csv(path)
    more = f"<p class=note>first {max_rows} of {len(df)} rows; full table: <code>{html.escape(str(path.relative_to(results.parent)))}</code></p>" \
        if len(df) > max_rows else f"<p class=note><code>{html.escape(str(path.relative_to(results.parent)))}</code></p>"
    table = df.head(max_rows).to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0, classes="tbl")
    return f"<div class=tblwrap>{table}</div>{more}"


def assign_figures(figures: list[Path]) -> dict[str, list[Path]]:
    """Map section key -> its figures (by longest matching prefix); unclaimed ones go to 'other'."""
    out: dict[str, list[Path]] = {s.key: [] for s in SECTIONS}
    out["other"] = []
    for fig in sorted(figures):
        section = REGISTRY.figure_section(fig.stem)
        out[section.key if section is not None else "other"].append(fig)
    return out


def _md_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_number(text: str) -> bool:
    try:
        float(text.replace("±", "").split()[0]) if text else None
        return bool(text)
    except ValueError:
        return False


def markdown_to_html(text: str) -> str:
    """Pipe tables and paragraphs of a small Markdown file (table1.md) as HTML: tables become <table>s."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(f"<p class=note>{html.escape(' '.join(para))}</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: "):
            flush()
            head = _md_cells(line)
            i += 2
            body = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                body.append(_md_cells(lines[i]))
                i += 1
            cells = "".join(f"<th>{html.escape(c)}</th>" for c in head)
            rows = "".join("<tr>" + "".join(
                f"<td class={'num' if _is_number(c) else 'txt'}>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
            out.append(f"<div class=tblwrap><table class='tbl md'><thead><tr>{cells}</tr></thead>"
                       f"<tbody>{rows}</tbody></table></div>")
            continue
        if line.strip():
            para.append(line.strip())
        else:
            flush()
        i += 1
    flush()
    return "".join(out)


def _table1_block(results: Path, inputs: Sequence[str]) -> str:
    md = layout.rel("table1_md")
    if md in inputs:
        return markdown_to_html((results / md).read_text())
    return ""


def _claims_block(results: Path, inputs: Sequence[str], config: dict) -> str:
    """The report's first section, when the report declares the ledger (results/claims.csv): the claims matrix,
    the forest plot (figures/claims.png, when declared) and the full ledger."""
    from bertology.claims.render import ledger_html, matrix_html

    if layout.rel("claims") not in inputs:
        return ""
    ledger = pd.read_csv(results / layout.rel("claims"))
    stems = [Path(f).stem for f in declared_figures(inputs)]
    confidence = config["analysis"]["claims"]["confidence"]
    forest = layout.rel("figure", name="claims")
    plot = (f'<h3 id="claims-forest">Forest plot</h3><div class=figs>{figure_html(results / forest, wide=True)}</div>'
            if forest in inputs else "")
    return ('<section id="claims"><h2>Claims checked on this run</h2>' + matrix_html(ledger, stems, confidence)
            + plot + '<h3 id="claims-ledger">The full ledger</h3>' + ledger_html(ledger, stems, confidence)
            + "</section>")


def _explorer_link(inputs: Sequence[str]) -> str:
    if layout.rel("explorer") in inputs:
        return ('<p id=explorer-link>Interactive head explorer (attention maps, per-head statistics, sieve roles): '
                '<a href="explorer.html">explorer.html</a></p>')
    return ""


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#243b53;color:#fff;padding:1.2em 2em}header h1{margin:0 0 .2em}header p{margin:.2em 0;opacity:.9}
nav{padding:.6em 2em;background:#e8eef4;position:sticky;top:0;z-index:2}nav a{margin-right:1em;color:#243b53}
*{box-sizing:border-box}
main{padding:0 2em 3em;max-width:100%}section{margin-top:2em;border-top:1px solid #ddd;padding-top:.5em;max-width:100%}
.why{display:grid;grid-template-columns:1fr 1fr;gap:1em;max-width:1200px}
.why div{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:.6em .9em}
.why b{display:block;font-size:.8em;text-transform:uppercase;letter-spacing:.05em;color:#627d98}
.figs{display:flex;flex-wrap:wrap;gap:1em;margin-top:1em}figure{margin:0;background:#fff;border:1px solid #e3e3e3;
border-radius:6px;padding:.5em;max-width:100%}figure img{max-width:min(560px,100%);width:560px;height:auto}figcaption{font-size:.8em;color:#627d98}
.tblwrap{max-width:100%;overflow-x:auto;margin-top:1em}table.tbl{border-collapse:collapse;font-size:.85em;background:#fff}
table.md th{white-space:normal;max-width:14em;vertical-align:bottom}.tbl td.txt{text-align:left}.tbl th,.tbl td{padding:.25em .6em;
border-bottom:1px solid #eee;text-align:right}.tbl th{background:#f0f4f8}pre.md{background:#fff;border:1px solid #e3e3e3;
padding:.8em;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%}code{overflow-wrap:anywhere}
figure.wide img{width:auto;max-width:min(1400px,100%)}
header a{color:#f0b429}.note{font-size:.8em;color:#627d98}.missing{color:#9b2c2c}
"""


def _css() -> str:
    from bertology.claims.render import CSS as CLAIMS_CSS

    return CSS + CLAIMS_CSS


def declared_figures(inputs: Sequence[str]) -> list[str]:
    """The figures among the declared inputs (paths under the results root): results/figures/*.png."""
    rx = layout.regex("figure")
    return [p for p in inputs if rx.fullmatch(p)]


def data_sources(config: dict) -> str:
    """Where the run's tasks come from, for the report's header: ``data.source`` when every task is a GLUE name,
    else ``name: source`` per task (a declared task's own ``source``; ``data.source`` for the GLUE ones).

    >>> data_sources({"tasks": ["rte", "mrpc"], "data": {"source": "demo"}})
    'demo'
    >>> data_sources({"tasks": ["rte", {"name": "movies", "source": "data/movies"}], "data": {"source": "demo"}})
    'rte: demo; movies: data/movies'
    """
    glue = str(config["data"]["source"])
    if not any(isinstance(t, dict) for t in config["tasks"]):
        return glue
    return "; ".join(f"{t['name']}: {t['source']}" if isinstance(t, dict) else f"{t}: {glue}"
                     for t in config["tasks"])


def build_report(results: Path, config: dict, inputs: Sequence[str]) -> str:
    """The HTML text of the report of a run: results: its results root; config: the validated config (defaults
    filled, :func:`bertology.pipeline.config.validate_config`), shown in the report; inputs: the files the report
    shows, as paths under `results` (the report rule's declared inputs, :func:`bertology.pipeline.layout.under`)."""
    results = Path(results)
    inputs = list(inputs)
    forest = layout.rel("figure", name="claims")  # shown with the claims
    by_section = assign_figures([results / f for f in declared_figures(inputs) if f != forest])
    cfg = config
    model = html.escape(str(cfg["model"]))
    tasks = html.escape(", ".join(t["name"] if isinstance(t, dict) else str(t) for t in cfg["tasks"]))
    header = (f"<h1>bertology report</h1>"
              f"<p>model <b>{model}</b> · tasks <b>{tasks}</b> · data <b>{html.escape(data_sources(cfg))}</b>"
              f" · {stamp()}</p>" + mlflow_line(cfg) + _explorer_link(inputs))
    claims = _claims_block(results, inputs, cfg)
    nav = ['<a href="#claims">Claims</a>'] if claims else []
    nav += [f'<a href="#{s.key}">{html.escape(s.title.split(" (")[0].split(" — ")[0])}</a>' for s in SECTIONS]
    parts = [claims]
    for s in SECTIONS:
        parts.append(f'<section id="{s.key}"><h2>{html.escape(s.title)}</h2><div class=why>'
                     f"<div><b>What it measures</b>{html.escape(s.measures)}</div>"
                     f"<div><b>What the paper found</b>{html.escape(s.finding)}</div></div>")
        if s.key == "table1":
            parts.append(_table1_block(results, inputs))
        tables = [t for template in s.tables for t in layout.matching(template, inputs)]
        for table in tables:
            parts.append(table_html(results / table, results))
        figs = by_section[s.key]
        if figs:
            parts.append("<div class=figs>" + "".join(figure_html(f) for f in figs) + "</div>")
        elif not tables:
            parts.append("<p class=missing>No output of this analysis in this run.</p>")
        parts.append("</section>")
    if by_section["other"]:
        parts.append('<section id=other><h2>Other figures</h2><div class=figs>'
                     + "".join(figure_html(f) for f in by_section["other"]) + "</div></section>")
    parts.append(config_section(cfg))
    return page_html(f"bertology report — {cfg['model']}", header, nav, "".join(parts))


def stamp() -> str:
    """The header's version and time: ``bertology 0.1.0 · 2026-01-31 12:00``."""
    return f"bertology {__version__} · {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}"


def mlflow_line(config: dict) -> str:
    """The header's line on browsing the run's MLflow records."""
    uri = html.escape(str(config["mlflow"]["tracking_uri"]))
    return f"<p>Browse every run: <code>mlflow ui --backend-store-uri {uri}</code></p>"


def config_section(config: dict) -> str:
    """The page's last section: the config as JSON."""
    return ("<section><h2>Configuration</h2><pre class=md>"
            + html.escape(json.dumps(config, indent=2, sort_keys=True)) + "</pre></section>")


def page_html(title: str, header: str, nav: Sequence[str], main: str, css: str = "") -> str:
    """A whole self-contained page in the report's style: `title` (text, escaped here), the header's and main's
    HTML, the navigation's links; css: the page's own rules after the report's."""
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>{_css()}{css}</style></head><body><header>{header}</header><nav>{''.join(nav)}</nav>"
            f"<main>{main}</main></body></html>")

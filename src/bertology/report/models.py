"""results/report.html of a run of several models, on the one-model report's page (:mod:`bertology.report.page`):
the claims matrix with claims down and models x tasks across (:func:`models_matrix_html`: each model's name over its
tasks, the cells as the one-model matrix draws them, :func:`bertology.claims.render.cell_html`), per claim and task
in how many models and which it holds, is contradicted, is inconclusive or was not computed (:func:`counts_html`,
results/compare/claims.csv), the forest plot grouped by model, the comparisons across models (results/compare/: the
tables and figures the report rule declares, each with its caption, :data:`COMPARISONS`), and a link to each
model's own report and explorer (results/m/{name}/).

The page shows the files the rule declares as its inputs (paths under the run's results root), nothing else.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from bertology.claims.bootstrap import VERDICTS
from bertology.claims.ledger import ALL
from bertology.claims.models import COUNTED, model_order, verdict_tally
from bertology.claims.render import MEANING, cell_html, holm_count, matrix_axes, verdict_class
from bertology.pipeline import layout
from bertology.report.page import config_section, figure_html, mlflow_line, page_html, stamp, table_html

#: the comparisons across models (results/compare/{name}.csv and .png), in the page's order: name, title, caption
COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("sinks", "Attention sinks (Gu et al. 2024)",
     "Per model and task: alpha_0, the attention the heads give the first token, and the sink rate, the share of "
     "heads whose alpha_0 exceeds epsilon = 0.3 (Gu et al.'s definition), with alpha_0 per layer."),
    ("induction", "Induction heads (Olsson et al. 2022)",
     "Per decoder and task: the best induction head (layer, head) and its induction score on repeated random "
     "token sequences."),
    ("patterns", "Attention patterns (Kovaleva et al. 2019, 4.1)",
     "Per model, task and variant: the share of heads in each of the five pattern classes (vertical, diagonal, "
     "vertical + diagonal, block, heterogeneous)."),
    ("roles", "Sieve roles (Pande et al.)",
     "Per model, task and variant: the share of heads in each sieve role."),
    ("depth", "Per-layer curves on relative depth",
     "Per model: per-layer statistics against relative depth, (layer + 1) / layers, so that a 6-layer and a "
     "30-layer model share an axis."),
)

CSS = """
table.mmatrix td.mfirst,table.mmatrix th.mfirst{box-shadow:-3px 0 0 #9fb3c8}
table.mmatrix th.model{background:#d9e2ec;font-size:1.05em}table.mmatrix th.model a{color:#243b53}
table.counts td{vertical-align:top}table.counts td.cnt{text-align:left;white-space:nowrap}
table.counts td.cnt b{display:inline-block;min-width:1.4em;text-align:right;margin-right:.3em}
table.counts td.cnt span.ms{font-size:.85em;color:#52606d}ul.models li{margin:.2em 0}
"""


def model_tasks(ledger: pd.DataFrame, model: str) -> list[str]:
    """A model's tasks in the matrix: those of its rows in the ledger's order, without
    :data:`bertology.claims.ledger.ALL` (``[ALL]`` when every row of the model is task-free)."""
    tasks = matrix_axes(ledger[ledger["model"].astype(str) == model])[1]
    return tasks or [ALL]


def models_matrix_html(ledger: pd.DataFrame, models: Sequence[str] | None = None, confidence: float | None = None,
                       reports: Mapping[str, str] | None = None) -> str:
    """The claims matrix of a run's ledger (:func:`bertology.claims.models.merge_ledgers`): one row per claim, a
    column per model and task under a two-row header (the model's name, linked to its report, over its tasks);
    each cell the verdict as the one-model matrix draws it, its links to the row in the model's own report
    (reports: model -> the report's path relative to this page); a task-free claim one cell across the model's
    tasks. models: the column groups' order (None: the ledger's)."""
    models = list(models) if models is not None else model_order(ledger)
    reports = dict(reports or {})
    ledger = ledger.assign(model=ledger["model"].astype(str), claim=ledger["claim"].astype(str),
                           task=ledger["task"].astype(str))
    claims = list(dict.fromkeys(ledger["claim"]))
    tasks = {m: model_tasks(ledger, m) for m in models}
    by = {(r["claim"], r["model"], r["task"]): r for r in ledger.to_dict("records")}
    level = f"{confidence:.0%} " if confidence else ""
    legend = "".join(f'<span><span class="sw {verdict_class(v).replace("v-", "c-")}">{html.escape(v)}</span>'
                     f"{html.escape(MEANING[v])}</span>" for v in VERDICTS)
    tests = ", ".join(f"{html.escape(m)} {holm_count(ledger[ledger['model'] == m])}" for m in models)
    head = (f"<p class=note>Each paper's claim on each task of each model: the verdict, the effect [{level}interval] "
            f"and the n the interval rests on, as each model's own report gives them (a cell's links open the row in "
            f"that report). Holm's correction is each model's own, over its tests ({tests} tests).</p>"
            f"<div class=legend>{legend}</div>")

    def name(m: str) -> str:
        text = html.escape(m)
        return f'<a href="{html.escape(reports[m])}">{text}</a>' if m in reports else text

    top = "<tr><th class=claim rowspan=2>claim</th>" + "".join(
        f'<th class="model mfirst" colspan={len(tasks[m])} data-model="{html.escape(m)}">{name(m)}</th>'
        for m in models) + "</tr>"
    second = "<tr>" + "".join(
        f'<th{" class=mfirst" if i == 0 else ""} data-model="{html.escape(m)}">'
        f'{"all tasks" if t == ALL else html.escape(t)}</th>' for m in models for i, t in enumerate(tasks[m])) + "</tr>"
    rows = []
    for claim in claims:
        first = next(r for (c, _, _), r in by.items() if c == claim)
        pv = first.get("paper_value")
        paper_value = f"<br><span class=note>paper: {html.escape(pv)}</span>" if isinstance(pv, str) and pv else ""
        cells = []
        for m in models:
            base = reports.get(m, "")
            if (claim, m, ALL) in by:
                cells.append(_first(cell_html(by[(claim, m, ALL)], (), span=len(tasks[m]), base=base)))
                continue
            for i, t in enumerate(tasks[m]):
                r = by.get((claim, m, t))
                cell = cell_html(r, (), base=base) if r is not None else "<td class=cell></td>"
                cells.append(_first(cell) if i == 0 else cell)
        rows.append(f'<tr><th class=claim id="matrix-{html.escape(claim)}"><span class=stmt>'
                    f'{html.escape(str(first["statement"]))}</span><span class=note>{html.escape(str(first["paper"]))}'
                    f' §{html.escape(str(first["section"]))} · <code>{html.escape(claim)}</code></span>{paper_value}'
                    f"</th>{''.join(cells)}</tr>")
    return (head + f"<div class=tblwrap><table class='matrix mmatrix' id=claims-matrix><thead>{top}{second}</thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _first(cell: str) -> str:
    """A matrix cell marked as its model's first column (the group's left edge)."""
    return cell.replace('class="cell ', 'class="cell mfirst ', 1).replace("class=cell>", 'class="cell mfirst">', 1)


def counts_html(counts: pd.DataFrame) -> str:
    """results/compare/claims.csv as a table: per claim and task, each verdict's number of models and which."""
    tally = verdict_tally(counts)
    models = int(counts["models"].max()) if len(counts) else 0
    head = (f"<p class=note>Per claim and task: in how many of the {models} models it holds, is contradicted, is "
            f"inconclusive or was not computed, and in which. {tally['every']} hold in every model, {tally['some']} "
            f"in some, {tally['none']} in none. Table: <code>results/compare/claims.csv</code>.</p>")
    cols = ["claim", "task", *[v for v in COUNTED], "holds in"]
    rows = []
    for r in counts.to_dict("records"):
        cells = [f"<td class=txt><code>{html.escape(str(r['claim']))}</code><br><span class=note>"
                 f"{html.escape(str(r['statement']))}</span></td>",
                 f"<td class=txt>{'all tasks' if str(r['task']) == ALL else html.escape(str(r['task']))}</td>"]
        for v, col in COUNTED.items():
            which = str(r[f"models_{col}"]) if isinstance(r[f"models_{col}"], str) else ""
            n = int(r[col])
            cls = f" {verdict_class(v)}" if n else ""
            cells.append(f'<td class="cnt{cls}" data-verdict="{html.escape(v)}"><b>{n}</b>'
                         f"<span class=ms>{html.escape(which.replace(';', ', '))}</span></td>")
        cells.append(f"<td class=txt>{html.escape(str(r['holds_in']))}</td>")
        rows.append(f'<tr data-claim="{html.escape(str(r["claim"]))}" data-task="{html.escape(str(r["task"]))}">'
                    + "".join(cells) + "</tr>")
    thead = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (head + f"<div class=tblwrap><table class='tbl claims counts' id=claims-counts><thead><tr>{thead}</tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table></div>")


def compare_block(results: Path, inputs: Sequence[str]) -> str:
    """The comparisons across models that are declared inputs (results/compare/{name}.csv and .png), each under
    its title with its caption; "" when none is."""
    parts = []
    for name, title, caption in COMPARISONS:
        table, figure = layout.rel("compare_table", name=name), layout.rel("compare_figure", name=name)
        shown = ([figure_html(results / figure, caption=f"{name}: {caption}")] if figure in inputs else [])
        if table not in inputs and not shown:
            continue
        parts.append(f'<h3 id="compare-{name}">{html.escape(title)}</h3><p class=note>{html.escape(caption)}</p>')
        if shown:
            parts.append("<div class=figs>" + "".join(shown) + "</div>")
        if table in inputs:
            parts.append(table_html(results / table, results))
    if not parts:
        return ""
    return '<section id="compare"><h2>Comparisons across models</h2>' + "".join(parts) + "</section>"


def model_links(models: Sequence[str], inputs: Sequence[str]) -> dict[str, dict[str, str]]:
    """model -> {"report": path, "explorer": path} (relative to the run's results root) of the models' own pages
    that are declared inputs (results/m/{name}/report.html, explorer.html)."""
    out: dict[str, dict[str, str]] = {}
    for m in models:
        root = layout.model_root(m, root="")
        for page in ("report", "explorer"):
            file = layout.join(root, layout.rel(page))
            if file in inputs:
                out.setdefault(m, {})[page] = file
    return out


def build_models_report(results: Path, config: dict, inputs: Sequence[str], confidence: float | None = None) -> str:
    """The HTML text of the report of a run of several models. results: the run's results root; config: the run's
    validated config (shown); inputs: the files the page shows, as paths under `results` (the rule's declared
    inputs: claims.csv, compare/claims.csv, figures/claims.png, compare/*, m/{name}/report.html and explorer.html);
    confidence: the claims' interval level (said in the notes)."""
    results, inputs = Path(results), list(inputs)
    ledger_file = layout.rel("claims")
    if ledger_file not in inputs:
        raise ValueError(f"the report of several models shows their ledger: {ledger_file} is not among its inputs")
    ledger = pd.read_csv(results / ledger_file)
    models = model_order(ledger)
    links = model_links(models, inputs)
    reports = {m: p["report"] for m, p in links.items() if "report" in p}
    parts = ['<section id="claims"><h2>Claims checked on each model</h2>',
             models_matrix_html(ledger, models, confidence, reports)]
    nav = ['<a href="#claims">Claims</a>']
    counts = layout.rel("models_counts")
    if counts in inputs:
        parts.append('<h3 id="claims-across">Across models</h3>' + counts_html(pd.read_csv(results / counts)))
    forest = layout.rel("figure", name="claims")
    if forest in inputs:
        parts.append(f'<h3 id="claims-forest">Forest plot</h3><div class=figs>'
                     f"{figure_html(results / forest, wide=True)}</div>")
    parts.append("</section>")
    compared = compare_block(results, inputs)
    if compared:
        nav.append('<a href="#compare">Comparisons</a>')
        parts.append(compared)
    items = []
    for m in models:
        pages = links.get(m, {})
        found = [f'<a href="{html.escape(p)}">{k}</a>' for k, p in pages.items()]
        items.append(f'<li data-model="{html.escape(m)}"><b>{html.escape(m)}</b>: '
                     + (" · ".join(found) if found else "<span class=missing>no page of this model in this run</span>")
                     + "</li>")
    nav.append('<a href="#models">Models</a>')
    parts.append('<section id="models"><h2>Each model\'s own report and explorer</h2><ul class=models>'
                 + "".join(items) + "</ul></section>")
    parts.append(config_section(config))
    explorer = layout.rel("explorer")
    header = (f"<h1>bertology report: {len(models)} models</h1><p>models <b>{html.escape(', '.join(models))}</b> · "
              f"tasks <b>{html.escape(', '.join(_tasks(config)))}</b> · {stamp()}</p>" + mlflow_line(config)
              + (f'<p id=explorer-link>Every model\'s head explorer, one beside another: <a href="{explorer}">'
                 f"{explorer}</a></p>" if explorer in inputs else ""))
    return page_html(f"bertology report — {', '.join(models)}", header, nav, "".join(parts), css=CSS)


def _tasks(config: dict) -> list[str]:
    return [t["name"] if isinstance(t, dict) else str(t) for t in config.get("tasks", [])]

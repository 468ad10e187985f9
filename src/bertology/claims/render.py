"""The ledger in the report: first the claims matrix (:func:`matrix_html`: one row per claim, one column per task,
each cell the verdict as colour and word with the effect and its interval), then the full ledger (:func:`ledger_html`:
one row per claim and task, the paper's figure beside ours, each row linking to its section and figure)."""

from __future__ import annotations

import html
import math
from collections.abc import Collection

import pandas as pd

from bertology.claims.ledger import ALL, CHANCE_CLAIM, effect_text, verdict_marked
from bertology.claims.bootstrap import NOT_COMPUTED, VERDICTS

#: the colour of each verdict's word (CSS classes v-holds, v-contradicted, v-inconclusive, v-not-computed)
CSS = """
.claims td.v{font-weight:600;white-space:nowrap}.v-holds{color:#1e7b34}.v-contradicted{color:#b42318}
.v-inconclusive{color:#8a6d00}.v-not-computed{color:#7b8794}.claims td{vertical-align:top}
.claims td.stmt{max-width:28em;text-align:left}.claims td.txt{text-align:left}
.claims .caveat{color:#b42318;font-weight:400}.claims td.v-marked{font-style:italic}
.matrix .caveat{color:#b42318;font-weight:600}.matrix td.v-marked{font-style:italic}
table.matrix{border-collapse:separate;border-spacing:3px;font-size:.85em}
.matrix th{background:#f0f4f8;padding:.3em .6em;font-weight:600}.matrix th.claim{text-align:left;max-width:30em;
font-weight:400}.matrix th.claim .stmt{display:block;font-weight:600}.matrix td.cell{padding:.3em .5em;
border-radius:4px;text-align:center;min-width:7.5em;border:1px solid transparent}
.matrix td.cell .w{display:block;font-weight:700}.matrix td.cell .e{display:block;font-variant-numeric:tabular-nums}
.matrix td.cell .n{display:block;font-size:.85em;opacity:.85}.matrix td.cell .sd{font-size:.9em}
.c-holds{background:#dff3e4;color:#14532d}.c-contradicted{background:#fde2e0;color:#7f1d1d}
.c-inconclusive{background:#fdf3d0;color:#5c4700}.c-not-computed{background:#eef0f2;color:#52606d}
.matrix td.cell a{color:inherit}.legend{display:flex;flex-wrap:wrap;gap:.4em 1.2em;font-size:.85em;margin:.5em 0}
.legend span.sw{display:inline-block;padding:.05em .5em;border-radius:3px;font-weight:700;margin-right:.3em}
"""

#: what each verdict means (the matrix's legend)
MEANING = {
    "holds": "the interval lies wholly on the paper's side of the null",
    "contradicted": "the interval lies wholly on the other side",
    "inconclusive": "the interval touches the null, or there is none (n too small: the cell says what it rests on)",
    "not computed": "the run lacks the claim's tables (the full row names the config key that computes them)",
}


def _num(x) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return ""
    return "" if not math.isfinite(x) else f"{x:.3g}"


def verdict_class(verdict: str) -> str:
    return "v-" + verdict.replace(" ", "-")


def figure_anchor(stem: str) -> str:
    """The id of a figure's element in the report (results/figures/{stem}.png)."""
    return "fig-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in stem)


def ledger_html(ledger: pd.DataFrame, figures: Collection[str] = (), confidence: float | None = None) -> str:
    """The ledger's HTML table. figures: the stems of the report's figures (``cosine-rte``), for the links."""
    figures = set(figures)
    level = f"{confidence:.0%} " if confidence else ""
    head = ("<p class=note>Each paper's claim checked on this run: the effect with its "
            f"{level}interval (bootstrap over the claim's unit; Multi-Bootstrap over seeds and units with two or more "
            "seeds). <b>holds</b>: the interval lies wholly on the paper's side of the null; <b>contradicted</b>: "
            "wholly on the other side; <b>inconclusive</b>: otherwise; <b>not computed</b>: the run lacks its tables "
            "(the config key that computes them is named). p: a one-sided named test, p (Holm): corrected over every "
            "test of the run. <b>caveat</b>: the task's fine-tuned model does not beat chance (the interval of "
            f"<code>{CHANCE_CLAIM}</code>, the fine-tuned model against the encoder with an untrained head); the "
            "verdict of a claim about that fine-tuned model is then marked <i>model at chance</i>: it describes a "
            "classifier that learned nothing of its task. Full table: <code>results/claims.csv</code>, definitions: "
            "docs/reference.md#claims.</p>")
    cols = ["claim", "task", "verdict", "effect [interval]", "holds if", "paper", "statement", "test", "p (Holm)",
            "rests on", "seeds agree", "caveat"]
    rows = []
    for r in ledger.to_dict("records"):
        verdict = str(r["verdict"])
        anchor = str(r.get("anchor") or "")
        stem = (str(r["figure"]) if str(r["task"]) == ALL else f"{r.get('figure')}-{r['task']}") \
            if r.get("figure") else ""
        links = [f'<a href="#{html.escape(anchor)}">§</a>'] if anchor else []
        if stem in figures:
            links.append(f'<a href="#{figure_anchor(stem)}">figure</a>')
        note = f" ({html.escape(str(r['note']))})" if verdict == NOT_COMPUTED and isinstance(r.get("note"), str) else ""
        caveat = str(r["caveat"]) if isinstance(r.get("caveat"), str) else ""
        marked = verdict_marked(r)
        mark = "<br><span class=caveat>model at chance</span>" if marked else ""
        vclass, title = (" v-marked", f' title="{html.escape(caveat)}"') if marked else ("", "")
        seeds = (f"{r['seeds_agree']}/{r['n_seeds']}: {html.escape(str(r['seed_verdicts']))}"
                 if isinstance(r.get("seed_verdicts"), str) and r["seed_verdicts"] else "")
        cells = [
            (f"<td class=txt id=\"claim-{html.escape(str(r['claim']))}-{html.escape(str(r['task']))}\">"
             f"<code>{html.escape(str(r['claim']))}</code> {' '.join(links)}<br><span class=note>"
             f"{html.escape(str(r['paper']))} {html.escape(str(r['section']))}</span></td>"),
            f"<td class=txt>{html.escape(str(r['task']))}<br><span class=note>{html.escape(str(r['variant']))}</span></td>",
            f"<td class=\"v {verdict_class(verdict)}{vclass}\"{title}>{html.escape(verdict)}{note}{mark}</td>",
            f"<td class=num>{html.escape(effect_text(r))}</td>",
            f"<td class=num>{html.escape(str(r['side']))} {_num(r['null'])}</td>",
            f"<td class=txt>{html.escape(str(r['paper_value']) if isinstance(r.get('paper_value'), str) else '')}</td>",
            (f"<td class=stmt>{html.escape(str(r['statement']))}<br><span class=note>"
             f"{html.escape(str(r['statistic']))}</span></td>"),
            f"<td class=txt>{html.escape(str(r['test']) if isinstance(r.get('test'), str) else '')}</td>",
            f"<td class=num>{_num(r['p'])} ({_num(r['p_holm'])})</td>",
            f"<td class=txt>{html.escape(str(r['rests_on']) if isinstance(r.get('rests_on'), str) else str(r['n']))}</td>",
            f"<td class=txt>{seeds}</td>",
            f"<td class=\"txt caveat\">{html.escape(caveat)}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    thead = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (head + f"<div class=tblwrap><table class='tbl claims'><thead><tr>{thead}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


def task_caveats(ledger: pd.DataFrame) -> dict[str, str]:
    """task -> its caveat, for the tasks whose rows carry one (the ledger's ``caveat`` column: the task's fine-tuned
    model does not beat chance); {} for a ledger without the column."""
    if "caveat" not in ledger.columns:
        return {}
    out = {}
    for task, caveat in zip(ledger["task"].astype(str), ledger["caveat"]):
        if isinstance(caveat, str) and caveat and task not in out:
            out[task] = caveat
    return out


def matrix_axes(ledger: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The matrix's rows and columns: the claims in the ledger's order (the report's), and the tasks in the
    ledger's order without :data:`bertology.claims.ledger.ALL` (a task-free claim's one cell spans them)."""
    claims = list(dict.fromkeys(ledger["claim"].astype(str)))
    tasks = [t for t in dict.fromkeys(ledger["task"].astype(str)) if t != ALL]
    return claims, tasks


def holm_count(ledger: pd.DataFrame) -> int:
    """How many tests Holm's correction of the ledger spans (its finite p-values: one per claim and task, a
    task-free claim once)."""
    return int(pd.to_numeric(ledger["p"], errors="coerce").notna().sum())


def seed_marks(row) -> str:
    """Each seed's verdict as a dot in its verdict's colour (its title: the seed and verdict), or '' with one seed."""
    per = str(row.get("seed_verdicts") or "")
    if not per or per == "nan":
        return ""
    seeds = str(row.get("seeds") or "").split(";")
    marks = []
    for i, v in enumerate(per.split(";")):
        tag = seeds[i] if i < len(seeds) else str(i + 1)
        marks.append(f'<span class="sd {verdict_class(v)}" title="seed {html.escape(tag)}: {html.escape(v)}">'
                     "&#9679;</span>")
    return f" · seeds {''.join(marks)}"


def cell_html(r, figures: Collection[str] = (), span: int = 1, base: str = "") -> str:
    """One cell of the matrix: a ledger row's verdict as colour and word, effect [interval], the n it rests on, and
    links to its full ledger row and its figure (on the page `base`, ``""``: this page; ``m/a/report.html``: that
    model's report). span: the tasks a task-free row's cell spans."""
    verdict = str(r["verdict"])
    claim, task = html.escape(str(r["claim"])), html.escape(str(r["task"]))
    figure = str(r.get("figure") or "")
    stem = figure if str(r["task"]) == ALL else f"{figure}-{r['task']}"
    base = html.escape(base)
    links = [f'<a href="{base}#claim-{claim}-{task}">row</a>']
    if figure and stem in figures:
        links.append(f'<a href="{base}#{figure_anchor(stem)}">figure</a>')
    model = r.get("model")
    model_attr = f' data-model="{html.escape(model)}"' if isinstance(model, str) and model else ""
    rests = str(r.get("rests_on") or "") if isinstance(r.get("rests_on"), str) else f"n = {r['n']} {r['unit']}"
    effect = html.escape(effect_text(r)) or "–"
    col = f" colspan={span}" if span > 1 else ""
    label = "all tasks: " if str(r["task"]) == ALL else ""
    marked = verdict_marked(r)
    mark = "<span class=caveat> (model at chance)</span>" if marked else ""
    title = rests + (f"; {r['caveat']}" if marked else "")
    return (f'<td{col} class="cell {verdict_class(verdict).replace("v-", "c-")}{" v-marked" if marked else ""}" '
            f'data-claim="{claim}" data-task="{task}"{model_attr} data-verdict="{html.escape(verdict)}" '
            f'data-caveat="{"1" if marked else ""}" title="{html.escape(title)}">'
            f"<span class=w>{label}{html.escape(verdict)}{mark}</span><span class=e>{effect}</span>"
            f"<span class=n>{html.escape(_rests_short(rests))}{seed_marks(r)} · {' · '.join(links)}</span></td>")


def _rests_short(rests: str) -> str:
    """The n part of rests_on ('n = 144 heads'), without the reason an interval is missing or the unit's gloss (the
    cell's title has the whole)."""
    return rests.removeprefix("no interval: ").split(";")[0].split(" (")[0]


def matrix_html(ledger: pd.DataFrame, figures: Collection[str] = (), confidence: float | None = None) -> str:
    """The claims matrix: one row per claim (short statement, paper and section, the paper's figure), one column
    per task, each cell the verdict as colour and word, the effect [interval], the n it rests on, each seed's
    verdict with two or more seeds, and links to the claim's full ledger row and its figure; a task-free claim
    has one cell across the tasks. A legend says what the verdicts mean and how many tests Holm corrected for.
    Extra columns of the ledger are ignored. figures: the report's figure stems (``cosine-rte``), for the links."""
    figures = set(figures)
    claims, tasks = matrix_axes(ledger)
    by = {(str(r["claim"]), str(r["task"])): r for r in ledger.to_dict("records")}
    level = f"{confidence:.0%} " if confidence else ""
    legend = "".join(f'<span><span class="sw {verdict_class(v).replace("v-", "c-")}">{html.escape(v)}</span>'
                     f"{html.escape(MEANING[v])}</span>" for v in VERDICTS)
    counts = ledger["verdict"].value_counts()
    tally = ", ".join(f"{int(counts.get(v, 0))} {v}" for v in VERDICTS)
    head = (f"<p class=note>Each paper's claim on each task of this run: the verdict, the effect [{level}interval] and "
            f"the n the interval rests on. Holm's correction spans <b>{holm_count(ledger)} tests</b> (one per claim "
            f"and task; a claim whose inputs do not depend on the task is one row, <i>all tasks</i>, and one test). "
            f"{tally}. The full ledger is below and in <code>results/claims.csv</code>; the forest plot after it.</p>"
            f"<div class=legend>{legend}</div>")
    seeds = pd.to_numeric(ledger["n_seeds"], errors="coerce").groupby(ledger["task"].astype(str)).max()
    at_chance = task_caveats(ledger)
    thead = "<tr><th class=claim>claim</th>" + "".join(
        f"<th>{html.escape(t)}" + (f"<br><span class=note>{int(seeds[t])} seeds pooled (dots: each seed)</span>"
                                   if seeds.get(t, 0) > 1 else "")
        + (f'<br><span class=caveat title="{html.escape(at_chance[t])}">fine-tuned model at chance: its verdicts '
           "describe an untrained classifier</span>" if t in at_chance else "") + "</th>" for t in tasks) + "</tr>"
    rows = []
    for claim in claims:
        first = next(r for (c, _), r in by.items() if c == claim)
        pv = first.get("paper_value")
        paper_value = f"<br><span class=note>paper: {html.escape(pv)}</span>" if isinstance(pv, str) and pv else ""
        th = (f'<th class=claim id="matrix-{html.escape(claim)}"><span class=stmt>{html.escape(str(first["statement"]))}'
              f'</span><span class=note>{html.escape(str(first["paper"]))} §{html.escape(str(first["section"]))} · '
              f"<code>{html.escape(claim)}</code></span>{paper_value}</th>")
        if (claim, ALL) in by:
            cells = cell_html(by[(claim, ALL)], figures, span=max(1, len(tasks)))
        else:
            cells = "".join(cell_html(by[(claim, t)], figures) if (claim, t) in by else "<td class=cell></td>"
                            for t in tasks)
        rows.append(f"<tr>{th}{cells}</tr>")
    return (head + f"<div class=tblwrap><table class=matrix id=claims-matrix><thead>{thead}</thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")

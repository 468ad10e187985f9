"""The ledger as the report's first section: one row per claim and task, the verdict a coloured word, the effect
with its interval, the paper's figure beside ours, each row linking to its section and figure."""

from __future__ import annotations

import html
import math
from collections.abc import Collection

import pandas as pd

from bertology.claims.ledger import CHANCE_CLAIM, effect_text, verdict_marked
from bertology.claims.stats import NOT_COMPUTED

#: the colour of each verdict's word (CSS classes v-holds, v-contradicted, v-inconclusive, v-not-computed)
CSS = """
.claims td.v{font-weight:600;white-space:nowrap}.v-holds{color:#1e7b34}.v-contradicted{color:#b42318}
.v-inconclusive{color:#8a6d00}.v-not-computed{color:#7b8794}.claims td{vertical-align:top}
.claims td.stmt{max-width:28em;text-align:left}.claims td.txt{text-align:left}
.claims .caveat{color:#b42318;font-weight:400}.claims td.v-marked{font-style:italic}
"""


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
    cols = ["claim", "task", "verdict", "effect [interval]", "holds if", "paper", "statement", "test", "p (Holm)", "n",
            "seeds agree", "caveat"]
    rows = []
    for r in ledger.to_dict("records"):
        verdict = str(r["verdict"])
        anchor = str(r.get("anchor") or "")
        stem = f"{r.get('figure')}-{r['task']}" if r.get("figure") else ""
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
            f"<td class=num>{html.escape(str(r['n']))}</td>",
            f"<td class=txt>{seeds}</td>",
            f"<td class=\"txt caveat\">{html.escape(caveat)}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    thead = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (head + f"<div class=tblwrap><table class='tbl claims'><thead><tr>{thead}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")

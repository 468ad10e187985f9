"""The forest plot of the claims ledger, results/figures/claims.png (written by the claims step): every claim's
effect and interval per task on the claim's own scale with its null drawn, grouped by paper (the papers packed
into columns of panels), the verdict as marker colour and the n each interval rests on beside it.

Each claim is one panel: a row per task (one row, ``all``, for a task-free claim), the effect as a dot, its
interval as a bar, the null as a dashed line, the paper's side shaded; a row with no interval is a hollow dot,
a claim not computed on a task is its row's label in grey. A ledger of several models (its ``model`` column, a run's
results/claims.csv) has each claim's rows grouped by model: the model's rows (one per task) together, labelled
``model · task``, the models in the ledger's order. Extra columns of the ledger are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bertology.claims.ledger import ALL
from bertology.claims.bootstrap import CONTRADICTED, HOLDS, INCONCLUSIVE, NOT_COMPUTED

#: the verdicts' marker colours (the report's matrix uses the same hues)
COLOURS = {HOLDS: "#1e7b34", CONTRADICTED: "#b42318", INCONCLUSIVE: "#c49a00", NOT_COMPUTED: "#9aa5b1"}
#: inches per task row, per panel's title, per paper's heading
ROW_IN, TITLE_IN, PAPER_IN = 0.2, 0.42, 0.32


def _float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def paper_blocks(ledger: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """(paper, its claims) in the ledger's order of first appearance."""
    out: dict[str, list[str]] = {}
    for claim, paper in zip(ledger["claim"].astype(str), ledger["paper"].astype(str)):
        out.setdefault(paper, [])
        if claim not in out[paper]:
            out[paper].append(claim)
    return list(out.items())


def pack_columns(heights: Sequence[float], n_columns: int) -> list[list[int]]:
    """Indices of `heights` (the papers' blocks, in order) split into at most `n_columns` consecutive runs of
    about equal total height (the order kept: a reader finds the papers in the ledger's order, column by column)."""
    total = float(sum(heights))
    target = total / max(1, n_columns)
    cols: list[list[int]] = [[]]
    acc = 0.0
    for i, h in enumerate(heights):
        if cols[-1] and acc + h / 2 > target * len(cols) and len(cols) < n_columns:
            cols.append([])
        cols[-1].append(i)
        acc += h
    return cols


def _limits(rows: pd.DataFrame, null: float) -> tuple[float, float]:
    vals = [null] + [v for c in ("effect", "ci_low", "ci_high") for v in rows[c].map(_float) if math.isfinite(v)]
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.08 or max(abs(null) * 0.1, 0.05)
    return lo - pad, hi + pad


def ledger_models(ledger: pd.DataFrame) -> list[str]:
    """The models of a ledger in the order of their first rows when it holds two or more (its ``model`` column),
    else [] (one model: rows are labelled by task alone)."""
    if "model" not in ledger.columns:
        return []
    models = [str(m) for m in dict.fromkeys(ledger["model"].fillna("").astype(str))]
    return models if len(models) > 1 else []


def panel_rows(rows: pd.DataFrame, tasks: Sequence[str], models: Sequence[str] = ()) -> list[tuple[str, str]]:
    """A claim's panel rows as (model, task), top to bottom: per model (``""`` for a ledger of one model) its
    tasks, or its one :data:`ALL` row when its row for the claim is task-free."""
    out = []
    for m in models or [""]:
        mine = rows if not m else rows[rows["model"].astype(str) == m]
        out += [(m, ALL)] if (mine["task"].astype(str) == ALL).any() else [(m, t) for t in tasks]
    return out


def _row_label(model: str, task: str) -> str:
    name = "all tasks" if task == ALL else task
    return f"{model} · {name}" if model else name


def _panel(ax, rows: pd.DataFrame, tasks: list[str], models: Sequence[str] = ()) -> None:
    """One claim: its rows (one per task, or the one `all` row; per model of `models`) on its own scale."""
    from matplotlib.ticker import MaxNLocator

    first = rows.iloc[0]
    null, side = _float(first["null"]), str(first["side"])
    labels = panel_rows(rows, tasks, models)
    lo, hi = _limits(rows, null)
    ax.set_xlim(lo, hi)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    if side == ">":
        ax.axvspan(null, hi, color="#1e7b34", alpha=0.06, lw=0)
    else:
        ax.axvspan(lo, null, color="#1e7b34", alpha=0.06, lw=0)
    ax.axvline(null, color="#52606d", ls="--", lw=0.9)
    by_task = {(str(r["model"]) if models else "", str(r["task"])): r for r in rows.to_dict("records")}
    for y, task in enumerate(labels):
        r = by_task.get(task)
        if r is None:
            continue
        verdict = str(r["verdict"])
        colour = COLOURS.get(verdict, "#52606d")
        e, a, b = _float(r["effect"]), _float(r["ci_low"]), _float(r["ci_high"])
        rests = r.get("rests_on")
        n_text = (str(rests).removeprefix("no interval: ").split(";")[0].split(" (")[0]
                  if isinstance(rests, str) and rests else f"n = {r['n']}")
        if verdict == NOT_COMPUTED or not math.isfinite(e):
            ax.text(null, y, "  not computed", va="center", ha="left", fontsize=6.5, color=COLOURS[NOT_COMPUTED])
            continue
        if math.isfinite(a) and math.isfinite(b):
            ax.plot([a, b], [y, y], color=colour, lw=2.2, solid_capstyle="butt")
            ax.plot(e, y, "o", ms=4.5, color=colour, mec="white", mew=0.6)
        else:
            ax.plot(e, y, "o", ms=4.5, mfc="white", mec=colour, mew=1.3)
            n_text += ", no interval"
        ax.text(1.01, y, n_text, transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=6.5,
                color="#52606d", clip_on=False)
    ax.set_yticks(range(len(labels)), [_row_label(m, t) for m, t in labels], fontsize=7)
    for y in range(1, len(labels)):
        if labels[y][0] != labels[y - 1][0]:  # between two models' rows
            ax.axhline(y - 0.5, color="#bcccdc", lw=0.6)
    for tick, task in zip(ax.get_yticklabels(), labels):
        r = by_task.get(task)
        if r is None or str(r["verdict"]) == NOT_COMPUTED:
            tick.set_color(COLOURS[NOT_COMPUTED])
    ax.tick_params(axis="x", labelsize=6.5, length=2, pad=1)
    ax.tick_params(axis="y", length=0)
    for spine in ("top", "right", "left"):
        ax.spines[spine].set_visible(False)
    section = str(first["section"]).split(" (")[0]
    ax.set_title(f"{first['claim']}  ·  §{section}  ·  holds if {side} {null:g}", fontsize=7.5, loc="left", pad=2)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))


#: inches: a column's width, the task labels' margin and the panel's width in it (the n text after the panel)
COLUMN_IN, LABEL_IN, PANEL_IN = 5.6, 0.62, 2.9
#: inches above the first column: the title and the legend
TOP_IN = 0.85


def _heading(paper: str) -> list[str]:
    import textwrap

    return textwrap.wrap(paper, 58) or [""]


def forest_figure(ledger: pd.DataFrame, confidence: float | None = None, n_columns: int | None = None):
    """The forest plot of a ledger (results/claims.csv's rows; at least one). n_columns: the columns the papers are
    packed into (None: 1 for a short ledger, 2, or 3 when one would be taller than 45 inches). Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if ledger.empty:
        raise ValueError("the ledger has no row: nothing to plot")
    ledger = ledger.assign(task=ledger["task"].astype(str), claim=ledger["claim"].astype(str))
    models = ledger_models(ledger)
    if models:
        ledger = ledger.assign(model=ledger["model"].fillna("").astype(str))
    tasks = [t for t in dict.fromkeys(ledger["task"]) if t != ALL]
    blocks = paper_blocks(ledger)
    per_claim = {c: ledger[ledger["claim"] == c] for _, cs in blocks for c in cs}

    def rows_of(c: str) -> int:
        return max(1, len(panel_rows(per_claim[c], tasks, models)))

    def panel_in(c: str) -> float:
        return TITLE_IN + ROW_IN * rows_of(c) + 0.18

    heights = [PAPER_IN * len(_heading(p)) + sum(panel_in(c) for c in cs) for p, cs in blocks]
    if n_columns is None:
        total = sum(heights)
        n_columns = 1 if total < 8 else 2 if total < 45 else 3
    columns = pack_columns(heights, n_columns)
    tallest = max(sum(heights[i] for i in col) for col in columns)
    # the row labels' margin: wider for `model · task` labels (about 0.055 inch a character at 7 points)
    label_in = max(LABEL_IN, 0.1 + 0.055 * max(len(_row_label(m, t)) for m in models for t in [*tasks, ALL])) \
        if models else LABEL_IN
    column_in = COLUMN_IN + label_in - LABEL_IN
    width, height = column_in * len(columns), tallest + TOP_IN + 0.2
    fig = plt.figure(figsize=(width, height))
    for k, col in enumerate(columns):
        top = TOP_IN
        x0 = k * column_in
        for i in col:
            paper, cs = blocks[i]
            lines = _heading(paper)
            fig.text(x0 / width + 0.1 / width, 1 - (top + PAPER_IN * len(lines) - 0.08) / height, "\n".join(lines),
                     fontsize=9.5, fontweight="bold", color="#243b53", va="bottom")
            top += PAPER_IN * len(lines)
            for c in cs:
                h = ROW_IN * rows_of(c)
                top += TITLE_IN - 0.12
                ax = fig.add_axes(((x0 + label_in) / width, 1 - (top + h) / height, PANEL_IN / width, h / height))
                _panel(ax, per_claim[c], tasks, models)
                top += h + 0.3
    level = f"{confidence:.0%} " if confidence else ""
    handles = [Line2D([], [], marker="o", color=COLOURS[v], lw=2, ms=5, label=v) for v in (HOLDS, CONTRADICTED,
                                                                                            INCONCLUSIVE)]
    handles.append(Line2D([], [], marker="o", mfc="white", mec="#52606d", lw=0, ms=5, label="no interval"))
    handles.append(Line2D([], [], color="#52606d", ls="--", lw=1, label="null (shaded: the paper's side)"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.32 / height), ncol=len(handles),
               fontsize=7.5, frameon=False)
    per = "per model and task" if models else "per task"
    fig.suptitle(f"Claims checked on this run: effect and {level}interval {per}; n: what the interval rests on",
                 fontsize=10, y=1 - 0.08 / height, va="top")
    return fig


def write_forest(ledger: pd.DataFrame, path: str | Path, confidence: float | None = None) -> Path:
    """results/figures/claims.png: :func:`forest_figure` of the ledger, saved with the project's style; a ledger
    with no row gives a figure saying so."""
    from bertology.pipeline.plotting import new_figure, save_figure

    if ledger.empty:
        fig, ax = new_figure(5, 1.2)
        ax.axis("off")
        ax.text(0.5, 0.5, "no claim in this run's ledger", ha="center", va="center")
        return save_figure(fig, path)
    return save_figure(forest_figure(ledger, confidence), path)



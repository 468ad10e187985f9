"""The claims ledger on the explorer page: per task, each claim of results/claims.csv with its verdict, effect and
the heads behind it (highlighted in the layer x head grid when the claim is picked); a task-free claim (task
``all``) is in every task's list, marked ``all``. The page draws the claims matrix (claims down, tasks across)
from these lists, as the report does."""

from __future__ import annotations

import math
from typing import Any

from bertology.explorer.inputs import Inputs
from bertology.analyses import REGISTRY


def _statistic(claim: str) -> str:
    """The explorer statistic shown with a claim: the first statistic of the analysis that declares it ('' if none)."""
    for a in REGISTRY:
        if any(c.id == claim for c in a.claims) and a.statistics:
            return a.statistics[0].id
    return ""


def _num(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def claims_block(src: Inputs, task: str, notes: list[str]) -> list[dict]:
    """The task's rows of results/claims.csv (and the task-free ones, task ``all``) for the page: id, paper,
    statement, verdict, effect, side, null, p_holm, rests_on (what the interval rests on), all (task-free),
    statistic (the grid's statistic to show), heads ([layer, head], 0-based). [] without a declared ledger; columns
    the page does not know are ignored."""
    from bertology.claims.ledger import ALL, effect_text

    path = src.path("claims")
    if not src.readable(path):
        return []
    ledger = src.read_csv(path, notes)
    if ledger is None:
        return []
    out = []
    for r in ledger[ledger["task"].astype(str).isin([task, ALL])].to_dict("records"):
        heads = [[int(x) for x in pair.split("-")] for pair in str(r.get("heads") or "").split(";")
                 if pair.replace("-", "").isdigit() and pair.count("-") == 1]
        out.append({"id": str(r["claim"]), "paper": f"{r['paper']} {r['section']}", "statement": str(r["statement"]),
                    "variant": str(r["variant"]), "verdict": str(r["verdict"]), "effect": effect_text(r),
                    "side": str(r["side"]), "null": _num(r["null"]), "p_holm": _num(r["p_holm"]),
                    "rests_on": str(r["rests_on"]) if isinstance(r.get("rests_on"), str) else "",
                    "all": str(r["task"]) == ALL, "statistic": _statistic(str(r["claim"])), "heads": heads})
    return out

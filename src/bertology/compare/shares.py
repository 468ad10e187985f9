"""Shares per model: Kovaleva et al.'s five pattern classes (patterns.csv) and Pande et al.'s sieve roles
(sieve.csv), per task and store variant and pooled over tasks (docs/reference.md#compare-patterns,
#compare-roles)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from bertology.compare.common import POOLED, VARIANTS, frame, missing, pooled_note, rows_of
from bertology.kovaleva.patterns import CLASSES
from bertology.sieve import ROLES

PATTERN_COLUMNS = ("model", "task", "kind", "variant", "class", "share", "n", "note")
ROLE_COLUMNS = ("model", "task", "kind", "variant", "role", "heads", "n_heads", "share", "note")

#: the role of a head assigned none of the sieve roles
NO_ROLE = "none"


def class_shares(rows: pd.DataFrame) -> pd.DataFrame:
    """patterns.csv rows of one model and variant (task, layer, head, class, fraction, n; any number of tasks) ->
    per class the share of all maps classified (each head's fraction weighted by its maps, n) and n = the maps: the
    pooled row's fractions of one task (layer = head = -1 rows are left aside and recomputed from the heads)."""
    heads = rows[(rows["layer"] >= 0) & (rows["head"] >= 0)]
    maps = heads.drop_duplicates(["task", "layer", "head"])["n"].sum()
    counts = (heads["fraction"] * heads["n"]).groupby(heads["class"]).sum()
    return pd.DataFrame({"class": list(CLASSES),
                         "share": [float(counts.get(c, 0.0)) / maps if maps else float("nan") for c in CLASSES],
                         "n": int(maps)})


def role_shares(rows: pd.DataFrame) -> pd.DataFrame:
    """sieve.csv rows of one model and variant (task, layer, head, role, assigned; any number of tasks) -> per role
    (ROLES' order, those present, then ``none``: heads with no role) heads = the (task, head) pairs assigned it,
    n_heads = every (task, head) pair, share = heads / n_heads."""
    assigned = rows.assign(assigned=rows["assigned"].astype(str).str.lower().eq("true"))
    units = assigned[["task", "layer", "head"]].drop_duplicates()
    n_heads = len(units)
    out = [{"role": r, "heads": int(assigned[assigned["role"] == r]["assigned"].sum())}
           for r in ROLES if r in set(assigned["role"])]
    with_role = assigned[assigned["assigned"]][["task", "layer", "head"]].drop_duplicates()
    out.append({"role": NO_ROLE, "heads": n_heads - len(with_role)})
    table = pd.DataFrame(out).assign(n_heads=n_heads)
    return table.assign(share=table["heads"] / n_heads if n_heads else float("nan"))


def _shares(tables: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], note: Callable,
            compute, columns: Sequence[str]) -> pd.DataFrame:
    """One table of shares: per model, store variant (pretrained; fine-tuned where the model has its rows for a
    task) and task, `compute` over that task's rows, then over every task's rows pooled (two or more tasks); a
    task without rows is a row with only its note, ``note(task, variant)``."""
    out = []
    for model, kind in kinds.items():
        present = set(rows_of(tables, model)["variant"]) if len(rows_of(tables, model)) else set()
        for variant in (v for v in VARIANTS if v == "pretrained" or v in present):
            base = {"model": model, "kind": kind, "variant": variant}
            done, pooled = [], []
            for task in tasks:
                rows = rows_of(tables, model, task, variant)
                if len(rows) == 0:
                    out.append(frame([{**base, "task": task,
                                       "note": note(task, variant)}], columns))
                    continue
                out.append(compute(rows).assign(**base, task=task, note=""))
                done.append(task)
                pooled.append(rows)
            if len(tasks) > 1 and pooled:
                out.append(compute(pd.concat(pooled, ignore_index=True)).assign(**base, task=POOLED,
                                                                                  note=pooled_note(done)))
    return pd.concat([f[list(columns)] for f in out], ignore_index=True) if out else frame([], columns)


def patterns(tables: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], *,
             sources: Mapping[str, str]) -> pd.DataFrame:
    """patterns.csv of the comparison (PATTERN_COLUMNS): every class's share of the maps per model, task and
    variant, and pooled over tasks. tables: model -> its patterns.csv rows (``task``, ``variant`` columns);
    sources: the path text of each source (``patterns``), for the notes (:mod:`bertology.compare.common`)."""
    return _shares(tables, kinds, tasks, lambda task, variant: missing(sources, "patterns", task, variant=variant),
                   class_shares, PATTERN_COLUMNS)


def roles(tables: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], *,
          sources: Mapping[str, str]) -> pd.DataFrame:
    """roles.csv of the comparison (ROLE_COLUMNS): the share of heads per sieve role per model, task and variant,
    and pooled over tasks. tables: model -> its sieve.csv rows (``task``, ``variant`` columns); sources: the path
    text of each source (``sieve``), for the notes (:mod:`bertology.compare.common`)."""
    return _shares(tables, kinds, tasks, lambda task, variant: missing(sources, "sieve", task, variant=variant),
                   role_shares, ROLE_COLUMNS)


__all__ = ["NO_ROLE", "PATTERN_COLUMNS", "ROLE_COLUMNS", "class_shares", "patterns", "role_shares", "roles"]

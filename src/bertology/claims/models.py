"""The ledger of a run of several models: every model's ledger (its results/m/{name}/claims.csv) in one table, and
per claim and task in how many models it holds, is contradicted, is inconclusive or was not computed, and in which.

:func:`merge_ledgers` is results/claims.csv of the run (the models' rows, in the models' order, each as its own
ledger wrote it); :func:`verdict_counts` is results/compare/claims.csv (:data:`COUNT_COLUMNS`); :func:`to_markdown`
is results/claims.md. Holm's correction stays each model's own (``p_holm`` over that model's tests, as its ledger
computed it): a model's rows read the same in a run of one model or of ten, and the verdicts, which rest on the
intervals and not on p, are what the counts add up. Pure: frames in, frames and text out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from bertology.claims.bootstrap import CONTRADICTED, HOLDS, INCONCLUSIVE, NOT_COMPUTED
from bertology.claims.ledger import ALL, COLUMNS
from bertology.claims.ledger import to_markdown as ledger_markdown
from bertology.pipeline.errors import InputError

#: the verdicts counted, each with its column's name in :data:`COUNT_COLUMNS` (``holds``, ``models_holds``, ...)
COUNTED = {HOLDS: "holds", CONTRADICTED: "contradicted", INCONCLUSIVE: "inconclusive", NOT_COMPUTED: "not_computed"}

#: results/compare/claims.csv's columns: per claim and task, how many models and which (``;``-joined, in the
#: models' order) give each verdict; a model whose ledger has no row for the claim and task counts as not computed.
#: holds_in: in how many of the models it holds, in words (every | most | some | one | none)
COUNT_COLUMNS = ("claim", "paper", "section", "statement", "task", "variant", "models", "holds", "contradicted",
                 "inconclusive", "not_computed", "models_holds", "models_contradicted", "models_inconclusive",
                 "models_not_computed", "holds_in")


def merge_ledgers(ledgers: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The run's ledger: each model's ledger (model name -> its claims.csv, in the models' order) with its rows in
    that order, every row's ``model`` the name it is given under (a ledger without the column, or with it empty,
    gets it; one naming another model is an error). Columns :data:`bertology.claims.ledger.COLUMNS`, then any
    extra column of a model's ledger."""
    frames = []
    for name, ledger in ledgers.items():
        ledger = ledger.copy()
        if "model" in ledger.columns:
            named = {str(v) for v in ledger["model"].dropna() if str(v)}
            if named - {name}:
                raise InputError(f"the ledger given for model {name!r} holds rows of model {sorted(named)[0]!r}: "
                                 f"each model's claims.csv is results/m/{{name}}/claims.csv")
        ledger["model"] = name
        frames.append(ledger)
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    merged = pd.concat(frames, ignore_index=True)
    extra = [c for c in merged.columns if c not in COLUMNS]
    return merged.reindex(columns=[*COLUMNS, *extra])


def model_order(ledger: pd.DataFrame) -> list[str]:
    """The models of a run's ledger, in the order of their first rows."""
    return [str(m) for m in dict.fromkeys(ledger["model"].astype(str))]


def verdict_counts(ledger: pd.DataFrame, models: Sequence[str] | None = None) -> pd.DataFrame:
    """results/compare/claims.csv of a run's ledger (:func:`merge_ledgers`): one row per claim and task in the
    ledger's order (a claim's task-free row, task :data:`bertology.claims.ledger.ALL`, after its per-task ones),
    with per verdict the number of models and their names. models: the run's models (None: those of the ledger);
    a model without a row for the claim and task counts as not computed."""
    from bertology.stats.across_seeds import verdict as in_words

    models = list(models) if models is not None else model_order(ledger)
    ledger = ledger.assign(model=ledger["model"].astype(str), claim=ledger["claim"].astype(str),
                           task=ledger["task"].astype(str))
    keys = list(dict.fromkeys(zip(ledger["claim"], ledger["task"])))
    order = {c: i for i, c in enumerate(dict.fromkeys(ledger["claim"]))}
    keys.sort(key=lambda k: (order[k[0]], k[1] == ALL))
    by = {(r["claim"], r["task"], r["model"]): str(r["verdict"]) for r in ledger.to_dict("records")}
    first = ledger.drop_duplicates(["claim", "task"]).set_index(["claim", "task"])
    rows = []
    for claim, task in keys:
        which: dict[str, list[str]] = {v: [] for v in COUNTED}
        for m in models:
            v = by.get((claim, task, m), NOT_COMPUTED)
            which[v if v in which else NOT_COMPUTED].append(m)
        info = first.loc[(claim, task)]
        row = {"claim": claim, "paper": info["paper"], "section": info["section"], "statement": info["statement"],
               "task": task, "variant": info["variant"], "models": len(models)}
        for v, col in COUNTED.items():
            row[col] = len(which[v])
            row[f"models_{col}"] = ";".join(which[v])
        row["holds_in"] = in_words(len(which[HOLDS]), len(models))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COUNT_COLUMNS))


def to_markdown(ledger: pd.DataFrame, confidence: float) -> str:
    """results/claims.md of a run of several models: what the verdicts mean (as each model's claims.md says it),
    then one section per model with its table (:func:`bertology.claims.ledger.to_markdown`'s)."""
    models = model_order(ledger) if len(ledger) else []
    head = ledger_markdown(ledger.iloc[:0], confidence).split("\n| claim |")[0].replace(
        "# Claims checked on this run", "# Claims checked on this run, per model", 1).rstrip()
    parts = [head + (" p_holm is each model's own (Holm over that model's tests).\n" if models else "\n")]
    for m in models:
        table = ledger_markdown(ledger[ledger["model"].astype(str) == m], confidence)
        parts.append(f"\n## {m}\n\n| claim |" + table.split("\n| claim |", 1)[1])
    return "".join(parts)


def verdict_tally(counts: pd.DataFrame) -> dict[str, int]:
    """How many claim-and-task rows of results/compare/claims.csv hold in every model, in some (at least one, not
    all), and in none (keys ``every``, ``some``, ``none``)."""
    words = counts["holds_in"].astype(str)
    return {"every": int((words == "every").sum()), "some": int(words.isin(["most", "some", "one"]).sum()),
            "none": int((words == "none").sum())}


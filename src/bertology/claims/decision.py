"""Each head's share of the decision (docs/reference.md#decision): the per-head statistic built on ALTI-Logit
(Ferrando et al. 2023) and this project's own claim about it.

ALTI-Logit splits the classifier's logit of the predicted class into additive parts (each head of each layer, the
attention biases, the MLPs, the embeddings, the norms' biases of a post-LN model, the final bias);
``decision.parquet`` (written by the norms step) holds one row per (example, layer, part, head) of the norm
analyses' sample: ``logit`` (the part's contribution to the predicted class's logit) and ``contrast`` (to the
predicted minus the runner-up class's). From it:

- :func:`decision_share`: per head (rows ``part == "head"``) and measure (``logit``, ``contrast``), the mean over
  the examples of the head's contribution, its std and n, and a percentile bootstrap interval of the mean over the
  examples (:func:`bertology.stats.across_seeds.multibootstrap` with one seed: every head resampled with the same
  draws of examples, seeded);
- :func:`share_against_cost`: the claim that the heads which write most to the decision are the ones whose
  removal costs most, Spearman's rho over heads of |decision share| with Michel et al.'s head importance or with
  the disabling sweep's cost, ``(tables, boot, *, side, null, ...) -> Result`` as every claim.

A model for which ALTI-Logit is not computed has an empty ``decision.parquet``: the statistic's table is empty and
the claim is `not computed`, each said in one line.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from bertology.claims.bootstrap import (
    Boot,
    Result,
    nan_result,
    spearman_over_units,
    not_computed,
)
from bertology.claims.common import Tables, headline_metric

log = logging.getLogger(__name__)

#: decision.parquet's columns (ALTI-Logit's parts per example, layer, part and head)
DECISION_COLUMNS = ("example", "layer", "part", "head", "logit", "contrast", "predicted", "runner_up")
#: the measures of the statistic, in the table's order: the predicted class's logit, predicted minus runner-up
MEASURES = ("logit", "contrast")
#: decision_share.csv's columns
COLUMNS = ("layer", "head", "measure", "mean", "std", "n", "ci_low", "ci_high")
#: the heads a claim row outlines in the explorer: this many with the largest |decision share|
TOP_HEADS = 5
#: the claim's test
SPEARMAN = "scipy.stats.spearmanr"


def head_values(decision: pd.DataFrame, measure: str) -> tuple[np.ndarray, pd.DataFrame]:
    """The heads' contributions of one measure as examples x heads.

    decision: decision.parquet (:data:`DECISION_COLUMNS`); measure: ``logit`` or ``contrast``. Returns values
    (N, K) float64 over the N examples (sorted) and K heads (sorted by layer, head; NaN where an example lacks
    the head or its value) and the K heads' labels (layer, head)."""
    heads = decision[decision["part"] == "head"]
    twice = heads.duplicated(["example", "layer", "head"])
    if twice.any():
        raise ValueError(f"decision.parquet has {int(twice.sum())} repeated (example, layer, head) rows of part "
                         f"head; each head has one row per example")
    wide = heads.pivot(index="example", columns=["layer", "head"], values=measure).sort_index().sort_index(axis=1)
    labels = pd.DataFrame(list(wide.columns), columns=["layer", "head"]).astype(int)
    return wide.to_numpy(np.float64), labels


def decision_share(decision: pd.DataFrame, *, resamples: int, confidence: float, seed: int) -> pd.DataFrame:
    """decision_share.csv of one model: per head and measure, the mean over the examples of the head's
    contribution to the predicted class's logit (``logit``) or to its margin over the runner-up (``contrast``).

    decision: decision.parquet (:data:`DECISION_COLUMNS`); resamples, confidence, seed: the percentile bootstrap
    over the examples. Returns :data:`COLUMNS`: mean, std (ddof 1) and n over the examples with a finite value;
    ci_low, ci_high the bootstrap interval of the mean (NaN for n < 2). Rows by measure (:data:`MEASURES`),
    then by |mean| descending (the heads that write most first; ties by layer, head); a measure no head has a
    value of (a model with one output has no runner-up) has no rows. No head rows (ALTI-Logit not computed for
    this model): an empty table, said in one log line."""
    from bertology.stats.across_seeds import multibootstrap

    missing = [c for c in DECISION_COLUMNS if c not in decision.columns]
    if missing:
        raise ValueError(f"decision.parquet lacks the columns {', '.join(missing)}; it has "
                         f"{', '.join(map(str, decision.columns))}")
    if not (decision["part"] == "head").any():
        log.info("decision share not computed: decision.parquet has no head rows (ALTI-Logit is not computed for "
                 "this model)")
        return pd.DataFrame(columns=list(COLUMNS))
    parts = []
    for measure in MEASURES:
        values, labels = head_values(decision, measure)                          # (N, K)
        finite = np.isfinite(values)
        n = finite.sum(axis=0)
        if not n.any():
            continue
        mean, low, high = multibootstrap(values[None], resamples=resamples, seed=seed, confidence=confidence)
        with np.errstate(invalid="ignore", divide="ignore"):
            dev = np.where(finite, values - mean, 0.0)
            std = np.where(n > 1, np.sqrt((dev * dev).sum(axis=0) / np.maximum(n - 1, 1)), np.nan)
        part = labels.assign(measure=measure, mean=mean, std=std, n=n,
                             ci_low=np.where(n > 1, low, np.nan), ci_high=np.where(n > 1, high, np.nan))
        order = np.lexsort((part["head"], part["layer"], -np.abs(part["mean"].to_numpy(float))))
        parts.append(part.iloc[order])
    if not parts:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(parts, ignore_index=True).reindex(columns=list(COLUMNS))


def _cost(tables, against: str, column: str, task: str) -> pd.Series:
    """The cost of removing each head, indexed by (layer, head): Michel et al.'s importance (importance.csv
    `column`) or the disabling sweep's drop of the task's headline metric (heads.csv: minus ``delta``)."""
    if against == "importance":
        imp = tables["importance"]
        return imp.set_index(["layer", "head"])[column].astype(float)
    if against == "disabling":
        heads = tables["heads"]
        if heads.empty:
            return pd.Series(dtype=float)
        heads = heads[heads["metric"] == headline_metric(heads, task)]
        return -heads.set_index(["layer", "head"])["delta"].astype(float)
    raise ValueError(f"against must be importance or disabling, got {against!r}")


def share_against_cost(tables: Tables, boot: Boot, *, side: str, null: float, against: str, task: str,
                       measure: str = "logit", column: str = "raw") -> Result:
    """This project's claim: Spearman's rho over heads between the absolute decision share (decision_share.csv
    ``mean`` of `measure`, absolute: a head that pushes against the decision moves it as much as one that pushes
    for it, and both removal costs are blind to that sign) and the cost of removing the head (`against`:
    ``importance``, importance.csv `column`, raw E|dL/dxi| before the per-layer normalisation, or ``disabling``,
    the sweep's drop of the headline metric); holds above `null` (0); unit: heads (with seeds, the
    Multi-Bootstrap); test: scipy.stats.spearmanr, one-sided. An empty decision share (ALTI-Logit not computed
    for this model) is `not computed`."""
    units = []
    for t in tables:
        d = t["decision"]
        d = d[d["measure"] == measure]
        if d.empty:
            return not_computed(SPEARMAN, f"decision_share.csv has no {measure} rows: ALTI-Logit is not computed "
                                          f"for this model")
        share = d.set_index(["layer", "head"])["mean"].astype(float).abs()
        cost = _cost(t, against, column, task)
        both = pd.concat({"share": share, "cost": cost}, axis=1, join="inner").sort_index()
        if both.empty:
            return nan_result(SPEARMAN, 0, f"no head has both a decision share and a cost ({against})")
        units.append(both)
    first = units[0]
    top = first["share"].sort_values(ascending=False, kind="stable").head(TOP_HEADS).index
    heads = tuple(sorted((int(l), int(h)) for l, h in top))
    return spearman_over_units(units, "share", "cost", boot, side=side, heads=heads)

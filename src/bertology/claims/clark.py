"""Clark et al. 2019 (What does BERT look at?): the claims, pure functions of features.csv, entropy.csv and the
heads-as-parsers tables (see docs/reference.md#claims). Every function: ``(tables, boot, *, side, null) ->
Result``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.claims.common import (
    FINAL,
    INITIAL,
    MIDDLE,
    Tables,
    group_difference,
    heads_of,
    layer_group,
)
from bertology.claims.bootstrap import scipy_stats as st
from bertology.claims.bootstrap import Boot, Result, nan_result, safe_p, side_alternative


def sep_middle(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """3: the attention [SEP] receives (features.csv, feature ``sep``), mean over the heads of the middle third of
    the layers minus the mean over the other heads; unit: heads (stratified); test: scipy.stats.mannwhitneyu."""
    units = []
    for t in tables:
        f = t["features"]
        f = f[f["feature"] == "sep"].sort_values(["layer", "head"])
        units.append(pd.DataFrame({"sep": f["mean"].astype(float).to_numpy(),
                                   "group": layer_group(f["layer"]).to_numpy()}))
    f0 = tables[0]["features"]
    f0 = f0[f0["feature"] == "sep"]
    return group_difference(units, "sep", "group", {MIDDLE}, {INITIAL, FINAL}, boot, side=side,
                            heads=heads_of(f0, layer_group(f0["layer"]) == MIDDLE))


def broad_lower(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """3.3: per head, its mean attention entropy relative to uniform attention (entropy.csv ``all`` / ``uniform``,
    1 = uniform); effect = its mean over the heads of the first third of the layers minus its mean over the
    other heads; unit: heads (stratified); test: scipy.stats.mannwhitneyu."""
    units = []
    for t in tables:
        w = t["entropy"].pivot_table(index=["layer", "head"], columns="feature", values="mean").sort_index()
        if not {"all", "uniform"} <= set(w.columns):
            return nan_result("scipy.stats.mannwhitneyu", 0, "entropy.csv lacks all or uniform")
        w = w.reset_index()
        units.append(pd.DataFrame({"rel": (w["all"] / w["uniform"]).astype(float),
                                   "group": layer_group(w["layer"]).to_numpy()}))
    e0 = tables[0]["entropy"]
    return group_difference(units, "rel", "group", {INITIAL}, {MIDDLE, FINAL}, boot, side=side,
                            heads=heads_of(e0, layer_group(e0["layer"]) == INITIAL))


#: a relation's best head is judged on at least this many arcs
MIN_ARCS = 20

#: the labels a UD relation has in the parses a run may hold: spaCy's English pipelines label UD's `obj` with
#: ClearNLP's `dobj` (docs/reference.md: "UD obj counts as dobj")
RELATION_LABELS = {"obj": ("obj", "dobj")}


def parser_beats_baseline(tables: Tables, boot: Boot, *, side: str, null: float, relation: str) -> Result:
    """4.2: the best head's accuracy for `relation` (either direction; gold CoNLL-U trees where the run has them,
    syntax/*.csv, else the task's spaCy parses, parser.csv) minus the relation's fixed-offset baseline accuracy.
    Interval: percentile bootstrap over the relation's arcs, i.e. binomial resampling of the best head's
    correct arcs (the baseline held fixed); test: scipy.stats.binomtest of its correct arcs against the baseline
    accuracy. UD subtypes (``nsubj:pass``) count as their own relation; `obj` is also spaCy English's `dobj`
    (:data:`RELATION_LABELS`). With several seeds: each seed's best
    head, their arcs pooled."""
    best = []
    for t in tables:
        p = t["parser"]
        rows = p[p["relation"].isin(RELATION_LABELS.get(relation, (relation,)))]
        sub = rows[rows["n"] >= MIN_ARCS]
        if sub.empty:  # n: the arcs there are (none: the claim is not computed)
            return nan_result("scipy.stats.binomtest", int(rows["n"].max()) if len(rows) else 0,
                              f"fewer than {MIN_ARCS} {relation} arcs")
        best.append(sub.loc[sub["accuracy"].idxmax()])
    n = int(sum(int(b["n"]) for b in best))
    k = round(sum(float(b["accuracy"]) * int(b["n"]) for b in best))
    base = float(np.average([float(b["baseline_accuracy"]) for b in best], weights=[int(b["n"]) for b in best]))
    effect = float(np.mean([float(b["accuracy"]) - float(b["baseline_accuracy"]) for b in best]))
    rng = np.random.default_rng(boot.seed)
    draws = rng.binomial(n, k / n, size=boot.resamples) / n - base
    tail = (1.0 - boot.confidence) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    p = safe_p(lambda: st.binomtest(k, n, min(max(base, 0.0), 1.0), alternative=side_alternative(side)).pvalue)
    b0 = best[0]
    return Result(effect, float(low), float(high), "scipy.stats.binomtest", p, n,
                  ((int(b0["layer"]), int(b0["head"])),))

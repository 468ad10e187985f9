"""Kovaleva et al. 2019 (Revealing the Dark Secrets of BERT): the claims, each a pure function of the tables
the run writes (see docs/reference.md#claims for the paper's sentences).

Every function: ``(tables, boot, *, side, null) -> Result``; tables: one mapping per fine-tuning seed of table
name -> DataFrame (the names the claim's registry entry declares).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.claims.common import (
    Tables,
    group_difference,
    headline_metric,
    heads_of,
    mean_above,
)
from bertology.claims.bootstrap import scipy_stats as st
from bertology.claims.bootstrap import (
    MIN_UNITS,
    Boot,
    batched_spearman,
    Result,
    bootstrap,
    nan_result,
    not_computed,
    safe_p,
    seed_bootstrap,
    side_alternative,
)


def patterns_repeat(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """4.1: per head, the share of its maps outside ``heterogeneous`` (1 - patterns.csv fraction of class
    heterogeneous); effect = the mean over heads; unit: heads; test: scipy.stats.wilcoxon against `null`."""
    units = []
    for t in tables:
        p = t["patterns"]
        p = p[(p["layer"] >= 0) & (p["head"] >= 0)]  # the overall row (layer, head = -1) is no head
        het = p[p["class"] == "heterogeneous"].sort_values(["layer", "head"])
        units.append(pd.DataFrame({"repeat": 1.0 - het["fraction"].to_numpy(float)}))
    heads = heads_of(tables[0]["patterns"])
    return mean_above(units, "repeat", boot, side=side, null=null, heads=heads)


def table1_gain(tables: Tables, boot: Boot, *, side: str, null: float, task: str, baseline: str) -> Result:
    """Table 1: the task's headline metric (its first) of ``finetuned`` minus that of `baseline` (``pretrained`` |
    ``random-finetuned``), exactly table1.csv's ``value`` difference (the means over seeds).

    Interval and test over the validation examples, from each seed's score records' per-example predictions
    (scores/{task}/{variant}{seedtag}.json, ``predictions``): the paired percentile bootstrap of the mean over seeds
    of the metric difference, recomputed on every resample (two or more seeds: the Multi-Bootstrap over seeds and
    examples; :func:`bertology.claims.paired.paired_interval`), and scipy.stats.permutation_test of that difference
    with the two models' predictions swapped within each example
    (:func:`~bertology.claims.paired.paired_permutation_p`);
    n = the examples. Score records without per-example predictions give a test over seeds instead, with a note
    to re-run the score jobs: a bootstrap of the mean of the per-seed differences over seeds (none with fewer than
    3 seeds) and scipy.stats.ttest_1samp of them.
    """
    from bertology.claims import paired

    t1 = tables[0]["table1"]
    metric = headline_metric(t1, task)
    sub = t1[(t1["task"] == task) & (t1["metric"] == metric)].set_index("variant")["value"]
    if "finetuned" not in sub or baseline not in sub:
        return nan_result(paired.TEST, 0, f"table1.csv lacks finetuned or {baseline} for {task}")
    effect = float(sub["finetuned"] - sub[baseline])
    scores = [(t.get("score_finetuned"), t.get(f"score_{baseline}")) for t in tables]
    examples = paired.paired_examples(scores)
    if isinstance(examples, str):
        return _table1_over_seeds(effect, scores, metric, boot, side=side, null=null, why=examples,
                                  n=int(t1[(t1["task"] == task) & (t1["variant"] == "finetuned")
                                           & (t1["metric"] == metric)]["n"].iloc[0]))
    labels, fine, base = examples
    n = labels.shape[0]
    low, high = paired.paired_interval(metric, labels, fine, base, boot)
    p = safe_p(lambda: paired.paired_permutation_p(metric, labels, fine, base, boot, side=side)) \
        if n >= MIN_UNITS else np.nan
    notes = [f"fewer than {MIN_UNITS} validation examples: no interval"] if n < MIN_UNITS else []
    return Result(effect, low, high, paired.TEST, p, n, (), "; ".join(notes + unseen_note(scores)))


def unseen_note(scores: list) -> list[str]:
    """The ledger's note on a Table 1 claim whose validation split holds classes its training split never has
    (a declared task's ``unseen_labels: allow``; the score records' ``unseen_labels``): [] when there are none.
    scores: per seed (fine-tuned record, baseline record), each a one-row frame or None."""
    classes: list[str] = []
    for pair in scores:
        for rec in pair:
            if rec is None or "unseen_labels" not in rec:
                continue
            value = rec["unseen_labels"].iloc[0]
            for c in value if isinstance(value, (list, tuple, np.ndarray)) else []:
                if str(c) not in classes:
                    classes.append(str(c))
    if not classes:
        return []
    return [f"validation label(s) {', '.join(map(repr, classes))} never occur in training (unseen_labels: allow): "
            f"the classifier was never trained on them, and the metric counts them"]


def _table1_over_seeds(effect: float, scores: list, metric: str, boot: Boot, *, side: str, null: float, why: str,
                       n: int) -> Result:
    """Table 1 from score records without per-example predictions: the interval bootstraps the per-seed differences
    of the metric over seeds (none with fewer than 3), test scipy.stats.ttest_1samp of them; the note says why and
    to re-run the score jobs."""
    diffs = [float(fine[f"metrics.{metric}"].iloc[0]) - float(base[f"metrics.{metric}"].iloc[0])
             for fine, base in scores if fine is not None and base is not None]
    enough = len(diffs) >= MIN_UNITS
    low, high = seed_bootstrap(diffs, boot) if enough else (np.nan, np.nan)
    p = safe_p(lambda: st.ttest_1samp(diffs, null, alternative=side_alternative(side)).pvalue) if enough else np.nan
    note = (f"{why}: re-run the score jobs (snakemake --forcerun score) for an interval over the examples; "
            + ("this one is over the seeds" if enough else f"fewer than {MIN_UNITS} seeds: no interval"))
    return Result(effect, low, high, "scipy.stats.ttest_1samp", p, n, (), note)


def cosine_last_layers(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """4.3: the mean of cosine.csv's ``mean`` over the heads of the last two layers minus its mean over the heads
    of the other layers (holds below zero); unit: heads (stratified); test: scipy.stats.mannwhitneyu."""
    units = []
    for t in tables:
        c = t["cosine"].sort_values(["layer", "head"])
        last = int(c["layer"].max())
        units.append(pd.DataFrame({"cos": c["mean"].to_numpy(float),
                                   "g": (c["layer"] >= last - 1).astype(int).to_numpy()}))
    c0 = tables[0]["cosine"]
    heads = heads_of(c0, c0["layer"] >= int(c0["layer"].max()) - 1)
    return group_difference(units, "cos", "g", {1}, {0}, boot, side=side, heads=heads)


#: the note of a claim about [CLS] on a model whose tokenizer has none (a decoder: GPT-2, Llama, ...)
NO_CLS = "needs a [CLS] token, which this model's tokenizer lacks (a decoder): features.csv has no cls value"


def has_cls(features: pd.DataFrame) -> bool:
    """Whether features.csv holds a value for [CLS]: some ``cls`` row with a mean (none on a model whose tokenizer
    has no [CLS] token, where no example contains the feature)."""
    return bool(features.loc[features["feature"] == "cls", "mean"].notna().any())


def _wide(t: pd.DataFrame, column: str = "mean") -> pd.DataFrame:
    return t.pivot_table(index=["layer", "head"], columns="feature", values=column).sort_index()


def special_features(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """4.4: per head, the larger of the attention [CLS] and [SEP] receive (features.csv) minus the largest any
    linguistic feature receives (noun, verb, pronoun, subject, object, negation); effect = mean over heads;
    unit: heads; test: scipy.stats.wilcoxon. `not computed` on a model without [CLS] (:data:`NO_CLS`)."""
    from bertology.kovaleva.features import WORD_FEATURES

    if not has_cls(tables[0]["features"]):
        return not_computed("scipy.stats.wilcoxon", NO_CLS)
    units = []
    for t in tables:
        w = _wide(t["features"])
        words = [f for f in WORD_FEATURES if f in w.columns]
        if not {"cls", "sep"} <= set(w.columns) or not words:
            return nan_result("scipy.stats.wilcoxon", 0, "features.csv lacks cls, sep or a word feature")
        units.append(pd.DataFrame({"d": (w[["cls", "sep"]].max(axis=1) - w[words].max(axis=1)).to_numpy(float)}))
    return mean_above(units, "d", boot, side=side, null=null, heads=heads_of(tables[0]["features"]))


def cls_early_sep_late(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """4.4: Spearman's rho, over heads, between the layer and the attention to [SEP] minus that to [CLS]
    (features.csv): positive when earlier layers attend to [CLS] and later ones to [SEP]; unit: heads;
    test: scipy.stats.spearmanr. `not computed` on a model without [CLS] (:data:`NO_CLS`)."""
    if not has_cls(tables[0]["features"]):
        return not_computed("scipy.stats.spearmanr", NO_CLS)
    units = []
    for t in tables:
        w = _wide(t["features"]).reset_index()
        if not {"cls", "sep"} <= set(w.columns):
            return nan_result("scipy.stats.spearmanr", 0, "features.csv lacks cls or sep")
        units.append(pd.DataFrame({"layer": w["layer"].astype(float), "d": (w["sep"] - w["cls"]).astype(float)}))

    def rho(t: pd.DataFrame) -> float:
        if t["layer"].nunique() < 2 or t["d"].nunique() < 2:
            return float("nan")
        return float(st.spearmanr(t["layer"], t["d"]).statistic)

    whole = not any(u.isna().any().any() for u in units)  # NaN rows: spearmanr's own NaN handling, one at a time
    est, low, high, n = bootstrap(units, rho, boot, batched=batched_spearman("layer", "d") if whole else None)
    pooled = pd.concat(units, ignore_index=True)
    p = safe_p(lambda: st.spearmanr(pooled["layer"], pooled["d"], alternative=side_alternative(side)).pvalue)
    return Result(est, low, high, "scipy.stats.spearmanr", p, n, heads_of(tables[0]["features"]))


def cls_to_sep(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """4.5: per head of the last layer, the [CLS] row's attention to [SEP] minus its largest attention to any
    other token type (cls.csv); effect = mean over the last layer's heads; unit: heads; test:
    scipy.stats.wilcoxon."""
    units = []
    for t in tables:
        w = _wide(t["cls"])
        if "sep" not in w.columns:
            return nan_result("scipy.stats.wilcoxon", 0, "cls.csv lacks sep")
        others = [c for c in w.columns if c != "sep"]
        units.append(pd.DataFrame({"d": (w["sep"] - w[others].max(axis=1)).to_numpy(float)}))
    return mean_above(units, "d", boot, side=side, null=null, heads=heads_of(tables[0]["cls"]))


def disabling_gain(tables: Tables, boot: Boot, *, side: str, null: float, table: str, task: str) -> Result:
    """4.6: the largest gain in the headline metric from disabling one head (table ``heads``) or one layer
    (``layers``): effect = its ``delta``; interval = its paired-bootstrap ``ci_low``, ``ci_high`` (the sweep's);
    test: the sweep's named test, p = its ``p_adj`` (the Benjamini-Hochberg correction over heads or layers the
    sweep applies) made one-sided: halved when the delta lies on the paper's side, 1 - half otherwise. With several seeds: the mean over seeds of the per-seed best delta, interval by bootstrap
    over seeds."""
    best = []
    for t in tables:
        d = t[table]
        if d.empty:
            return nan_result("sweep", 0, "the disabling sweep has no row")
        d = d[d["metric"] == headline_metric(d, task)]
        best.append(d.loc[d["delta"].idxmax()])
    b0 = best[0]
    test = f"{b0['test']} (the sweep's, Benjamini-Hochberg p_adj, one-sided)"

    def one_sided(b) -> float:  # the sweep's p is two-sided: halved on the paper's side, 1 - half on the other
        p, up = float(b["p_adj"]), float(b["delta"]) > 0
        return p / 2 if up == (side == ">") else 1 - p / 2
    if "head" in b0:
        heads = ((int(b0["layer"]), int(b0["head"])),)
    else:  # a layer: all its heads (from the single-head table where the claim reads it)
        h = tables[0].get("heads")
        heads = () if h is None else heads_of(h, h["layer"] == int(b0["layer"]))
    if len(best) == 1:
        return Result(float(b0["delta"]), float(b0["ci_low"]), float(b0["ci_high"]), test, one_sided(b0),
                      int(b0["n"]), heads)
    deltas = [float(b["delta"]) for b in best]
    low, high = seed_bootstrap(deltas, boot)  # NaN with fewer than 3 seeds
    return Result(float(np.mean(deltas)), low, high, test, float(np.nanmax([one_sided(b) for b in best])),
                  int(b0["n"]), heads)

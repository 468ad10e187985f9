"""Beyond attention weights: Kobayashi et al. 2020 (value norms), Kobayashi et al. 2021 (mixing with the residual)
and Abnar & Zuidema 2020 (rollout and flow): the claims, pure functions of norms.csv, mixing.csv and
faithfulness.csv (see docs/reference.md#claims). Every function: ``(tables, boot, *, side, null) -> Result``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.claims.common import Tables, heads_of, mean_above
from bertology.claims.bootstrap import (
    Boot,
    Result,
    nan_result,
)


def specials_norm(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """Kobayashi 2020: per head of norms.csv, the categories ``cls`` and ``sep`` summed, ``weight_share`` minus
    ``norm_share``; effect = the mean over heads (holds above zero); unit: heads; test: scipy.stats.wilcoxon."""
    units = []
    for t in tables:
        n = t["norms"]
        n = n[n["category"].isin(["cls", "sep"]) & n["head"].notna()]
        w = n.pivot_table(index=["layer", "head"], columns="measure", values="mean", aggfunc="sum").sort_index()
        if not {"weight_share", "norm_share"} <= set(w.columns):
            return nan_result("scipy.stats.wilcoxon", 0, "norms.csv lacks weight_share or norm_share")
        units.append(pd.DataFrame({"d": (w["weight_share"] - w["norm_share"]).to_numpy(float)}))
    return mean_above(units, "d", boot, side=side, null=null, heads=heads_of(tables[0]["norms"].dropna(subset=["head"])))


def mixing_residual(tables: Tables, boot: Boot, *, side: str, null: float, measure: str = "attnres_n") -> Result:
    """Kobayashi 2021: the context-mixing ratio with the residual (mixing.csv, `measure`: attnres_n, attention +
    residual by norms), mean over layers; holds below `null` (one half: each token keeps most of itself); unit:
    layers; test: scipy.stats.ttest_1samp against one half."""
    units = []
    for t in tables:
        m = t["mixing"]
        m = m[m["measure"] == measure].sort_values("layer")
        if m.empty:
            return nan_result("scipy.stats.ttest_1samp", 0, f"mixing.csv lacks measure {measure}")
        units.append(pd.DataFrame({"ratio": m["mean"].to_numpy(float)}))
    return mean_above(units, "ratio", boot, side=side, null=null, test="ttest_1samp")


def view_beats_raw(tables: Tables, boot: Boot, *, side: str, null: float, view: str, baseline: str = "raw",
                   importance: str = "ablation") -> Result:
    """Abnar & Zuidema: faithfulness.csv's ``mean`` for `view` minus that for `baseline` (raw), importance
    `importance` (ablation); holds above zero. Interval: percentile bootstrap over examples of the paired
    per-example Spearman differences (faithfulness_examples.csv ``rho``); test: scipy.stats.wilcoxon of those
    differences."""
    effects, units = [], []
    for t in tables:
        f = t["faithfulness"]
        f = f[f["importance"] == importance].set_index("view")["mean"]
        if view not in f or baseline not in f:
            return nan_result("scipy.stats.wilcoxon", 0, f"faithfulness.csv lacks view {view} or {baseline}")
        effects.append(float(f[view] - f[baseline]))
        e = t["faithfulness_examples"]
        e = e[e["importance"] == importance].pivot_table(index="example_idx", columns="view", values="rho")
        units.append(pd.DataFrame({"d": (e[view] - e[baseline]).to_numpy(float)}))
    res = mean_above(units, "d", boot, side=side, null=null)
    return Result(float(np.mean(effects)), res.ci_low, res.ci_high, res.test, res.p, res.n, ())


def newer_beat_rollout(tables: Tables, boot: Boot, *, side: str, null: float, importance: str = "ablation") -> Result:
    """Ferrando et al. 2022 (ALTI), Modarressi et al. 2022/2023 (GlobEnc, DecompX), Mohebbi et al. 2023 (Value
    Zeroing): per example of faithfulness_examples.csv, the mean over the newer views defined on it of their
    Spearman rho with `importance` (ablation) minus rollout's
    (:func:`bertology.norms.ranking.newer_minus_rollout_values`); effect = the mean over examples (pooled over
    seeds), holds above zero; interval: percentile bootstrap over examples; test: scipy.stats.wilcoxon."""
    from bertology.norms.ranking import newer_minus_rollout_values

    units = []
    for t in tables:
        d = newer_minus_rollout_values(t["faithfulness_examples"], importance)
        if d.empty:
            return nan_result("scipy.stats.wilcoxon", 0, "faithfulness_examples.csv lacks rollout or every newer "
                              "view (analysis.mixing_views.examples: 0, or a layer layout none of them follows)")
        units.append(pd.DataFrame({"d": d.to_numpy(float)}))
    return mean_above(units, "d", boot, side=side, null=null)

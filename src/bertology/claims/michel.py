"""Michel et al. 2019 (Are sixteen heads really better than one?): the claims, pure functions of pruning.csv
(see docs/reference.md#claims). Every function: ``(tables, boot, *, side, null) -> Result``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.claims.common import Tables, mean_above
from bertology.claims.bootstrap import scipy_stats as st
from bertology.claims.bootstrap import (
    MIN_UNITS,
    Boot,
    Result,
    nan_result,
    safe_p,
    seed_bootstrap,
    side_alternative,
)


def _curves(pruning: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The headline metric's curve pruned by importance and the mean of the random orders, per fraction."""
    t = pruning[pruning["metric"] == pruning["metric"].iloc[0]]
    imp = t[t["order"] == "importance"].groupby("fraction")["value"].mean()
    rnd = t[t["order"] == "random"].groupby("fraction")["value"].mean()
    return imp, rnd


def importance_order(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """Per fraction of heads pruned strictly between 0 and 1, the headline metric pruned by importance minus the
    mean of the random orders (pruning.csv); effect = the mean over fractions; unit: fractions; test:
    scipy.stats.wilcoxon."""
    units = []
    for t in tables:
        p = t["pruning"]
        if p.empty:
            return nan_result("scipy.stats.wilcoxon", 0, "pruning.csv is empty")
        imp, rnd = _curves(p)
        both = imp.index.intersection(rnd.index)
        both = both[(both > 0) & (both < 1)]
        units.append(pd.DataFrame({"d": (imp[both] - rnd[both]).to_numpy(float)}))
    return mean_above(units, "d", boot, side=side, null=null)


#: "within one point": the metric (a fraction) at most this far below the intact model's
ONE_POINT = 0.01

#: what would give michel_prunable_share an interval (its ledger row's note and rests_on)
NO_INTERVAL = (f"one pruning curve per seed, fewer than {MIN_UNITS} seeds: an interval needs {MIN_UNITS} or more "
               "train.seeds (a bootstrap over seeds); a bootstrap over examples would need each pruning step's "
               "per-example predictions, which pruning.csv does not keep (only each step's metric)")


def prunable_share(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """The largest fraction of heads pruned by importance (pruning.csv) up to which every step keeps the headline
    metric within one point (0.01) of the intact model (fraction 0); effect = its mean over seeds; unit: seeds
    (a pruning curve has no per-example values): interval by bootstrap over seeds, test scipy.stats.ttest_1samp
    of the per-seed shares; one seed gives no interval."""
    shares = []
    for t in tables:
        p = t["pruning"]
        if p.empty:
            return nan_result("scipy.stats.ttest_1samp", 0, "pruning.csv is empty")
        imp, _ = _curves(p)
        if 0.0 not in imp.index:
            return nan_result("scipy.stats.ttest_1samp", 0, "pruning.csv lacks the intact model (fraction 0)")
        ok = (imp >= imp[0.0] - ONE_POINT).sort_index()
        share = 0.0
        for fraction, keep in ok.items():
            if not keep:
                break
            share = float(fraction)
        shares.append(share)
    low, high = seed_bootstrap(shares, boot) if len(shares) >= MIN_UNITS else (np.nan, np.nan)
    p = safe_p(lambda: st.ttest_1samp(shares, null, alternative=side_alternative(side)).pvalue) \
        if len(shares) >= MIN_UNITS else np.nan
    return Result(float(np.mean(shares)), low, high, "scipy.stats.ttest_1samp", p, len(shares), (),
                  "" if len(shares) >= MIN_UNITS else NO_INTERVAL)


"""Helpers the claim functions share: unit tables from per-head tables, layer groups, the one-sample tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bertology.claims.bootstrap import scipy_stats as st
from bertology.claims.bootstrap import (
    Boot,
    batched_group_difference,
    batched_mean,
    Result,
    bootstrap,
    nan_result,
    safe_p,
    side_alternative,
)

#: one mapping per fine-tuning seed (one only for a claim about the pretrained model): table name -> table
Tables = Sequence[Mapping[str, pd.DataFrame]]
#: layer groups of a claim about "the first / middle / last layers" (bertology.sieve.summary.layer_groups)
INITIAL, MIDDLE, FINAL = 0, 1, 2


def layer_group(layers: pd.Series, n_layers: int | None = None) -> pd.Series:
    """Layer (0-based) -> 0 initial, 1 middle, 2 final: three consecutive groups as equal as possible
    (numpy.array_split, as the sieve summary's layer groups)."""
    from bertology.sieve.summary import LAYER_GROUPS, layer_groups

    n = int(layers.max()) + 1 if n_layers is None else n_layers
    code = {g: i for i, g in enumerate(LAYER_GROUPS)}
    return layers.astype(int).map({l: code[g] for l, g in layer_groups(n).items()})


def headline_metric(t: pd.DataFrame, task: str | None = None) -> str:
    """The task's headline metric: its first metric (bertology.pipeline.tasks; a declared task's when this process knows it),
    else the first metric of the task's rows in the table (table1.csv lists a task's metrics in its order), else the
    table's first."""
    from bertology.pipeline.tasks import UnknownTaskError, get_task

    if task is not None:
        try:
            return get_task(task).metrics[0]
        except UnknownTaskError:
            pass
        if "task" in t.columns and (t["task"] == task).any():
            return str(t.loc[t["task"] == task, "metric"].iloc[0])
    return str(t["metric"].iloc[0])


def heads_of(frame: pd.DataFrame, mask=None) -> tuple[tuple[int, int], ...]:
    sub = frame if mask is None else frame[mask]
    return tuple(sorted({(int(l), int(h)) for l, h in zip(sub["layer"], sub["head"])
                         if pd.notna(l) and pd.notna(h) and l >= 0 and h >= 0}))


def mean_above(units: Sequence[pd.DataFrame], column: str, boot: Boot, *, side: str, null: float,
               test: str = "wilcoxon", heads: tuple = ()) -> Result:
    """The mean of `column` over the units (pooled over seeds) with its bootstrap interval, and a one-sided test
    of its location against `null` on the paper's side: ``scipy.stats.wilcoxon`` (signed-rank of column - null)
    or ``scipy.stats.ttest_1samp`` on the pooled values."""
    est, low, high, n = bootstrap(units, lambda t: float(np.nanmean(t[column].to_numpy(float)))
                                  if len(t) else float("nan"), boot, batched=batched_mean(column))
    values = pd.concat(list(units), ignore_index=True)[column].to_numpy(float)
    values = values[np.isfinite(values)]
    alt = side_alternative(side)
    if test == "wilcoxon":
        p = safe_p(lambda: st.wilcoxon(values - null, alternative=alt).pvalue) if values.size >= MIN_TEST else np.nan
        name = "scipy.stats.wilcoxon"
    else:
        p = safe_p(lambda: st.ttest_1samp(values, null, alternative=alt).pvalue) if values.size >= MIN_TEST else np.nan
        name = "scipy.stats.ttest_1samp"
    return Result(est, low, high, name, p, n, heads)


#: a test needs at least this many values
MIN_TEST = 3


def group_difference(units: Sequence[pd.DataFrame], column: str, group: str, a, b, boot: Boot, *, side: str,
                     heads: tuple = ()) -> Result:
    """mean(`column` | `group` in a) - mean(`column` | `group` in b) over the units (pooled over seeds), a
    stratified bootstrap interval (both groups resampled within themselves) and ``scipy.stats.mannwhitneyu``
    of the two groups, one-sided on the paper's side. a, b: sets of group codes."""
    a, b = set(a), set(b)
    keep = [u[u[group].isin(a | b)].assign(_g=lambda t: t[group].isin(a).astype(int)) for u in units]

    def stat(t: pd.DataFrame) -> float:
        g = t["_g"].to_numpy(int)
        x = t[column].to_numpy(float)
        if not (g == 1).any() or not (g == 0).any():
            return float("nan")
        return float(np.nanmean(x[g == 1]) - np.nanmean(x[g == 0]))

    if keep[0].empty or keep[0]["_g"].nunique() < 2:
        return nan_result("scipy.stats.mannwhitneyu", len(keep[0]), "a layer group has no head", heads)
    est, low, high, n = bootstrap([k[[column, "_g"]] for k in keep], stat, boot, strata="_g",
                                  batched=batched_group_difference(column, "_g"))
    pooled = pd.concat(keep, ignore_index=True)
    x, y = (pooled.loc[pooled["_g"] == 1, column].dropna().to_numpy(float),
            pooled.loc[pooled["_g"] == 0, column].dropna().to_numpy(float))
    p = safe_p(lambda: st.mannwhitneyu(x, y, alternative=side_alternative(side)).pvalue) \
        if min(x.size, y.size) >= 2 else float("nan")
    return Result(est, low, high, "scipy.stats.mannwhitneyu", p, n, heads)


def share_difference(units: Sequence[pd.DataFrame], flag: str, group: str, a, b, boot: Boot, *, side: str,
                     heads: tuple = ()) -> Result:
    """share of `flag` among units with `group` in a minus that among units with `group` in b, a stratified
    bootstrap interval, and ``scipy.stats.fisher_exact`` of the 2 x 2 table (pooled over seeds), one-sided."""
    res = group_difference(units, flag, group, a, b, boot, side=side, heads=heads)
    pooled = pd.concat(list(units), ignore_index=True)
    pooled = pooled[pooled[group].isin(set(a) | set(b))]
    ina = pooled[group].isin(set(a))
    f = pooled[flag].astype(bool)
    table = [[int((ina & f).sum()), int((ina & ~f).sum())], [int((~ina & f).sum()), int((~ina & ~f).sum())]]
    p = safe_p(lambda: st.fisher_exact(table, alternative=side_alternative(side)).pvalue) if len(pooled) else np.nan
    return Result(res.effect, res.ci_low, res.ci_high, "scipy.stats.fisher_exact", p, res.n, heads, res.note)

"""Statistics of a disabling sweep: tables of deltas with paired bootstrap intervals and paired tests.

Kovaleva et al. (section 4.6) report single numbers. Here every delta (configuration minus baseline,
measured on the *same* examples) gets

- a percentile interval from a **paired bootstrap**: example indices are resampled with replacement and
  the *same* indices are used for the baseline and every configuration; the task's metric is recomputed
  on each resample (F1, MCC and correlations are not means over examples, so they cannot be averaged);
- a two-sided **p-value of "no change"**: for accuracy the exact McNemar test (a binomial test on the
  discordant examples, scipy.stats.binomtest); for the other metrics a paired approximate randomisation
  test (swap the baseline's and the configuration's prediction of each example with probability 1/2,
  p = (1 + #{|delta*| >= |delta|}) / (R + 1), Noreen 1989);
- Benjamini-Hochberg adjustment across the heads (or the layers) of a sweep (:func:`bertology.stats.moments.adjust_p`).

:func:`sweep_tables` turns the sweep's logits into heads.csv / layers.csv / summary.csv rows (columns in
:data:`COLUMN_DOCS`) and the summary's counts: the expected delta of disabling a random head (mean over
heads, with its paired-bootstrap interval), the best and worst head and layer, and every gain (delta > 0)
that stays significant after Benjamini-Hochberg.

Glossary: E examples, C configurations, B bootstrap resamples (or randomisation rounds), K logits per
example. Predictions are class ids (classification) or scores (STS-B regression).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bertology.models.metrics import batched_metric, predictions_from_logits
from bertology.stats.moments import adjust_p
from bertology.pipeline.tasks import get_task

PAIRED_TESTS = {"accuracy": "mcnemar_exact"}
DEFAULT_TEST = "randomization"
LEVEL = 0.95  # the confidence level of the bootstrap intervals


def bootstrap_indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(B, n) example indices drawn with replacement, seeded; shared by baseline and configurations."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def paired_bootstrap_deltas(name: str, labels: np.ndarray, base: np.ndarray, preds: np.ndarray,
                            indices: np.ndarray) -> np.ndarray:
    """Bootstrap distribution of metric(configuration) - metric(baseline) on the same resampled examples.

    labels, base: (E,); preds: (C, E); indices: (B, E) -> (B, C).
    """
    both = np.vstack([np.asarray(base)[None], np.asarray(preds)])  # (1 + C, E)
    out = np.empty((indices.shape[0], both.shape[0] - 1))
    for b, idx in enumerate(indices):
        m = batched_metric(name, labels[idx], both[:, idx])
        out[b] = m[1:] - m[0]
    return out


def percentile_interval(boot: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """(B, C) bootstrap deltas -> ((C,), (C,)) equal-tailed percentile interval; NaN when B == 0."""
    if boot.shape[0] == 0:
        nan = np.full(boot.shape[1], np.nan)
        return nan, nan.copy()
    alpha = (1.0 - level) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha], axis=0)
    return low, high


def mcnemar_exact(labels: np.ndarray, base: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """Two-sided exact McNemar p per configuration: binomial test of c among b + c discordant examples.

    b = examples the baseline gets right and the configuration wrong, c = the reverse.
    labels, base: (E,); preds: (C, E) -> (C,); p = 1 when nothing changed.
    """
    base_ok = np.asarray(base) == np.asarray(labels)
    cfg_ok = np.asarray(preds) == np.asarray(labels)
    b = (base_ok & ~cfg_ok).sum(axis=1)
    c = (~base_ok & cfg_ok).sum(axis=1)
    return np.array([stats.binomtest(int(ci), int(bi + ci), 0.5).pvalue if bi + ci else 1.0
                     for bi, ci in zip(b, c)])


def randomization_test(name: str, labels: np.ndarray, base: np.ndarray, preds: np.ndarray,
                       n_rounds: int, seed: int) -> np.ndarray:
    """Two-sided paired approximate randomisation test of metric(configuration) == metric(baseline).

    Each round swaps the two predictions of every example with probability 1/2 (the same swaps for all
    configurations, which leaves each configuration's own test exact).
    labels, base: (E,); preds: (C, E) -> (C,) p = (1 + #{|delta*| >= |delta|}) / (R + 1); NaN if R == 0.
    """
    labels, base, preds = np.asarray(labels), np.asarray(base), np.asarray(preds)
    if n_rounds <= 0:
        return np.full(preds.shape[0], np.nan)
    observed = batched_metric(name, labels, preds) - batched_metric(name, labels, base[None])[0]
    rng = np.random.default_rng(seed)
    hits = np.zeros(preds.shape[0])
    tol = 1e-12
    for _ in range(n_rounds):
        swap = rng.random(labels.shape[0]) < 0.5
        cfg_side = np.where(swap, base[None], preds)
        base_side = np.where(swap, preds, base[None])
        delta = batched_metric(name, labels, cfg_side) - batched_metric(name, labels, base_side)
        hits += np.abs(delta) >= np.abs(observed) - tol
    return (hits + 1) / (n_rounds + 1)


def paired_test(name: str, labels: np.ndarray, base: np.ndarray, preds: np.ndarray,
                n_rounds: int, seed: int) -> tuple[np.ndarray, str]:
    """The p-values of "no change" for one metric and the test's name (see the module docstring)."""
    if PAIRED_TESTS.get(name) == "mcnemar_exact":
        return mcnemar_exact(labels, base, preds), "mcnemar_exact"
    return randomization_test(name, labels, base, preds, n_rounds, seed), DEFAULT_TEST


# --------------------------------------------------------------------------------------------------
# The sweep's tables
# --------------------------------------------------------------------------------------------------

TABLE_COLUMNS = ["layer", "head", "metric", "value", "baseline", "delta", "ci_low", "ci_high", "p_value", "p_adj",
                 "significant", "test", "n"]
COLUMN_DOCS = {
    "layer": "0-based layer of the disabled head(s)",
    "head": "0-based head (heads.csv only)",
    "metric": "one of the task's GLUE metrics (docs/reference.md#table1)",
    "value": "the metric with the head/layer disabled (fraction; correlations in [-1, 1])",
    "baseline": "the metric of the intact model on the same examples",
    "delta": "value - baseline",
    "ci_low, ci_high": "equal-tailed 95% paired-bootstrap percentile interval of delta (ablation.bootstrap "
                       "resamples of the examples, the same resamples for baseline and configuration, seed "
                       "ablation.seed; NaN when bootstrap is 0)",
    "p_value": "two-sided p of 'no change': exact McNemar for accuracy, paired approximate randomisation "
               "(ablation.bootstrap rounds) for F1/MCC/correlations",
    "p_adj": "Benjamini-Hochberg adjusted p within the file and metric (72 heads, or 6 layers, for MiniLM)",
    "significant": "p_adj < ablation.alpha",
    "test": "mcnemar_exact | randomization",
    "n": "evaluation examples",
}


@dataclass
class SweepTables:
    heads: pd.DataFrame
    layers: pd.DataFrame
    summary: pd.DataFrame
    summary_info: dict


def sweep_tables(task: str, labels: np.ndarray, logits: np.ndarray, n_layers: int, n_heads: int, *,
                 n_boot: int, seed: int, alpha: float, level: float = LEVEL) -> SweepTables:
    """heads.csv / layers.csv / summary tables from the sweep's logits.

    labels: (E,); logits: (C, E, K) in the order of :func:`sweep_configurations`.
    """
    from bertology.ablation.sweep import sweep_configurations  # torch: not for the figure steps' curve_summary

    spec = get_task(task)
    configs = sweep_configurations(n_layers, n_heads)
    if logits.shape[0] != len(configs):
        raise ValueError(f"{logits.shape[0]} configurations of logits; expected {len(configs)} for "
                         f"{n_layers} layers x {n_heads} heads")
    labels = np.asarray(labels)
    n = len(labels)
    preds = predictions_from_logits(logits, spec.is_regression)               # (C, E)
    values = {metric: batched_metric(metric, labels, preds) for metric in spec.metrics}   # (C,) each
    idx = bootstrap_indices(n, n_boot, seed)
    head_cols = [i for i, c in enumerate(configs[1:]) if c.kind == "head"]
    layer_cols = [i for i, c in enumerate(configs[1:]) if c.kind == "layer"]
    rows_h, rows_l, summary = [], [], []
    info: dict = {"task": task, "n": n, "bootstrap": n_boot, "seed": seed, "alpha": alpha, "level": level,
                  "baseline": {m: float(v[0]) for m, v in values.items()}, "metrics": {}}
    for metric in spec.metrics:
        base = float(values[metric][0])
        value = values[metric][1:]
        delta = value - base
        boot = paired_bootstrap_deltas(metric, labels, preds[0], preds[1:], idx)    # (B, C-1)
        low, high = percentile_interval(boot, level)
        p, test = paired_test(metric, labels, preds[0], preds[1:], n_boot, seed + 1)
        p_adj = np.full_like(p, np.nan)
        for cols in (head_cols, layer_cols):
            p_adj[cols] = adjust_p(p[cols], "fdr_bh")
        for i, cfg in enumerate(configs[1:]):
            row = {"layer": cfg.layer, "head": cfg.head, "metric": metric, "value": value[i], "baseline": base,
                   "delta": delta[i], "ci_low": low[i], "ci_high": high[i], "p_value": p[i], "p_adj": p_adj[i],
                   "significant": bool(p_adj[i] < alpha), "test": test, "n": n}
            (rows_h if cfg.kind == "head" else rows_l).append(row)
        # the expected delta of disabling a random head, with its bootstrap interval
        rand = boot[:, head_cols].mean(axis=1) if n_boot else np.zeros((0,))
        rlow, rhigh = percentile_interval(rand[:, None], level)
        summary.append({"metric": metric, "finding": "random_head", "layer": None, "head": None,
                        "value": float(value[head_cols].mean()), "baseline": base,
                        "delta": float(delta[head_cols].mean()), "ci_low": rlow[0], "ci_high": rhigh[0],
                        "p_value": np.nan, "p_adj": np.nan, "n": n})
        m_info: dict = {"random_head": {"delta": float(delta[head_cols].mean()), "ci_low": float(rlow[0]),
                                        "ci_high": float(rhigh[0])}}
        for kind, cols in (("head", head_cols), ("layer", layer_cols)):
            sub_delta = delta[cols]
            for finding, j in ((f"best_{kind}", int(np.argmax(sub_delta))), (f"worst_{kind}", int(np.argmin(sub_delta)))):
                c = cols[j]
                summary.append({"metric": metric, "finding": finding, "layer": configs[1 + c].layer,
                                "head": configs[1 + c].head, "value": value[c], "baseline": base,
                                "delta": delta[c], "ci_low": low[c], "ci_high": high[c], "p_value": p[c],
                                "p_adj": p_adj[c], "n": n})
            gains = [c for c in cols if delta[c] > 0]
            surviving = [c for c in gains if p_adj[c] < alpha]
            for c in surviving:
                summary.append({"metric": metric, "finding": f"surviving_gain_{kind}", "layer": configs[1 + c].layer,
                                "head": configs[1 + c].head, "value": value[c], "baseline": base,
                                "delta": delta[c], "ci_low": low[c], "ci_high": high[c], "p_value": p[c],
                                "p_adj": p_adj[c], "n": n})
            m_info[f"{kind}s"] = {
                "gains": len(gains), "losses": int(sum(delta[c] < 0 for c in cols)),
                "surviving_gains": [[configs[1 + c].layer, configs[1 + c].head] for c in surviving],
                "surviving_losses": int(sum(delta[c] < 0 and p_adj[c] < alpha for c in cols)),
                "max_gain": float(sub_delta.max()),
            }
        info["metrics"][metric] = m_info
    heads = pd.DataFrame(rows_h, columns=TABLE_COLUMNS).astype({"layer": int, "head": int})
    layers = pd.DataFrame(rows_l, columns=TABLE_COLUMNS).drop(columns="head").astype({"layer": int})
    summ = pd.DataFrame(summary)
    summ.insert(0, "task", task)
    summ["layer"] = summ["layer"].astype("Int64")
    summ["head"] = summ["head"].astype("Int64")
    return SweepTables(heads, layers, summ, info)


def curve_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per metric and fraction: the importance order's value and the random orders' mean, std (ddof 1), min,
    max and count. Columns: metric, fraction, importance, random_mean, random_std, random_min, random_max,
    random_n."""
    imp = table[table["order"] == "importance"].set_index(["metric", "fraction"])["value"].rename("importance")
    rnd = table[table["order"] == "random"].groupby(["metric", "fraction"])["value"]
    out = pd.concat([imp, rnd.mean().rename("random_mean"), rnd.std(ddof=1).rename("random_std"),
                     rnd.min().rename("random_min"), rnd.max().rename("random_max"),
                     rnd.count().rename("random_n")], axis=1)
    return out.reset_index()

"""Uncertainty for the disabling sweep: paired bootstrap intervals, paired tests, FDR, the random head.

Kovaleva et al. (section 4.6) report single numbers. Here every delta (configuration minus baseline,
measured on the *same* examples) gets

- a percentile interval from a **paired bootstrap**: example indices are resampled with replacement and
  the *same* indices are used for the baseline and every configuration; the task's metric is recomputed
  on each resample (F1, MCC and correlations are not means over examples, so they cannot be averaged);
- a two-sided **p-value of "no change"**: for accuracy the exact McNemar test (a binomial test on the
  discordant examples, scipy.stats.binomtest); for the other metrics a paired approximate randomisation
  test (swap the baseline's and the configuration's prediction of each example with probability 1/2,
  p = (1 + #{|delta*| >= |delta|}) / (R + 1), Noreen 1989);
- Benjamini-Hochberg adjustment across a sweep (statsmodels).

Glossary: E examples, C configurations, B bootstrap resamples (or randomisation rounds).
Predictions are class ids (classification) or scores (STS-B regression).
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

PAIRED_TESTS = {"accuracy": "mcnemar_exact"}
DEFAULT_TEST = "randomization"


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(C, E) x (E,) -> (C,) Pearson r per row; 0 where either side is constant (as metrics._corr)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape[-1] < 2:
        return np.zeros(x.shape[0])
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    sx = np.sqrt((xc * xc).sum(axis=1))
    sy = np.sqrt((yc * yc).sum())
    out = np.zeros(x.shape[0])
    ok = (x.std(axis=1) > 0) & (y.std() > 0)
    out[ok] = (xc[ok] @ yc) / (sx[ok] * sy)
    return np.clip(out, -1.0, 1.0)


def _rowwise_mcc(labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """(E,) x (C, E) -> (C,) Matthews correlation (multi-class form of sklearn; 0 when undefined)."""
    classes = np.union1d(np.unique(labels), np.unique(preds))
    s = float(labels.shape[0])
    correct = (preds == labels).sum(axis=1).astype(np.float64)
    t = np.array([(labels == k).sum() for k in classes], dtype=np.float64)            # (K,)
    p = np.stack([(preds == k).sum(axis=1) for k in classes], axis=1).astype(np.float64)  # (C, K)
    cov_ytyp = correct * s - p @ t
    cov_ypyp = s * s - (p * p).sum(axis=1)
    cov_ytyt = s * s - (t * t).sum()
    denom = cov_ytyt * cov_ypyp
    out = np.zeros(preds.shape[0])
    ok = denom > 0
    out[ok] = cov_ytyp[ok] / np.sqrt(denom[ok])
    return out


def batched_metric(name: str, labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """One GLUE metric for many prediction vectors at once.

    labels: (E,); preds: (C, E) -> (C,). Equal to bertology.metrics.compute_metrics row by row
    (accuracy, binary F1 of class 1 with zero_division 0, MCC, Pearson, Spearman with average ranks).
    """
    labels = np.asarray(labels)
    preds = np.asarray(preds)
    if preds.ndim != 2 or preds.shape[1] != labels.shape[0]:
        raise ValueError(f"preds must be (C, E) with E = {labels.shape[0]}, got {preds.shape}")
    if name == "accuracy":
        return (preds == labels).mean(axis=1)
    if name == "f1":
        pos_p, pos_y = preds == 1, labels == 1
        tp = (pos_p & pos_y).sum(axis=1).astype(np.float64)
        fp = (pos_p & ~pos_y).sum(axis=1)
        fn = (~pos_p & pos_y).sum(axis=1)
        denom = 2 * tp + fp + fn
        return np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    if name == "mcc":
        return _rowwise_mcc(labels, preds)
    if name == "pearson":
        return _rowwise_pearson(preds, labels)
    if name == "spearman":
        out = _rowwise_pearson(stats.rankdata(preds, axis=1), stats.rankdata(labels))
        constant = (preds.std(axis=1) == 0) | (labels.std() == 0)
        return np.where(constant, 0.0, out)
    raise ValueError(f"unknown metric {name!r}; known: accuracy, f1, mcc, pearson, spearman")


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


def percentile_interval(boot: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
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


def fdr_bh(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaNs stay NaN)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="fdr_bh")[1]
    return out

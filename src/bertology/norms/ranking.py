"""Which token view is more faithful than which (docs/reference.md#faithfulness): paired differences of the
per-example faithfulness of two views (Spearman's rho with an importance, or AOPC), with a percentile bootstrap
interval over examples, and the effect "the newer decompositions are more faithful than rollout" (Ferrando et al.
2022, Modarressi et al. 2022/2023, Mohebbi et al. 2023 each claim it for their own view).

Input everywhere: the long per-example table of :func:`bertology.norms.analysis.run_faithfulness`
(faithfulness_examples.csv: example_idx, view, importance, rho; for importance ``aopc`` rho holds the AOPC). Larger
is more faithful for every importance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.norms.faithful import RANDOM, VIEWS
from bertology.norms.mixviews import VIEWS as NEWER

PAIR_COLUMNS = ("importance", "view_a", "view_b", "difference", "ci_low", "ci_high", "n", "separated")


def _interval(d: np.ndarray, *, confidence: float, resamples: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of d (scipy.stats.bootstrap; NaN for n < 2 or constant d)."""
    from scipy.stats import bootstrap

    if len(d) < 2 or np.ptp(d) == 0:
        return float("nan"), float("nan")
    ci = bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=resamples, method="percentile",
                   random_state=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


def wide(rhos: pd.DataFrame, importance: str) -> pd.DataFrame:
    """The per-example table of one importance as examples x views (NaN where a view is missing or undefined)."""
    sub = rhos[rhos["importance"] == importance]
    return sub.pivot_table(index="example_idx", columns="view", values="rho", aggfunc="first", dropna=False)


def paired_differences(rhos: pd.DataFrame, *, confidence: float, resamples: int, seed: int) -> pd.DataFrame:
    """Every ordered pair of views a < b (in :data:`VIEWS` order, the random order of AOPC last), per importance:
    mean over the examples where both are defined of (a - b), its percentile bootstrap interval, n, and separated =
    the interval excludes 0 (columns :data:`PAIR_COLUMNS`)."""
    rows = []
    for imp in dict.fromkeys(rhos["importance"]):
        w = wide(rhos, imp)
        views = [v for v in (*VIEWS, RANDOM) if v in w.columns]
        for i, a in enumerate(views):
            for b in views[i + 1:]:
                d = (w[a] - w[b]).to_numpy(float)
                d = d[np.isfinite(d)]
                lo, hi = _interval(d, confidence=confidence, resamples=resamples, seed=seed)
                rows.append({"importance": imp, "view_a": a, "view_b": b,
                             "difference": float(d.mean()) if len(d) else np.nan, "ci_low": lo, "ci_high": hi,
                             "n": len(d), "separated": bool(np.isfinite(lo) and (lo > 0 or hi < 0))})
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def newer_minus_rollout_values(rhos: pd.DataFrame, importance: str = "ablation") -> pd.Series:
    """Per example: the mean over the newer views (ALTI, GlobEnc, DecompX, Value Zeroing) defined on it of their
    faithfulness, minus rollout's (index example_idx; examples lacking rollout or every newer view left out)."""
    w = wide(rhos, importance)
    newer = [v for v in NEWER if v in w.columns]
    if "rollout" not in w.columns or not newer:
        return pd.Series(dtype=float, name="effect")
    eff = w[newer].mean(axis=1, skipna=True) - w["rollout"]
    return eff[np.isfinite(eff.to_numpy(float))].rename("effect")


def newer_minus_rollout(rhos: pd.DataFrame, *, confidence: float, resamples: int, seed: int,
                        importance: str = "ablation") -> dict[str, float]:
    """The effect behind "the newer decompositions are more faithful than rollout": the mean over examples of
    :func:`newer_minus_rollout_values` (> 0: the paper's side), its percentile bootstrap interval over examples and
    n. {effect, ci_low, ci_high, n}; effect NaN when no example has both."""
    d = newer_minus_rollout_values(rhos, importance).to_numpy(float)
    lo, hi = _interval(d, confidence=confidence, resamples=resamples, seed=seed)
    return {"effect": float(d.mean()) if len(d) else float("nan"), "ci_low": lo, "ci_high": hi, "n": len(d)}

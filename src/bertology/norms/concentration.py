"""How concentrated each token view's scores are (docs/reference.md#concentration): per view, over examples, the
share of the score mass on the top token and the normalised entropy of the scores.

For one example and one view with scores s_1..s_n over its n tokens, p_i = |s_i| / sum_j |s_j| (absolute values:
DecompX scores can be negative; GlobEnc and the norm view are not normalised), then

    top1    = max_i p_i                       in [1/n, 1]: 1 when one token carries everything
    entropy = H(p) / ln n = -sum_i p_i ln p_i / ln n   in [0, 1]: 1 for uniform scores, 0 for one token

(scipy.stats.entropy). An example whose scores are all zero, or that has a single token, has no p or no ln n
and is left out (its row counts in neither mean). A table function of the registry
(:class:`bertology.registry.Step` ``function=``): its rule and step are built from the declaration.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the columns of the concentration table
COLUMNS = ("method", "top1_mean", "top1_std", "entropy_mean", "entropy_std", "n")


def example_concentration(scores: np.ndarray) -> tuple[float, float]:
    """(top1, normalised entropy) of one example's scores, shape (n,); NaN, NaN when undefined (n < 2 or all
    zero).

    >>> example_concentration(np.array([1.0, 1.0, 1.0, 1.0]))
    (0.25, 1.0)
    >>> example_concentration(np.array([0.0, -2.0, 0.0]))
    (1.0, 0.0)
    """
    from scipy.stats import entropy  # imported here: the workflow reads the registry entry without scipy

    mass = np.abs(np.asarray(scores, dtype=np.float64))
    total = mass.sum()
    if mass.size < 2 or total == 0:
        return float("nan"), float("nan")
    p = mass / total
    return float(p.max()), float(entropy(p) / np.log(mass.size))


def token_concentration(scores: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The concentration table of one variant's token views.

    scores: token_scores.parquet (example_idx, position, word, method, score), one row per token, view and
    example. Returns ``{"table": frame}`` with :data:`COLUMNS`, one row per view in sorted order; means and std
    (ddof 1) over the examples where both are defined, n of them."""
    rows = []
    for method, part in scores.sort_values(["method", "example_idx", "position"]).groupby("method", sort=True):
        per = np.array([example_concentration(g["score"].to_numpy())
                        for _, g in part.groupby("example_idx", sort=True)], dtype=np.float64).reshape(-1, 2)
        per = per[~np.isnan(per).any(axis=1)]
        n = len(per)
        mean = per.mean(axis=0) if n else np.full(2, np.nan)
        std = per.std(axis=0, ddof=1) if n > 1 else np.full(2, np.nan)
        rows.append((method, mean[0], std[0], mean[1], std[1], n))
    return {"table": pd.DataFrame(rows, columns=list(COLUMNS))}

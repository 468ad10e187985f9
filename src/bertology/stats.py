"""Statistics shared by the analyses (kept to what a well-kept library does not already give)."""

from __future__ import annotations

import numpy as np


def fdr_bh(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (statsmodels ``multipletests(method="fdr_bh")``), same shape.

    NaN p-values (tests that could not be run) stay NaN and do not count among the tests.
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="fdr_bh")[1]
    return out

"""Statistics shared by the analyses (kept to what a well-kept library does not already give): NaN-aware
p-value adjustment (Holm, Benjamini-Hochberg), running moments (mean, std, n) accumulated chunk by chunk, and their
long tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


def adjust_p(p_values: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    """p-values adjusted for multiple tests (statsmodels ``multipletests``, `method` e.g. "holm" or "fdr_bh") over
    the finite entries of `p_values`, same shape.

    NaN p-values (tests that could not be run) stay NaN and do not count among the tests.
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=method)[1]
    return out


# --------------------------------------------------------------------------------------------------
# running moments: mean, std and n of per-cell statistics accumulated chunk by chunk


@dataclass
class Moments:
    """Running sum, sum of squares and count of a per-cell statistic (NaN values are not counted)."""

    total: np.ndarray
    sumsq: np.ndarray
    count: np.ndarray

    @classmethod
    def zeros(cls, shape: tuple[int, ...]) -> "Moments":
        return cls(np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64))

    def add(self, values: np.ndarray) -> None:
        """Add one observation per cell; NaN cells are skipped."""
        ok = np.isfinite(values)
        v = np.where(ok, values, 0.0)
        self.total += v
        self.sumsq += v * v
        self.count += ok

    def add_sums(self, total: np.ndarray, sumsq: np.ndarray, count: np.ndarray) -> None:
        """Add pooled observations given as their per-cell sum, sum of squares and count."""
        self.total += total
        self.sumsq += sumsq
        self.count += count

    def __add__(self, other: "Moments") -> "Moments":
        return Moments(self.total + other.total, self.sumsq + other.sumsq, self.count + other.count)

    def __getitem__(self, index) -> "Moments":
        """The moments of a sub-grid (e.g. ``m[..., f]``: one feature of (L, H, F) moments)."""
        return Moments(self.total[index], self.sumsq[index], self.count[index])

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, std with ddof=1, n); mean NaN where n == 0, std NaN where n < 2."""
        n = self.count
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, self.total / np.maximum(n, 1), np.nan)
            var = (self.sumsq - n * mean * mean) / (n - 1)
            std = np.where(n > 1, np.sqrt(np.clip(var, 0.0, None)), np.nan)
        return mean, std, n


def head_grid(layers: int, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """(layer, head) of every cell of an (L, H) grid, row-major: two (L * H,) int arrays."""
    lay, hd = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    return lay.ravel(), hd.ravel()


def moments_table(m: Moments, **labels: Any) -> pd.DataFrame:
    """(L, H) Moments -> long frame layer, head, [labels...], mean, std, n."""
    mean, std, n = m.finish()
    lay, hd = head_grid(*mean.shape)
    df = pd.DataFrame({"layer": lay, "head": hd})
    for k, v in labels.items():
        df[k] = v
    df["mean"], df["std"], df["n"] = mean.ravel(), std.ravel(), n.ravel()
    return df


def feature_moments_table(m: Moments, names: tuple[str, ...]) -> pd.DataFrame:
    """(L, H, F) Moments with features `names` -> long frame layer, head, feature, mean, std, n."""
    return pd.concat([moments_table(m[..., f], feature=name) for f, name in enumerate(names)], ignore_index=True)

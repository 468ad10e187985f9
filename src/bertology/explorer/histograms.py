"""Histograms of the per-example sieve scores, as the head view draws them: for every (layer, head, role) one
range [0, hi] shared by both variants (so their bars line up) and HIST_BINS equal bins. Pure.

Shapes: N scored examples, L layers, H heads, R sieve roles, B bins.
"""

from __future__ import annotations

import math

import numpy as np

HIST_BINS = 30  # bins of the per-head sieve-score histograms


def nice(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k that is >= x (histogram ranges); 1 for x <= 0 or not finite."""
    if x <= 0 or not math.isfinite(x):
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= x * (1 - 1e-9):
            return float(m * e)
    return float(10 * e)


def shared_ranges(arrays: list[np.ndarray], floor: float) -> np.ndarray:
    """The upper end of each cell's range: (L, H, R), the :func:`nice` value above the largest finite score of
    every array (each (N_i, L, H, R), NaN where there is no score) and above `floor` (0 where a cell has no
    finite score)."""
    both = np.concatenate(arrays, axis=0)
    with np.errstate(all="ignore"):
        top = np.nanmax(np.where(np.isfinite(both), both, -np.inf), axis=0)  # (L, H, R)
    top = np.where(np.isfinite(top), top, 0.0)
    hi = np.maximum(top, floor)
    return np.array([nice(x) for x in hi.ravel()]).reshape(hi.shape)


def bin_counts(a: np.ndarray, hi: np.ndarray, bins: int = HIST_BINS) -> np.ndarray:
    """Counts of the finite scores a (N, L, H, R) in `bins` equal bins of [0, hi] per cell (hi (L, H, R)); scores
    outside the range count in the first or last bin. Returns (L * H * R * bins,) int64, cell-major."""
    cells = int(np.prod(hi.shape))
    idx = np.floor(a / hi[None] * bins)
    ok = np.isfinite(idx)
    idx = np.clip(np.where(ok, idx, 0), 0, bins - 1).astype(np.int64)
    flat = (np.arange(cells).reshape(1, *hi.shape) * bins + idx)[ok]
    return np.bincount(flat, minlength=cells * bins)

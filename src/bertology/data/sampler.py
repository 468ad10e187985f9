"""The project's one sampler (re-exported by :mod:`bertology.data`)."""

from __future__ import annotations

import numpy as np


def sample_positions(n_total: int, k: int, seed: int) -> np.ndarray:
    """The project's one sampler: k distinct positions of range(n_total), drawn with seed, sorted: (min(k, n_total),)
    int64 (empty when k <= 0). Every seeded sample (rows of a split, the explorer's examples, the pattern sheet's
    maps) is drawn here, so the same (n_total, k, seed) always gives the same positions."""
    k = min(int(k), int(n_total))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng(int(seed))
    return np.sort(rng.choice(int(n_total), size=k, replace=False)).astype(np.int64)

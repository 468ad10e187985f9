"""Which examples the page embeds, through the project's one sampler (:func:`bertology.data.sample_positions`).
Pure."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from bertology.data import sample_positions


def pick_examples(example_idx: np.ndarray, preferred: Sequence[Collection[int]], k: int, seed: int) -> np.ndarray:
    """Store positions of the k examples the page embeds. Pure.

    example_idx: (E,) the store's example_idx. The examples whose example_idx is in preferred[0] come first, then
    those in preferred[1], ..., then the rest of the store; a group that does not fit whole is cut to a seeded
    sample of itself (:func:`bertology.data.sample_positions`, `seed`). Returns (min(k, E),) int64 positions,
    group by group, sorted within each group. With no preferred group this is ``sample_positions(E, k, seed)``,
    the page's plain seeded sample."""
    example_idx = np.asarray(example_idx)
    E = len(example_idx)
    k = min(int(k), E)
    taken = np.zeros(E, bool)
    out: list[np.ndarray] = []
    for group in [*preferred, None]:
        left = k - int(taken.sum())
        if left <= 0:
            break
        member = ~taken if group is None else ~taken & np.isin(example_idx, np.fromiter(group, np.int64))
        cand = np.flatnonzero(member)
        if len(cand) > left:
            cand = cand[sample_positions(len(cand), left, seed)]
        taken[cand] = True
        out.append(cand.astype(np.int64))
    return np.concatenate(out) if out else np.zeros(0, np.int64)

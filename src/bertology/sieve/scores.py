"""Sieve bias scores (pure numpy, docs/reference.md#sieve).

beta(t) = n * mean_{s in S(t)} A[t, s] for a query t of a role; an example's score is the mean of beta(t)
over the role's queries (NaN when the example has none). A beta of 1 is what uniform attention gives;
tau = 3 asks for three times the uniform share.
"""

from __future__ import annotations

import numpy as np
from bertology.errors import InputError


def _clean(attention: np.ndarray, length: np.ndarray) -> np.ndarray:
    """float32 copy with the NaN padding set to 0, so that masked products stay finite.

    attention: (E, L, H, Q, K); length: (E,). NaN inside an example's length is a damaged store, never a
    zero: it raises ValueError naming the example.
    """
    a = np.array(attention, dtype=np.float32, copy=True)
    nan = np.isnan(a)
    Q, K = a.shape[-2:]
    n = np.asarray(length, dtype=np.int64)[:, None, None]
    real = (np.arange(Q)[None, :, None] < n) & (np.arange(K)[None, None, :] < n)  # (E, Q, K)
    bad = (nan & real[:, None, None]).any(axis=(1, 2, 3, 4))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise InputError(f"attention of example {e} (of this block) has NaN inside its length {int(n[e, 0, 0])}: "
                         f"the store is damaged; delete it and re-run the extraction")
    np.copyto(a, 0.0, where=nan)          # much faster than np.nan_to_num on large blocks
    return a


def query_weights(sieve: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights that turn one contraction into the example score.

    weights[e, r, t, s] = [s in S_r(t)] / |S_r(t)| / |queries_r(e)| for queries t, 0 elsewhere, so that
    score[e, l, h, r] = n_e * sum_{t, s} A[e, l, h, t, s] * weights[e, r, t, s].
    Returns weights (E, R, Q, K) float32 and the query counts (E, R).
    """
    m = np.asarray(sieve, dtype=np.float32)
    q = np.asarray(queries, dtype=bool)
    size = m.sum(-1)                                                          # (E, R, Q)
    count = q.sum(-1)                                                         # (E, R)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_query = np.where(q, 1.0 / (size * np.maximum(count, 1)[..., None]), 0.0).astype(np.float32)
    return m * per_query[..., None], count


def example_scores(attention: np.ndarray, sieve: np.ndarray, queries: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Per-example sieve scores (E, L, H, R): mean over the role's queries of beta(t); NaN without queries.

    attention: (E, L, H, Q, K); sieve: (E, R, Q, K) bool; queries: (E, R, Q) bool; length: (E,).
    One batched matmul (E, L*H, Q*K) @ (E, Q*K, R): no (E, L, H, R, Q) intermediate.
    """
    a = _clean(attention, length)
    E, L, H, Q, K = a.shape
    weights, count = query_weights(sieve, queries)
    R = weights.shape[1]
    out = np.matmul(a.reshape(E, L * H, Q * K), weights.reshape(E, R, Q * K).transpose(0, 2, 1))
    out = out.astype(np.float64).reshape(E, L, H, R) * np.asarray(length, dtype=np.float64)[:, None, None, None]
    return np.where((count > 0)[:, None, None, :], out, np.nan)

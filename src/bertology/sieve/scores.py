"""Sieve bias scores (pure numpy, docs/reference.md#sieve).

beta(t) = n * mean_{s in S(t)} A[t, s] for a query t of a role; an example's score is the mean of beta(t)
over the role's queries (NaN when the example has none). A beta of 1 is what uniform attention gives;
tau = 3 asks for three times the uniform share.
"""

from __future__ import annotations

import numpy as np
from bertology.pipeline.errors import InputError
from bertology.store import as_float32


def real_block(attention: np.ndarray, length: np.ndarray, rows: np.ndarray | None = None,
               size: int | None = None) -> np.ndarray:
    """float32 copy of the examples `rows` (default all) of a block, each cropped to its own length and padded with
    exact zeros to `size` (default the block's Q): what the sieve's products read.

    attention: (E, L, H, Q, K) (NaN padding, any float dtype); length: (E,). Returns (len(rows), L, H, size, size):
    only each example's real n x n block is read and converted (values past a length are never read), so it does not
    matter what the padding holds; the zeros keep the masked products finite.
    """
    rows = np.arange(attention.shape[0]) if rows is None else np.asarray(rows)
    size = attention.shape[-1] if size is None else int(size)
    out = np.zeros((rows.size,) + attention.shape[1:3] + (size, size), dtype=np.float32)
    for i, e in enumerate(rows):
        n = int(length[e])
        out[i, :, :, :n, :n] = as_float32(attention[e, :, :, :n, :n])
    return out


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

    attention: (E, L, H, Q, K), NaN past each length; sieve: (E, R, Q, K) bool; queries: (E, R, Q) bool;
    length: (E,). A NaN inside an example's length is a damaged store, never a zero: ValueError naming the example.
    """
    return block_scores(real_block(attention, length), sieve, queries, length)


def block_scores(a: np.ndarray, sieve: np.ndarray, queries: np.ndarray, length: np.ndarray) -> np.ndarray:
    """:func:`example_scores` of a block already cropped to lengths (:func:`real_block`): a (E, L, H, Q, K) float32,
    exact zeros past each length. One batched matmul (E, L*H, Q*K) @ (E, Q*K, R): no (E, L, H, R, Q) intermediate.
    """
    E, L, H, Q, K = a.shape
    weights, count = query_weights(sieve, queries)
    R = weights.shape[1]
    out = np.matmul(a.reshape(E, L * H, Q * K), weights.reshape(E, R, Q * K).transpose(0, 2, 1))
    # a NaN anywhere inside a length makes every score of its (layer, head) NaN (NaN * 0 is NaN): one check of
    # the small product instead of a scan of the block
    bad = np.isnan(out).any(axis=(1, 2))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise InputError(f"attention of example {e} (of this block) has NaN inside its length {int(length[e])}: "
                         f"the store is damaged; delete it and re-run the extraction")
    out = out.astype(np.float64).reshape(E, L, H, R) * np.asarray(length, dtype=np.float64)[:, None, None, None]
    return np.where((count > 0)[:, None, None, :], out, np.nan)

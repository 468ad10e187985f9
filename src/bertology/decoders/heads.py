"""Per-head statistics of causal attention maps, as their authors compute them.

Glossary: E examples (sequences), L layers, H heads, T padded length, n real length of one sequence, s the
length of the repeated half of an induction probe. Attention maps are (E, L, H, T, T) arrays, rows = queries,
columns = keys, each real row summing to 1 over keys <= its query (causal); rows and columns at or beyond an
example's length are padding and never read.

Attention sink (Gu et al. 2024, *When Attention Sink Emerges in Language Models*, section 3; their
``eval_sink_open_source.py``)::

    alpha_k^{l,h} = 1 / (n - k) * sum_{t = k}^{n - 1} A^{l,h}[t, k]          (the mean attention key k receives)
    Sink_k^eps    = 100 * mean over (sequence, layer, head) of [alpha_k^{l,h} > eps],   eps = 0.3

computed per sequence (the authors: the first 64 tokens of each natural-text sequence) and averaged over
sequences, layers and heads (:func:`sink_alpha`, :func:`sink_rate`).

Head detection (TransformerLens ``head_detector.detect_head``, its default ``error_measure="mul"``): a 0/1
*detection pattern* P (T x T, lower triangular) says where a head of a kind attends; a head's score on one
sequence is ``sum(A * P) / sum(A)``, the share of its attention on those query-key pairs, and over several
sequences the mean of those scores. The patterns (:func:`previous_token_pattern`,
:func:`duplicate_token_pattern`, :func:`induction_pattern`):

- previous token: P[i, i - 1] = 1;
- duplicate token: P[i, j] = 1 for j < i with token_j == token_i;
- induction: P[i, j] = 1 for 1 <= j <= i with token_{j-1} == token_i and j - 1 != i (the token after an earlier
  occurrence of the current one: the duplicate pattern shifted one column to the right, column 0 emptied).

TransformerLens' induction demo (:func:`induction_stripe_score`) scores sequences of a BOS token and s random
tokens repeated twice (s = 50, 10 sequences) by the mean of the diagonal at offset 1 - s of each map: rows
s - 1 ... 2s, the attention from each token to the one after its earlier occurrence (its first two rows, in the
first half, included as the demo includes them).
"""

from __future__ import annotations

import numpy as np

SINK_EPSILON = 0.3


def _valid(lengths: np.ndarray, t: int) -> np.ndarray:
    """(E, T) bool: True at the real positions of each example."""
    return np.arange(t)[None, :] < np.asarray(lengths)[:, None]


def sink_alpha(attn: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """alpha_k (Gu et al.): the mean attention each key position receives from itself and the queries after it.

    attn: (E, L, H, T, T) causal maps; lengths: (E,) real lengths n. Returns (E, L, H, T) float64, alpha[..., k]
    = sum_{t=k}^{n-1} A[t, k] / (n - k) for k < n, NaN for k >= n.
    """
    attn = np.asarray(attn, dtype=np.float64)
    e, _, _, t, _ = attn.shape
    valid = _valid(lengths, t)                                              # (E, T)
    rows = np.where(valid[:, None, None, :, None], attn, 0.0)               # padded queries read as 0
    received = rows.sum(axis=-2)                                            # (E, L, H, T): sum over queries
    count = (np.asarray(lengths)[:, None] - np.arange(t)[None, :]).astype(np.float64)   # n - k
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = received / count[:, None, None, :]
    return np.where(valid[:, None, None, :], alpha, np.nan)


def sink_rate(alpha_k: np.ndarray, epsilon: float = SINK_EPSILON) -> float:
    """Sink_k^eps in percent: the share of (sequence, layer, head) with alpha_k > epsilon. alpha_k: (E, L, H)."""
    alpha_k = np.asarray(alpha_k, dtype=np.float64)
    return float(100.0 * np.mean(alpha_k > epsilon))


def previous_token_pattern(t: int) -> np.ndarray:
    """(T, T) 0/1: P[i, i - 1] = 1 (TransformerLens' previous-token detection pattern)."""
    return np.eye(t, k=-1)


def duplicate_token_pattern(tokens: np.ndarray) -> np.ndarray:
    """(..., T, T) 0/1 from tokens (..., T): P[i, j] = 1 for j < i with tokens[j] == tokens[i]."""
    tokens = np.asarray(tokens)
    same = tokens[..., :, None] == tokens[..., None, :]
    return np.tril(same, k=-1).astype(np.float64)


def induction_pattern(tokens: np.ndarray) -> np.ndarray:
    """(..., T, T) 0/1 from tokens (..., T): the duplicate pattern shifted one column right, column 0 emptied, lower
    triangular (P[i, j] = 1 for 1 <= j <= i with tokens[j - 1] == tokens[i], j - 1 < i)."""
    dup = duplicate_token_pattern(tokens)
    shifted = np.zeros_like(dup)
    shifted[..., :, 1:] = dup[..., :, :-1]
    return np.tril(shifted)


def detection_scores(attn: np.ndarray, pattern: np.ndarray, lengths: np.ndarray | None = None, *,
                     exclude_bos: bool = False, exclude_current_token: bool = False) -> np.ndarray:
    """TransformerLens' "mul" score of every head on every sequence: sum(A * P) / sum(A) over the real n x n block.

    attn: (E, L, H, T, T); pattern: (E, T, T) or (T, T); lengths: (E,) (None: all T). exclude_bos zeroes the
    attention to key 0 and exclude_current_token the diagonal before both sums, as TransformerLens does.
    Returns (E, L, H) float64; a head's score over the sequences is the mean over E (TransformerLens' list case).
    """
    attn = np.asarray(attn, dtype=np.float64)
    e, _, _, t, _ = attn.shape
    lengths = np.full(e, t) if lengths is None else np.asarray(lengths)
    valid = _valid(lengths, t)
    block = valid[:, :, None] & valid[:, None, :]                           # (E, T, T)
    keep = block.copy()
    if exclude_bos:
        keep[:, :, 0] = False
    if exclude_current_token:
        keep &= ~np.eye(t, dtype=bool)[None]
    a = np.where(keep[:, None, None], attn, 0.0)
    p = np.broadcast_to(np.asarray(pattern, dtype=np.float64), (e, t, t))
    hits = np.einsum("elhqk,eqk->elh", a, p)
    total = a.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return hits / total


def induction_stripe_score(attn: np.ndarray, seq_len: int) -> np.ndarray:
    """TransformerLens' induction demo: the mean over sequences and positions of each map's diagonal at offset
    1 - seq_len. attn: (E, L, H, 2 * seq_len + 1, 2 * seq_len + 1) maps of [BOS, r_1..r_s, r_1..r_s].
    Returns (L, H) float64."""
    attn = np.asarray(attn, dtype=np.float64)
    if attn.shape[-1] != 2 * seq_len + 1:
        raise ValueError(f"maps of {attn.shape[-1]} positions are not a BOS and {seq_len} tokens repeated twice")
    stripe = np.diagonal(attn, offset=1 - seq_len, axis1=-2, axis2=-1)     # (E, L, H, seq_len + 2)
    return stripe.mean(axis=(0, -1))


def repeated_random_tokens(rng: np.random.Generator, vocab_size: int, seq_len: int = 50, batch: int = 10,
                           bos_id: int | None = None) -> np.ndarray:
    """The induction probe: (batch, 2 * seq_len + 1) int64, a BOS token then seq_len tokens drawn uniformly from
    [0, vocab_size) repeated once (TransformerLens' ``generate_repeated_tokens``); without a BOS id, (batch,
    2 * seq_len)."""
    half = rng.integers(0, vocab_size, size=(batch, seq_len), dtype=np.int64)
    parts = [half, half] if bos_id is None else [np.full((batch, 1), bos_id, dtype=np.int64), half, half]
    return np.concatenate(parts, axis=1)

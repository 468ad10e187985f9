"""Kovaleva et al. 4.2: relation-specific heads.

A *link* is a (source word, target word) pair: a dependency arc (dependent -> syntactic head, from the
spaCy annotation) or a FrameNet link (frame-evoking target -> core frame element, the paper's direction;
relations.csv also carries the transpose as ``framenet_fe_target``, see :mod:`.framenet`). The score of
one example and head is the maximum of A[s, t] (s the query) over ALL its links and ALL wordpiece pairs
s in wp(source), t in wp(target) (not ``zip`` of sources and targets, not the first wordpiece only).
Heads whose mean score is above the configured percentile of all heads' means are flagged.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def dependency_links(word: np.ndarray, head: np.ndarray) -> list[tuple[int, int]]:
    """Arcs of one example as (dependent, head) word indices; roots (head == word) are skipped.

    word, head: (W,) int arrays (the words.parquet columns of one example).
    """
    return [(int(w), int(h)) for w, h in zip(np.asarray(word), np.asarray(head)) if int(w) != int(h) and h >= 0]


def link_pair_mask(word_ids: np.ndarray, n: int, links: Iterable[tuple[int, int]]) -> np.ndarray:
    """(n, n) bool: True at (s, t) for every link and every wordpiece pair s in wp(src), t in wp(tgt).

    word_ids: (Q,) word index per position (-1 for specials/padding). Links whose words have no
    wordpiece below n (truncated) contribute nothing. Computed by indexing a word x word link matrix
    with the word of every wordpiece: mask[s, t] = linked[word(s), word(t)].
    """
    links = list(links)
    if not links:
        return np.zeros((n, n), dtype=bool)
    ids = np.asarray(word_ids[:n]).astype(np.int64)
    size = max(int(ids.max(initial=-1)), max(max(s, t) for s, t in links)) + 2
    linked = np.zeros((size, size), dtype=bool)  # the last row/column stands for "no word"
    src = np.array([s for s, _ in links])
    tgt = np.array([t for _, t in links])
    linked[src, tgt] = True
    words = np.where(ids >= 0, ids, size - 1)
    return linked[np.ix_(words, words)]


def span_pair_mask(n: int, pairs: Iterable[tuple[Iterable[int], Iterable[int]]]) -> np.ndarray:
    """(n, n) bool from explicit (source positions, target positions) pairs (FrameNet spans)."""
    mask = np.zeros((n, n), dtype=bool)
    for src, tgt in pairs:
        s = np.array([p for p in src if p < n], dtype=int)
        t = np.array([p for p in tgt if p < n], dtype=int)
        if s.size and t.size:
            mask[np.ix_(s, t)] = True
    return mask


def relation_scores(attn: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Max link attention of one example.

    attn: (L, H, n, n); mask: (n, n) bool. Returns (L, H): max over masked (s, t) of A[l, h, s, t];
    all NaN when the mask is empty (the example has no link).
    """
    if not mask.any():
        return np.full(attn.shape[:2], np.nan)
    return attn[..., mask].max(axis=-1).astype(np.float64)


def flag_heads(means: np.ndarray, percentile: float) -> tuple[np.ndarray, float]:
    """Heads strictly above the `percentile`-th percentile of all heads' means (NaN heads ignored).

    means: (L, H). Returns ((L, H) bool, threshold).
    """
    finite = means[np.isfinite(means)]
    if finite.size == 0:
        return np.zeros(means.shape, bool), float("nan")
    threshold = float(np.percentile(finite, percentile))
    return np.nan_to_num(means, nan=-np.inf) > threshold, threshold

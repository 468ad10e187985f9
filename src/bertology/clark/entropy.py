"""Attention entropy (Clark et al. 2019, section 3.3).

For one head and one query t of an example of real length n (specials included), the entropy of its attention
row is ``H(t) = -sum_s A[t, s] ln A[t, s]`` in nats, with ``0 ln 0 = 0``. The store keeps
float16 attention whose rows sum to 1 only up to rounding, so each row is renormalised (in float64) before
the entropy: the result is the entropy of a distribution, between 0 and ln n.

Features of entropy.csv (per layer and head; mean, std with ddof 1 and n over the pooled observations):

- ``all``: every real query row of every example (n = number of query rows);
- ``uniform``: the entropy of uniform attention over each of the same rows' keys (the reference): ln n for every
  row of an encoder; ln (t + 1) for row t of a decoder's causal map (its keys are 0..t);
- ``cls``: the classified row of every example (n = examples): an encoder's [CLS], a decoder's last real token
  (:attr:`bertology.attention.onepass.Example.classified`);
- ``uniform_cls``: ln n once per example, the reference of that row (a decoder's last row has n keys too).

Glossary: L layers, H heads, n real length of one example.
"""

from __future__ import annotations

import numpy as np

FEATURES: tuple[str, ...] = ("all", "uniform", "cls", "uniform_cls")


def row_entropy(attn: np.ndarray, row_sums: np.ndarray | None = None) -> np.ndarray:
    """Entropy in nats of every attention row.

    attn: (..., n, n) real part of the maps (no NaN), any float dtype; row_sums: (..., n) its rows' float64 sums when
    the caller has them. Returns (..., n) float64: rows renormalised to sum 1 (computed in float32, summed in
    float64), then ``-sum_s p ln p`` (``0 ln 0 = 0``); a row of zeros has entropy 0.
    """
    a = np.asarray(attn, dtype=np.float32)  # float32 is exact for float16 values; entropies to ~1e-6 nats
    if row_sums is None:
        row_sums = a.sum(axis=-1, dtype=np.float64)
    total = row_sums.astype(np.float32)[..., None]
    p = a / total if (total > 0).all() else np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.log(p)
        plogp *= p  # in place: two (..., n, n) temporaries, not four
    np.copyto(plogp, np.float32(0), where=p == 0)  # 0 ln 0 = 0 (the product gave NaN), as scipy.special.entr
    return -plogp.sum(axis=-1, dtype=np.float64)


def uniform_reference(n: int, causal: bool = False) -> tuple[float, float]:
    """(sum, sum of squares) over the n query rows of an example of the uniform rows' entropies: n ln n and
    n (ln n)^2 for full attention; sum_{t=0}^{n-1} ln(t + 1) and its squares for a causal map, whose row t
    spreads over t + 1 keys (row 0 attends only to itself: entropy 0)."""
    if not causal:
        ref = float(np.log(n))
        return n * ref, n * ref * ref
    refs = np.log(np.arange(1, n + 1, dtype=np.float64))
    return float(refs.sum()), float((refs * refs).sum())


def example_entropy(attn: np.ndarray, cls_position: int | None,
                    row_sums: np.ndarray | None = None,
                    causal: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entropy sums one example contributes, per head and feature of :data:`FEATURES`.

    attn: (L, H, n, n) cropped to the real length; cls_position: the classified query ([CLS]; a decoder's last
    token; None: none, its features are not observed); row_sums: (L, H, n) float64 sums of attn's rows when the
    caller has them; causal: a decoder's map (the ``uniform`` reference of row t is ln(t + 1),
    :func:`uniform_reference`). Returns (total, sum of squares, count), each (L, H, F): pooled sums over this
    example's observations (``all``/``uniform``: its n query rows; ``cls``/``uniform_cls``: one row).
    """
    L, H, n, _ = attn.shape
    h = row_entropy(attn, row_sums)  # (L, H, n)
    ref = float(np.log(n))
    total = np.zeros((L, H, len(FEATURES)))
    sumsq = np.zeros_like(total)
    count = np.zeros((L, H, len(FEATURES)), dtype=np.int64)
    total[..., 0], sumsq[..., 0], count[..., 0] = h.sum(-1), (h * h).sum(-1), n
    uniform, uniform_sq = uniform_reference(n, causal)
    total[..., 1], sumsq[..., 1], count[..., 1] = uniform, uniform_sq, n
    if cls_position is not None:
        c = h[..., cls_position]
        total[..., 2], sumsq[..., 2], count[..., 2] = c, c * c, 1
        total[..., 3], sumsq[..., 3], count[..., 3] = ref, ref * ref, 1
    return total, sumsq, count

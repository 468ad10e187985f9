"""Kovaleva et al. 4.3: how much fine-tuning changes each head's attention.

Per example and head, the cosine similarity of the flattened n x n maps of the pretrained and the
fine-tuned model, padding excluded (the maps are cropped to the real length n before flattening, so the
NaN/zero padding of a store never enters the dot product or the norms).
"""

from __future__ import annotations

import numpy as np
from bertology.pipeline.errors import InputError


def crop(attn: np.ndarray, n: int) -> np.ndarray:
    """(..., Q, K) -> (..., n, n): the real-token block of a padded map."""
    return attn[..., :n, :n]


def cosine_per_head(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of two maps per head.

    a, b: (L, H, n, n) (already cropped; no NaN). Returns (L, H) float64 in [-1, 1] (in [0, 1] for
    attention); NaN for a head whose map is all zeros in either model.
    """
    if a.shape != b.shape:
        raise InputError(f"cosine needs maps of the same shape, got {a.shape} and {b.shape}: the pretrained and "
                         f"finetuned stores must hold the same examples with the same tokenisation")
    x = np.asarray(a, dtype=np.float32).reshape(a.shape[0], a.shape[1], -1)
    y = np.asarray(b, dtype=np.float32).reshape(b.shape[0], b.shape[1], -1)
    num = (x * y).sum(-1, dtype=np.float64)
    den = np.sqrt((x * x).sum(-1, dtype=np.float64) * (y * y).sum(-1, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)

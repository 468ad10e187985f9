"""Attention to the previous and to the next token (Clark et al. 2019, section 3.1), per head: the kernel of the one
read of a store and its table previous.csv (docs/reference.md#previous).

For one example of real length n (specials included, the store's ``length``) and one head's map A (n, n), cropped
to the real block: previous = the mean over the query rows i = 1 .. n-1 of A[i, i-1]; next = the mean over the
query rows i = 0 .. n-2 of A[i, i+1]. Per head, their mean, std (ddof 1) and n over the examples (of length n >= 2).

Glossary: L layers, H heads, n real length of one example.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertology.attention.onepass import Example, ExampleKernel, Job, Outputs, StoreInfo
from bertology.stats.moments import Moments, feature_moments_table

#: the features of previous.csv, in the order of the last axis of :func:`offset_attention`
FEATURES = ("previous", "next")


def offset_attention(attention: np.ndarray) -> np.ndarray:
    """attention (L, H, n, n) of one example cropped to its real length n >= 2 -> (L, H, 2) float64: the mean over
    i = 1 .. n-1 of A[i, i-1] (previous) and over i = 0 .. n-2 of A[i, i+1] (next), per head. The float16 values of
    a store are summed in float64 (exact), then divided by the n - 1 rows."""
    n = attention.shape[-1]
    if n < 2:
        raise ValueError(f"an example of length {n} has no previous or next token")
    previous = np.diagonal(attention, offset=-1, axis1=-2, axis2=-1)  # (L, H, n-1): A[i+1, i]
    following = np.diagonal(attention, offset=1, axis1=-2, axis2=-1)  # (L, H, n-1): A[i, i+1]
    sums = np.stack([previous.sum(-1, dtype=np.float64), following.sum(-1, dtype=np.float64)], axis=-1)
    return sums / (n - 1)


@dataclass(frozen=True)
class PreviousKernel(ExampleKernel):
    """Per head, the attention to the previous and to the next token, example by example (examples of length
    n >= 2: the one-pass reduction skips shorter ones)."""

    name: str = "previous"

    def empty(self, info: StoreInfo) -> Moments:
        return Moments.zeros((info.layers, info.heads, len(FEATURES)))

    def add(self, part: Moments, ex: Example, words) -> None:
        # ex.attention (L, H, n, n) float32, cropped to the store's real length ex.n
        part.add(offset_attention(ex.attention))

    def outputs(self, result: Moments, job: Job) -> Outputs:
        """previous.csv (layer, head, feature, mean, std, n) and ``previous_by_layer.{previous,next}`` (the mean
        over a layer's heads, step = layer)."""
        table = feature_moments_table(result, FEATURES)
        metrics: list[tuple[dict[str, float], int | None]] = []
        for feature in FEATURES:
            for layer, value in table[table["feature"] == feature].groupby("layer")["mean"].mean().items():
                if np.isfinite(value):
                    metrics.append(({f"previous_by_layer.{feature}": float(value)}, int(layer)))
        return Outputs({"previous": table}, metrics)

"""The checks every read of a store makes (docs/reference.md#store): lengths in 1..max_length, no NaN inside an
example's length, rows that sum to 1 over the real keys, value norms finite inside the length and NaN past it.
Each failure is one :class:`StoreError` naming the store, the chunk (and the example) and the fix.
Imports only bertology.store.schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bertology.store.schema import OPTIONAL_DTYPES, StoreError, refix, row_sum_tolerance


def check_lengths(length: np.ndarray, max_length: int, where: str = "store", example_idx: np.ndarray | None = None,
                  store: str | Path | None = None, first: int = 0) -> None:
    """Every length in 1..max_length, else StoreError naming `where`, the first bad example (numbered from
    `first`) and the fix."""
    length = np.asarray(length, dtype=np.int64)
    bad = np.flatnonzero((length < 1) | (length > int(max_length)))
    if bad.size:
        e = int(bad[0])
        name = f"example {first + e}" + ("" if example_idx is None else f" (example_idx {int(example_idx[e])})")
        fix = refix(where if store is None else store)
        raise StoreError(f"{where}: {name} has length {int(length[e])}, outside 1..{int(max_length)} (a missing or "
                         f"damaged chunk of `length`?); the store is corrupt: {fix}")


def check_block(attention: np.ndarray, length: np.ndarray, attrs: Mapping[str, Any] | None = None,
                where: str = "store", padding: bool = True, example_idx: np.ndarray | None = None,
                store: str | Path | None = None, max_length: int | None = None, first: int = 0) -> None:
    """Check one block: lengths in 1..max_length, no NaN inside each example's length, rows sum to 1 over the real
    keys, and (padding=True) NaN everywhere outside the length.

    attention: (e, L, H, Q, K) float16/32, Q = K >= every length (a block cropped to its longest example, or padded
    to max_length); length: (e,); max_length: the store's (default Q); example_idx: (e,) to name a bad example by
    its idx; first: the number of the block's first example, to name a bad one. Raises StoreError naming `where`,
    the first bad example and the fix (for `store`, default `where`).
    Only the real n x n blocks are read, once (the padding test, when asked, reads the rest once): the row sums,
    accumulated in float32 straight from the stored dtype (error below 1e-4 for any length up to 512, against a
    tolerance of 1e-3), also find a NaN inside the length (its row's sum is NaN).
    """
    attrs = attrs or {}
    attention = np.asarray(attention)
    Q = attention.shape[-1]
    fix = refix(where if store is None else store)
    check_lengths(length, Q if max_length is None else int(max_length), where, example_idx, store, first)
    for e, n in enumerate(np.asarray(length, dtype=np.int64)):
        name = f"example {first + e}" + ("" if example_idx is None else f" (example_idx {int(example_idx[e])})")
        if n > Q:
            raise StoreError(f"{where}: {name} has length {n} but the block read has {Q} positions; {fix}")
        a = attention[e]
        sums = a[..., :n, :n].sum(axis=-1, dtype=np.float32)  # a NaN inside the length makes its row's sum NaN
        if padding and not np.isnan(sums).any() and not (np.isnan(a[..., n:, :]).all()
                                                         and np.isnan(a[..., :n, n:]).all()):
            raise StoreError(f"{where}: {name} has values outside its length {n} (expected NaN); "
                             f"{fix}")
        check_rows(sums, int(n), attrs, where, name, fix)


def check_rows(sums: np.ndarray, n: int, attrs: Mapping[str, Any], where: str, name: str, fix: str) -> None:
    """One example's attention rows, from their sums over its n real keys: no NaN inside the length (a NaN makes its
    row's sum NaN) and every sum 1 within :func:`row_sum_tolerance`; else StoreError naming `where`, the example
    (`name`) and the fix. sums: (L, H, n), float32 or float64."""
    if np.isnan(sums).any():
        raise StoreError(f"{where}: {name} has NaN inside its length {n} (a missing or damaged chunk?); the "
                         f"store is corrupt or unfinished: {fix}")
    err = float(np.abs(sums - 1.0).max())
    tol = row_sum_tolerance(attrs, n)
    if err > tol:
        raise StoreError(f"{where}: attention rows of {name} sum to 1 +- {err:.4f} over its {n} real keys "
                         f"(tolerance {tol:.4f}): not post-softmax attention; {fix}")


def check_value_norm(norms: np.ndarray, length: np.ndarray, *, where: str, store: str | Path) -> None:
    """norms (e, L, H, Q) float32 of examples with real lengths (e,): finite and >= 0 at keys < length, NaN at the
    others; else StoreError naming the example."""
    if norms.dtype != np.dtype(OPTIONAL_DTYPES["value_norm"]):
        raise StoreError(f"{where}: `value_norm` is {norms.dtype}, not {OPTIONAL_DTYPES['value_norm']}; "
                         f"{refix(store)}")
    real = np.arange(norms.shape[-1])[None, :] < np.asarray(length, np.int64)[:, None]        # (e, Q)
    real = np.broadcast_to(real[:, None, None, :], norms.shape)
    bad_in = ~(np.isfinite(norms) & (norms >= 0)) & real
    bad_out = ~np.isnan(norms) & ~real
    for bad, what in ((bad_in, "a value norm that is not finite and >= 0 inside"), (bad_out, "a value outside")):
        if bad.any():
            e = int(np.argwhere(bad)[0][0])
            raise StoreError(f"{where}: example {e} has {what} its length {int(length[e])} in `value_norm`: the "
                             f"store is corrupt; {refix(store)}")

"""Reading examples of a store as numpy arrays, checked: what the analyses' chunks read (:func:`read_chunk`).

In :data:`LAYOUT` a reduction reads each example's inner chunk alone, cropped to its own length, so memory and
copies scale with the real tokens; stores of :data:`LEGACY_LAYOUT` are read through zarr, a whole chunk
decompressed. Imports bertology.store.schema, .files, .shards and .checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bertology.store.checks import check_block, check_lengths
from bertology.store.files import array_of, file_examples, file_key, file_kind, has_file, open_group
from bertology.store.schema import LAYOUT, StoreError, refix
from bertology.store.shards import read_shard_cropped, shard_format


def read_chunk(path: str, start: int, stop: int, variables: Sequence[str], check: bool = True,
               crop: bool = False) -> dict[str, np.ndarray]:
    """Examples [start, stop) of `variables` of a store (path or fsspec URL) as numpy arrays, checked.

    A missing or undecodable chunk, shard or inner chunk raises StoreError naming the store, the variable, the
    chunk (file) and the fix. check: when `attention` is read, every example's length is in 1..max_length, its
    n x n block holds no NaN and its rows sum to 1 (:func:`check_block`, padding not rescanned), so no analysis
    ever computes on a hole. crop: `attention` comes cropped to the block's longest example m,
    (e, L, H, m, m), NaN past each example's length; in :data:`LAYOUT` each example is read and decompressed
    alone up to its own length (one inner chunk each), so memory and copies scale with the real tokens.
    """
    group = open_group(path)
    want_att = "attention" in variables
    names = list(dict.fromkeys(list(variables) + (["length", "example_idx"] if check and want_att else [])
                               + (["length"] if crop and want_att else [])))
    names.sort(key=lambda v: v == "attention")  # length first: a cropped read needs it
    out: dict[str, np.ndarray] = {}
    for name in names:
        arr = array_of(group, name, path)
        k = start // file_examples(arr)
        key = file_key(arr, k)
        where = f"{path}: `{name}` {file_kind(arr)} {k} (examples {start}..{stop - 1}, file {name}/{key})"
        if not has_file(arr, key):
            raise StoreError(f"{where} is missing: the store is incomplete or damaged; {refix(path)}")
        if name == "attention" and crop:
            Q = int(arr.shape[-1])
            if check:
                check_lengths(out["length"], Q, where, out.get("example_idx"), path)
            out[name] = read_cropped(arr, start, np.clip(out["length"], 0, Q).astype(np.int64), where, path)
            continue
        try:
            out[name] = np.asarray(arr[start:stop])
        except Exception as err:  # noqa: BLE001 - a corrupt chunk, whatever the codec says
            raise StoreError(f"{where} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                             f"{refix(path)}") from None
    if check and want_att:
        att = group["attention"]
        k = start // file_examples(att)
        check_block(out["attention"], out["length"], dict(group.attrs), padding=False,
                    where=f"{path} `attention` {file_kind(att)} {k} (examples {start}..{stop - 1})",
                    example_idx=out["example_idx"], store=path, max_length=int(att.shape[-1]))
    return {name: out[name] for name in variables}


def read_cropped(arr, start: int, length: np.ndarray, where: str, path: str | Path) -> np.ndarray:
    """attention of examples start.. (one per length), cropped to the longest: (e, L, H, m, m), NaN padded.

    :data:`LAYOUT`: one read of each shard file concerned, each example's inner chunk decoded alone and cropped
    (:func:`read_shard_cropped`); :data:`LEGACY_LAYOUT` (unsharded): one read of the block [start:stop, ..., :m, :m]
    (the whole chunk is decompressed). Any other sharding was not written by bertology: StoreError, re-extract.
    """
    fmt = shard_format(arr)
    e = len(length)
    m = int(length.max()) if e else 0
    if fmt is None:
        if getattr(arr, "shards", None):
            raise StoreError(f"{where}: `attention` is sharded with other codecs than the {LAYOUT} layout's: not a "
                             f"store written by bertology; {refix(path)}")
        try:
            return np.asarray(arr[start:start + e, ..., :m, :m])
        except Exception as err:  # noqa: BLE001
            raise StoreError(f"{where} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                             f"{refix(path)}") from None
    first = fmt.per_shard - start % fmt.per_shard  # examples in the first shard file
    bounds = [0] + list(range(first, e, fmt.per_shard)) + [e]
    if len(bounds) == 2:  # one shard file: what the analyses' chunks read
        return read_shard_cropped(arr, fmt, start, length, where, path)
    out = np.full((e,) + fmt.inner[:-2] + (m, m), np.nan, dtype=fmt.dtype)
    for a, b in zip(bounds[:-1], bounds[1:]):
        piece = read_shard_cropped(arr, fmt, start + a, length[a:b], where, path)
        out[a:b, ..., :piece.shape[-2], :piece.shape[-1]] = piece
    return out

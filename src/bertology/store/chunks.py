"""Reading examples of a store as numpy arrays, checked: what the analyses' chunks read (:func:`read_chunk`).

In :data:`LAYOUT` a reduction reads each example's inner chunk alone, cropped to its own length, so memory and
copies scale with the real tokens; stores of :data:`LEGACY_LAYOUT` are read through zarr, a whole chunk
decompressed. Imports bertology.store.schema, .files, .shards and .checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from bertology.store.checks import check_block, check_lengths, check_rows
from bertology.store.files import array_of, file_examples, file_key, file_kind, has_file, open_group
from bertology.store.schema import LAYOUT, StoreError, damaged_bytes, refix
from bertology.store.shards import as_float32, read_shard_cropped, read_shard_examples, shard_format


@dataclass(frozen=True)
class Crops:
    """A chunk's attention as its examples' real blocks, nothing padded (``read_chunk(..., crop="examples")``).

    maps[i]: (L, H, n_i, n_i) float32, example i cropped to its own length n_i; row_sums[i]: (L, H, n_i) float64,
    each row of maps[i] summed over its n_i keys (exact: float16 values, and their sums, are float64 numbers).
    """

    maps: list[np.ndarray]
    row_sums: list[np.ndarray]
    dtype: str = "float16"  # the stored dtype

    def padded(self) -> np.ndarray:
        """The block (e, L, H, m, m) of ``crop=True``, in the stored dtype: m the longest length, NaN past each
        example's length."""
        m = max((a.shape[-1] for a in self.maps), default=0)
        lead = self.maps[0].shape[:2] if self.maps else (0, 0)
        out = np.full((len(self.maps),) + lead + (m, m), np.nan, dtype=self.dtype)
        for i, a in enumerate(self.maps):
            out[i, ..., :a.shape[-1], :a.shape[-1]] = a
        return out


def read_chunk(path: str, start: int, stop: int, variables: Sequence[str], check: bool = True,
               crop: bool | Literal["examples"] = False) -> dict[str, np.ndarray]:
    """Examples [start, stop) of `variables` of a store (path or fsspec URL) as numpy arrays, checked.

    A missing or undecodable chunk, shard or inner chunk raises StoreError naming the store, the variable, the
    chunk (file) and the fix. check: when `attention` is read, every example's length is in 1..max_length, its
    n x n block holds no NaN and its rows sum to 1 (:func:`check_block`, padding not rescanned), so no analysis
    ever computes on a hole. crop: `attention` comes cropped to the block's longest example m,
    (e, L, H, m, m), NaN past each example's length; in :data:`LAYOUT` each example is read and decompressed
    alone up to its own length (one inner chunk each), so memory and copies scale with the real tokens.
    crop="examples": `attention` comes as :class:`Crops`, each example alone at its own length, as float32, with
    its rows' float64 sums; the check is made on those sums (the same test, summed once for the check and the
    analyses).
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
            length = np.clip(out["length"], 0, Q).astype(np.int64)
            if crop == "examples":
                out[name] = read_examples(arr, start, length, where, path)
            else:
                out[name] = read_cropped(arr, start, length, where, path)
            continue
        try:
            out[name] = np.asarray(arr[start:stop])
        except (ValueError, RuntimeError) as err:
            if not damaged_bytes(err):  # not a codec's error: a bug keeps its type and traceback
                raise
            raise StoreError(f"{where} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                             f"{refix(path)}") from None
    if check and want_att:
        att = group["attention"]
        k = start // file_examples(att)
        where = f"{path} `attention` {file_kind(att)} {k} (examples {start}..{stop - 1})"
        if crop == "examples":
            attrs, fix = dict(group.attrs), refix(path)
            for e, (sums, idx) in enumerate(zip(out["attention"].row_sums, out["example_idx"])):
                check_rows(sums, sums.shape[-1], attrs, where, f"example {e} (example_idx {int(idx)})", fix)
        else:
            check_block(out["attention"], out["length"], dict(group.attrs), padding=False, where=where,
                        example_idx=out["example_idx"], store=path, max_length=int(att.shape[-1]))
    return {name: out[name] for name in variables}


def read_examples(arr, start: int, length: np.ndarray, where: str, path: str | Path) -> Crops:
    """attention of examples start.. (one per length), each cropped to its own length, as :class:`Crops`.

    :data:`LAYOUT`: each example's inner chunk decoded alone and converted once (:func:`read_shard_examples`);
    :data:`LEGACY_LAYOUT`: cut from the block :func:`read_cropped` reads."""
    fmt = shard_format(arr)
    if fmt is None:
        block = read_cropped(arr, start, length, where, path)
        maps = [as_float32(block[i, ..., :n, :n]) for i, n in enumerate(length.tolist())]
    else:
        maps = [a for lo, hi in _shard_pieces(fmt.per_shard, start, len(length))
                for a in read_shard_examples(arr, fmt, start + lo, length[lo:hi], where, path)]
    return Crops(maps, [a.sum(axis=-1, dtype=np.float64) for a in maps], str(arr.dtype))


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
        except (ValueError, RuntimeError) as err:
            if not damaged_bytes(err):
                raise
            raise StoreError(f"{where} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                             f"{refix(path)}") from None
    pieces = _shard_pieces(fmt.per_shard, start, e)
    if len(pieces) == 1:  # one shard file: what the analyses' chunks read
        return read_shard_cropped(arr, fmt, start, length, where, path)
    out = np.full((e,) + fmt.inner[:-2] + (m, m), np.nan, dtype=fmt.dtype)
    for a, b in pieces:
        piece = read_shard_cropped(arr, fmt, start + a, length[a:b], where, path)
        out[a:b, ..., :piece.shape[-2], :piece.shape[-1]] = piece
    return out


def _shard_pieces(per_shard: int, start: int, e: int) -> list[tuple[int, int]]:
    """The examples start .. start + e - 1, split at shard files of `per_shard` examples: [(lo, hi)) offsets from
    start, one pair per shard file, in order."""
    first = per_shard - start % per_shard  # examples in the first shard file
    bounds = [0] + list(range(first, e, per_shard)) + [e]
    return list(zip(bounds[:-1], bounds[1:]))

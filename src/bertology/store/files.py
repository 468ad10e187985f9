"""The files of a store: opening it, naming each variable's chunk (or shard) files, finding the missing ones.

Every per-example variable is one file per example chunk along ``example`` (`attention` in :data:`LAYOUT`: one
shard file per chunk); the extraction writes every one, all-fill chunks included, so a missing file is damage.
Imports only bertology.store.schema.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bertology.store.schema import StoreError, damaged_metadata, refix


def open_group(path: str | Path):
    """The store's zarr Group, read-only; StoreError with the fix if it is not a readable Zarr store;
    also (naming the cache entry and its eviction) if its metadata does not match the digest written with it
    (:func:`bertology.pipeline.outputcache.verify_digest`)."""
    import zarr

    from bertology.pipeline.outputcache import CacheEntryError, verify_digest

    try:
        group = zarr.open_group(str(path), mode="r")
    except (OSError, ValueError, TypeError, KeyError) as err:
        if not damaged_metadata(err):  # not zarr's or json's: a bug keeps its type and traceback
            raise
        raise StoreError(f"{path} is not a readable Zarr store ({type(err).__name__}: {err}); {refix(path)}") from None
    try:
        verify_digest(path, "store")  # its metadata as made (the chunks have their own checksums)
    except CacheEntryError as err:  # a damaged store like any other (the extraction replaces one)
        raise StoreError(str(err)) from None
    return group


def array_of(group, name: str, path: str | Path):
    """Variable `name` of an open store as a zarr Array; StoreError with the fix if it is absent or unreadable."""
    try:
        return group[name]
    except (OSError, ValueError, TypeError, KeyError) as err:
        if not damaged_metadata(err):  # not zarr's or json's: a bug keeps its type and traceback
            raise
        raise StoreError(f"{path} lacks variable `{name}` or its metadata is unreadable ({type(err).__name__}: "
                         f"{err}); {refix(path)}") from None


def file_examples(arr) -> int:
    """Examples per chunk file of an array: its shard (sharded `attention`) or its chunk along `example`."""
    shards = getattr(arr, "shards", None)
    return int((shards or arr.chunks)[0])


def file_key(arr, k: int) -> str:
    """The key (relative to the array) of its chunk or shard file k along `example`."""
    return arr.metadata.encode_chunk_key((k,) + (0,) * (arr.ndim - 1))


def file_kind(arr) -> str:
    """'shard' for a sharded array, 'chunk' otherwise (what the error messages call a file)."""
    return "shard" if getattr(arr, "shards", None) else "chunk"


def describe(name: str, arr, k: int) -> str:
    """'`name` shard k (examples a..b, file name/key)': how every error names file k of variable `name`."""
    size, E = file_examples(arr), int(arr.shape[0])
    return (f"`{name}` {file_kind(arr)} {k} (examples {k * size}..{min((k + 1) * size, E) - 1}, "
            f"file {name}/{file_key(arr, k)})")


def has_file(arr, key: str) -> bool:
    """Whether the array's store holds its chunk (or shard) file `key`."""
    from zarr.core.sync import sync

    return bool(sync((arr.store_path / key).exists()))


def missing_keys(arr, keys: list[str]) -> list[str]:
    """The chunk keys (relative to the array) among `keys` that the array's store lacks: a stat of each file for
    a local store (a tenth of the cost of zarr's async listing), one listing of the array otherwise."""

    from zarr.core.sync import sync
    from zarr.storage import LocalStore

    sp = arr.store_path
    if isinstance(sp.store, LocalStore):
        base = os.path.join(str(sp.store.root), sp.path)
        return [k for k in keys if not os.path.isfile(os.path.join(base, k))]
    prefix = f"{sp.path}/" if sp.path else ""

    async def listing() -> list[str]:
        return [k async for k in sp.store.list_prefix(prefix)]

    have = {k[len(prefix):] for k in sync(listing())}
    return [k for k in keys if k not in have]


def missing_chunks(arrays: Mapping[str, Any], variables: Sequence[str]) -> list[str]:
    """'`variable` chunk k (examples a..b, file ...)' for every example chunk (or shard) file of `variables` the
    store lacks (the extraction writes every one, all-fill chunks included). arrays: the store's arrays by name."""
    out = []
    for name in variables:
        arr = arrays[name]
        size, E = file_examples(arr), arr.shape[0]
        keys = {file_key(arr, k): k for k in range(-(-E // size))}
        for key in missing_keys(arr, list(keys)):
            out.append(describe(name, arr, keys[key]))
    return out

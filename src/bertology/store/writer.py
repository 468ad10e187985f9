"""Writing a store: the empty layout, whole example chunks in order, then complete (docs/reference.md#store).

Lifecycle: :func:`create_store` writes the empty layout to ``{path}.partial`` with ``complete=False``;
:func:`write_chunk` fills whole example chunks (`attention` of :data:`LAYOUT`: one shard file each, written by
bertology.store.shards) and then raises the ``chunks_done`` attribute; a killed run resumes from ``chunks_done``
(:func:`resume_point`); :func:`finalize` sets ``complete=True`` last, consolidates the metadata and renames
``.partial`` to the final path. Imports bertology.store.schema, .codec, .shards.
"""

from __future__ import annotations

import logging
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bertology.store.codec import ATTENTION_CODEC, attention_filters, compressors, metadata_config
from bertology.store.schema import (DIMS, DTYPES, FILL, IDENTITY_ATTRS, LAYOUT, LAYOUT_ATTRS, LAYOUTS, OPTIONAL_DIMS,
                                    OPTIONAL_DTYPES, IncompleteStoreError, attr_differences, jsonable,
                                    store_layout)
from bertology.store.shards import shard_format, write_shard

log = logging.getLogger(__name__)


def create_store(path: str | Path, *, example_idx: np.ndarray, layers: int, heads: int, max_length: int,
                 chunk_size: int, attrs: Mapping[str, Any], layout: str = LAYOUT, value_norms: bool = False):
    """Create an empty store at `path` (overwriting), with example_idx and the coordinates written.

    example_idx: (E,) the sample. attrs: the store's attributes (identity + provenance, with `keepbits`:
    None or the BitRound filter of `attention`); `complete`, `chunks_done`, `n_chunks`, `chunk_size`,
    `codec`, `layout` are set here. layout: :data:`LAYOUT`, or :data:`LEGACY_LAYOUT` (``attention`` chunked
    along ``example`` only: to compare with, in tests and bench/bench_store_layout.py). value_norms: also the optional
    `value_norm` (E, L, H, Q) float32 (attribute ``value_norms``). Returns the zarr Group.
    """
    import zarr

    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    E = int(len(example_idx))
    Q = int(max_length)
    shapes = {"attention": (E, layers, heads, Q, Q), "input_ids": (E, Q), "token_type_ids": (E, Q),
              "segment": (E, Q), "word_ids": (E, Q), "length": (E,), "example_idx": (E,)}
    if value_norms:
        shapes["value_norm"] = (E, layers, heads, Q)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown store layout {layout!r}; one of {LAYOUTS}")
    all_attrs = dict(attrs, complete=False, chunks_done=0, n_chunks=-(-E // chunk_size), chunk_size=int(chunk_size),
                     codec=ATTENTION_CODEC, value_norms=bool(value_norms))
    if layout == LAYOUT:  # stores without the attribute are LEGACY_LAYOUT
        all_attrs["layout"] = layout
    with zarr.config.set(metadata_config(layout)):  # the arrays' zarr.json files
        root = zarr.open_group(str(path), mode="w", zarr_format=3, attributes=jsonable(all_attrs))
        for name, shape in shapes.items():
            chunks = (min(chunk_size, max(E, 1)),) + shape[1:]
            shards = None
            if name == "attention" and layout == LAYOUT:  # a shard file per example chunk, an inner chunk per example
                shards, chunks = chunks, (1,) + shape[1:]
            # write_empty_chunks: skip zarr's scan of every chunk for all-fill values (a third of the write cost)
            filters = attention_filters(attrs.get("keepbits")) if name == "attention" else []
            dtype = DTYPES.get(name) or OPTIONAL_DTYPES[name]
            root.create_array(name, shape=shape, chunks=chunks, shards=shards, dtype=dtype, fill_value=FILL[name],
                              filters=filters, compressors=compressors(name, layout),
                              dimension_names=DIMS.get(name) or OPTIONAL_DIMS[name],
                              config={"write_empty_chunks": True})
        for coord, size in (("layer", layers), ("head", heads)):
            arr = root.create_array(coord, shape=(size,), dtype="int64", dimension_names=(coord,), fill_value=0)
            arr[:] = np.arange(size)
        root["example_idx"][:] = np.asarray(example_idx, dtype=np.int64)
    return root


def write_chunk(root, chunk: int, arrays: Mapping[str, np.ndarray]) -> None:
    """Write one whole example chunk of every per-example variable, then record it in `chunks_done`.

    arrays: attention (e, L, H, Q, Q) float16, input_ids/token_type_ids/segment/word_ids (e, Q), length (e,), and
    value_norm (e, L, H, Q) where the store has it, with e = chunk_size (or the remainder for the last chunk). Chunks are written in order; `chunks_done`
    is raised only after the chunk's data is on disk, so a killed writer never counts a partial chunk.
    """
    size = int(root.attrs["chunk_size"])
    done = int(root.attrs["chunks_done"])
    if chunk != done:
        raise RuntimeError(f"chunk {chunk} written out of order (chunks_done={done})")
    start = chunk * size
    stop = start + len(arrays["length"])
    import zarr

    import asyncio

    from zarr.core.sync import sync

    with zarr.config.set({"array.write_empty_chunks": True}):  # every chunk file exists, even an all-fill one
        optional = [name for name in OPTIONAL_DIMS if name in root]
        rest = []
        for name in ("attention", "input_ids", "token_type_ids", "segment", "word_ids", "length", *optional):
            arr = root[name]
            fmt = shard_format(arr) if name == "attention" else None
            if fmt is not None and start % fmt.per_shard == 0:
                write_shard(arr, start // fmt.per_shard, arrays[name], fmt)
            else:
                rest.append((arr, np.asarray(arrays[name], dtype=arr.dtype)))

        async def write_rest() -> None:  # one event-loop round for all of them: their encodes overlap
            await asyncio.gather(*(arr._async_array.setitem(slice(start, stop), value) for arr, value in rest))

        sync(write_rest())
    root.attrs["chunks_done"] = chunk + 1


def resume_point(path: str | Path, attrs: Mapping[str, Any]):
    """(zarr Group, chunks_done) of a partial store that matches `attrs` (identity + layout), else None.

    A partial store that cannot be opened or was written for other settings is deleted, with a log
    message saying why (the extraction then starts over).
    """
    import zarr

    path = Path(path)
    if not path.exists():
        return None
    try:
        root = zarr.open_group(str(path), mode="r+", zarr_format=3)
        have = dict(root.attrs)
    except Exception as err:  # noqa: BLE001 - any unreadable partial store is started over
        log.warning("partial store %s cannot be opened (%s); starting over", path, err)
        shutil.rmtree(path)
        return None
    keys = [k for k in IDENTITY_ATTRS + LAYOUT_ATTRS if k in attrs]
    diffs = attr_differences(have, {k: attrs[k] for k in keys})
    if diffs:
        what = "; ".join(f"{k}: {h!r} there, {w!r} asked" for k, h, w in diffs)
        log.warning("partial store %s was written for other settings (%s); starting over", path, what)
        shutil.rmtree(path)
        return None
    done = int(have.get("chunks_done", 0))
    log.info("resuming %s from chunk %d of %d", path, done, int(have["n_chunks"]))
    return root, done


def finalize(root, partial: str | Path, final: str | Path) -> Path:
    """Mark the store complete (last attribute written), consolidate its metadata, write its digest
    (:func:`bertology.pipeline.outputcache.record_digest`), move it into place."""
    import zarr

    n = int(root.attrs["n_chunks"])
    if int(root.attrs["chunks_done"]) != n:
        raise IncompleteStoreError(f"{partial}: only {root.attrs['chunks_done']} of {n} chunks written")
    with zarr.config.set(metadata_config(store_layout(root.attrs))), warnings.catch_warnings():
        root.attrs["complete"] = True
        warnings.simplefilter("ignore")  # consolidated metadata is a zarr-python extension of v3; xarray reads it
        zarr.consolidate_metadata(str(partial))
    from bertology.pipeline.outputcache import record_digest

    record_digest(partial, store=True)  # checked by every open (bertology.pipeline.outputcache): the store as it was made
    final = Path(final)
    if final.exists():
        shutil.rmtree(final)
    Path(partial).rename(final)
    return final

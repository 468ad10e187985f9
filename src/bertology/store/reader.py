"""Reading a store as an xarray Dataset, every read checked (:func:`open_store`; docs/reference.md#store).

:func:`open_store` refuses anything without ``complete=True`` or ``n_chunks`` (not written by the extraction), of
a layout it does not read, with attributes other than the expected ones (bertology.store.schema.expected_attrs) or
with a missing chunk or shard file, from the consolidated metadata and a stat of each file; its Dataset reads
lazily without Dask, each example's inner chunk alone, and checks what it reads: a missing or undecodable chunk,
shard or inner chunk (a checksum that does not match), a length outside 1..max_length, NaN inside an example's
length or rows that do not sum to 1 raise StoreError naming the store, the chunk (and the example) and the fix.
Stores of :data:`LEGACY_LAYOUT` (bertology <= 0.1) are read through zarr with the same checks.
Imports bertology.store.schema, .files, .shards and .checks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bertology.pipeline.errors import MissingInputError, snakemake_command
from bertology.store.checks import check_block, check_lengths, check_value_norm
from bertology.store.files import describe, file_examples, file_key, missing_chunks, open_group
from bertology.store.schema import (DIMS, LAYOUT, LAYOUTS, LEGACY_LAYOUT, OPTIONAL_DIMS, IncompleteStoreError,
                                    StoreError, StoreMismatchError, attr_differences, damaged_bytes, damaged_metadata,
                                    partial_path, refix, store_layout)
from bertology.store.shards import ABSENT, crc32c, decode_inner, shard_format, shard_index

log = logging.getLogger(__name__)


class _Reader:
    """What the variables of one :func:`open_store` Dataset read through: every read is checked.

    `attention` of :data:`LAYOUT`: each example's inner chunk is read alone from its shard file (the shard's
    index once, its CRC32C checked), its checksum checked and decoded; then its length is checked against
    1..max_length and the n x n blocks of the maps read for NaN and row sums (:func:`check_block`; an example
    whose maps have all been checked is remembered and not checked again).
    :data:`LEGACY_LAYOUT`: zarr reads the examples' chunk, checked the same way. The other variables: zarr reads
    them (their chunk files were seen at open); `length` is checked against 1..max_length, the optional
    `value_norm` whole examples at a time (:func:`check_value_norm`: finite and >= 0 inside the length, NaN
    past it). A failure is one
    StoreError naming the store, the file (and the example) and the fix.
    """

    def __init__(self, path: Path | str, arrays: Mapping[str, Any], attrs: Mapping[str, Any]):
        self.path, self.attrs = path, dict(attrs)
        self.arrays = {name: arrays[name] for name in (*DIMS, *OPTIONAL_DIMS) if name in arrays}
        att = self.arrays["attention"]
        self.fmt = shard_format(att)
        self.Q = int(att.shape[-1])
        self._lengths: dict[int, np.ndarray] = {}  # chunk file of `length` -> its lengths, checked
        self._index: dict[int, np.ndarray] = {}  # shard -> its index, checked
        self._checked: set[int] = set()  # examples whose attention passed check_block

    def where(self, name: str, e: int) -> str:
        arr = self.arrays[name]
        return f"{self.path}: {describe(name, arr, e // file_examples(arr))}"

    def zarr_read(self, name: str, key: tuple, first: int) -> np.ndarray:
        """An outer-indexed read of `name` through zarr; a failure names the first chunk file of the selection that
        does not decode (each read alone: the error path only), else the one holding example `first`."""
        arr = self.arrays[name]
        try:
            return np.asarray(arr.oindex[key])
        except (ValueError, RuntimeError) as err:
            if not damaged_bytes(err):  # not a codec's error: a bug keeps its type and traceback
                raise
            size = file_examples(arr)
            for k in sorted({int(e) // size for e in np.atleast_1d(np.arange(arr.shape[0])[key[0]])}):
                try:
                    arr[k * size:min((k + 1) * size, arr.shape[0])]
                except (ValueError, RuntimeError) as bad:
                    if not damaged_bytes(bad):
                        raise
                    first, err = k * size, bad
                    break
            raise StoreError(f"{self.where(name, first)} cannot be decoded ({type(err).__name__}: {err}); the store "
                             f"is corrupt: {refix(self.path)}") from None

    def chunk_file(self, name: str, k: int) -> np.ndarray:
        """Examples of chunk file k of a 1-d variable: in a local store whose codecs are the writer's (little-endian
        bytes, Blosc, and a CRC32C in :data:`LAYOUT`), the file read, its checksum checked and decoded here, without
        zarr's event loop (a thread hand-off per read that costs milliseconds on a loaded machine); otherwise
        through zarr."""

        import numcodecs
        import zarr
        from zarr.storage import LocalStore

        arr = self.arrays[name]
        size, E = file_examples(arr), int(arr.shape[0])
        rows = slice(k * size, min((k + 1) * size, E))
        codecs = tuple(arr.metadata.codecs)
        sp = arr.store_path
        crc = codecs[2:] == (zarr.codecs.Crc32cCodec(),)
        if not (arr.ndim == 1 and isinstance(sp.store, LocalStore) and len(codecs) == 2 + crc
                and codecs[0] == zarr.codecs.BytesCodec(endian="little")
                and isinstance(codecs[1], zarr.codecs.BloscCodec)):
            return self.zarr_read(name, (rows,), k * size)

        def corrupt(why: str) -> StoreError:
            return StoreError(f"{self.where(name, k * size)} cannot be read ({why}); the store is corrupt: "
                              f"{refix(self.path)}")

        try:
            with open(os.path.join(str(sp.store.root), sp.path, file_key(arr, k)), "rb") as fh:
                data = fh.read()
        except FileNotFoundError as err:
            raise corrupt(f"{type(err).__name__}: {err}") from None
        if crc and crc32c(data[:-4]) != data[-4:]:
            raise corrupt("ValueError: the chunk does not match its checksum")
        dtype = np.dtype(str(arr.dtype)).newbyteorder("<")
        try:
            raw = numcodecs.Blosc().decode(data[:-4] if crc else data)
        except (ValueError, RuntimeError) as err:
            if not damaged_bytes(err):  # not Blosc's own error: a bug keeps its type and traceback
                raise
            raise corrupt(f"{type(err).__name__}: {err}") from None
        if len(raw) != int(arr.chunks[0]) * dtype.itemsize:  # zarr stores the last chunk whole too
            raise corrupt(f"{len(raw)} bytes decoded, not the {int(arr.chunks[0]) * dtype.itemsize} of a chunk")
        return np.frombuffer(raw, dtype=dtype)[:rows.stop - rows.start]

    def length(self, e: int) -> int:
        size = file_examples(self.arrays["length"])
        k = e // size
        if k not in self._lengths:
            block = self.chunk_file("length", k)
            check_lengths(block, self.Q, self.where("length", k * size), store=self.path, first=k * size)
            self._lengths[k] = block
        return int(self._lengths[k][e - k * size])

    def example_idx(self, e: int) -> np.ndarray:
        return self.zarr_read("example_idx", (slice(e, e + 1),), e)

    def _get(self, k: int, start: int | None, stop: int | None) -> bytes | None:
        """Bytes [start, stop) of shard file k (start None: the last `stop` bytes); None if the file is absent.
        A local store is read with plain file reads (zarr's async store costs a thread hand-off per read)."""

        from zarr.abc.store import RangeByteRequest, SuffixByteRequest
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync
        from zarr.storage import LocalStore

        att = self.arrays["attention"]
        sp = att.store_path / file_key(att, k)
        if isinstance(sp.store, LocalStore):
            try:
                with open(os.path.join(str(sp.store.root), sp.path), "rb") as fh:
                    if start is None:  # a file shorter than `stop` gives fewer bytes: a damaged index
                        start = max(0, fh.seek(0, os.SEEK_END) - stop)
                        stop = start + stop
                    fh.seek(start)
                    return fh.read(stop - start)
            except FileNotFoundError:
                return None
        rng = SuffixByteRequest(stop) if start is None else RangeByteRequest(start, stop)
        buf = sync(sp.get(prototype=default_buffer_prototype(), byte_range=rng))
        return None if buf is None else buf.to_bytes()

    def inner_chunk(self, e: int, out: np.ndarray) -> np.ndarray:
        """Example e's attention (L, H, Q, K) of a :data:`LAYOUT` store into `out`: two byte-range reads at most
        (the shard's index is read once)."""
        fmt = self.fmt
        k, i = divmod(e, fmt.per_shard)
        where = self.where("attention", e)
        if k not in self._index:
            tail = self._get(k, None, fmt.index_bytes)
            if tail is None:
                raise StoreError(f"{where} is missing: the store is incomplete or damaged; {refix(self.path)}")
            self._index[k] = shard_index(tail, fmt, where, self.path)
        offset, size = (int(x) for x in self._index[k][i])
        data = None if offset == ABSENT else (self._get(k, offset, offset + size) or b"")
        return decode_inner(data, fmt, out, f"{where}: the inner chunk of example {e}", self.path)

    def attention(self, examples: np.ndarray, maps: tuple = (slice(None), slice(None))) -> np.ndarray:
        """attention of `examples` (e, L, H, Q, K), checked: the maps selected by `maps` (layer, head: ints, slices
        or integer arrays) of each example not yet checked whole (an example is remembered once all its maps are)."""
        att = self.arrays["attention"]
        if self.fmt is None:  # LEGACY_LAYOUT: zarr decodes each example chunk concerned once
            out = self.zarr_read("attention", (examples,), int(examples.min()) if len(examples) else 0)
        else:
            out = np.empty((len(examples),) + tuple(att.shape[1:]), dtype=att.dtype)
            for j, e in enumerate(examples.tolist()):
                self.inner_chunk(e, out[j])
        whole = all(isinstance(k, slice) and k.indices(n) == (0, n, 1) for k, n in zip(maps, att.shape[1:3]))
        for j, e in enumerate(examples.tolist()):
            if e in self._checked:
                continue
            block = out[j:j + 1]
            for axis, k in ((2, maps[1]), (1, maps[0])):  # the maps read, axes kept
                block = _take(block, axis, k if isinstance(k, slice) else np.atleast_1d(k))
            check = dict(attrs=self.attrs, padding=False, where=self.where("attention", e), store=self.path,
                         max_length=self.Q, first=e)
            try:
                check_block(block, np.array([self.length(e)]), **check)
            except StoreError:  # again, to name the example by its idx
                check_block(block, np.array([self.length(e)]), example_idx=self.example_idx(e), **check)
            if whole:
                self._checked.add(e)
        return out

    def read(self, name: str, key: tuple) -> np.ndarray:
        """An outer-indexed selection of variable `name` (ints, slices, integer arrays), checked."""
        E = self.arrays[name].shape[0]
        scalar = np.ndim(key[0]) == 0 and not isinstance(key[0], slice)
        if name == "value_norm":  # whole examples read and checked against their lengths, then the other axes taken
            rows = np.atleast_1d(np.arange(E)[key[0]])
            first = int(rows.min()) if rows.size else 0
            out = self.zarr_read(name, (rows,), first)
            check_value_norm(out, np.array([self.length(int(e)) for e in rows], dtype=np.int64),
                             where=self.where(name, first), store=self.path)
            for axis in range(len(key) - 1, 0, -1):
                out = _take(out, axis, key[axis])
            return out[0] if scalar else out
        if name != "attention":
            sel = np.arange(E)[key[0]]
            first = int(np.min(sel)) if np.size(sel) else 0
            out = self.zarr_read(name, key, first)
            if name == "length":
                check_lengths(out.ravel(), self.Q, self.where("length", first), store=self.path)
            return out
        examples = np.atleast_1d(np.arange(E)[key[0]])
        out = self.attention(examples, key[1:3])
        for axis in range(len(key) - 1, 0, -1):  # outer indexing of the other axes, last first
            out = _take(out, axis, key[axis])
        return out[0] if scalar else out


def _take(a: np.ndarray, axis: int, k) -> np.ndarray:
    """Outer indexing of one axis: a slice (a view), an int (the axis dropped) or an integer array."""
    return a[(slice(None),) * axis + (k,)] if isinstance(k, slice) else np.take(a, k, axis=axis)


def _checked_array(reader: _Reader, name: str):
    """Variable `name` of an open store as an xarray ``BackendArray``: every read goes through the store's
    :class:`_Reader`; picklable (it pickles as this call) for any Dask scheduler."""
    from xarray.backends import BackendArray
    from xarray.core import indexing

    arr = reader.arrays[name]

    class CheckedArray(BackendArray):
        shape, dtype = tuple(arr.shape), np.dtype(str(arr.dtype))

        def __getitem__(self, key):
            return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER,
                                                      lambda k: reader.read(name, k))

        def __reduce__(self):
            return _checked_array, (reader, name)

    return CheckedArray()


def _lazy(reader: _Reader, name: str):
    """Variable `name` of the store as an xarray lazily indexed array reading through `reader` (no Dask)."""
    from xarray.core import indexing

    return indexing.LazilyIndexedArray(_checked_array(reader, name))


def _target(path: str | Path) -> str:
    """`path` as Snakemake takes it as a target: relative to the working directory when it lies under it."""
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else os.fspath(path)


def open_store(path: str | Path, expect: Mapping[str, Any] | None = None, check_rows: bool = False,
               chunks: Mapping[str, int] | str | None = None):
    """Open a complete attention store lazily as an xarray Dataset, every read checked; refuse anything else.

    At open (the consolidated metadata and a stat of every chunk file; no data is read): the store must
    exist, be marked complete, hold every variable and every chunk (shard) file, and match `expect`
    (attribute -> required value, :func:`expected_attrs` for an analysis; a difference raises
    StoreMismatchError naming the attribute, both values and the fix). Reads are lazy and checked
    (:class:`_Reader`): an indexing such as ``ds.attention.isel(example=i).sel(layer=5, head=3).values`` reads,
    checks and decompresses that example alone, without Dask. check_rows: also read and check example 0 at open.
    chunks: give Dask chunks (as for ``Dataset.chunk``, e.g. ``{"example": 1}``) for a Dask-backed view whose
    chunks read through the same checks. Both layouts are read (:data:`LAYOUT`; :data:`LEGACY_LAYOUT`, with a
    log message: re-extract it for fast reads).
    """
    import xarray as xr

    if "://" in os.fspath(path):  # an fsspec URL (memory://, s3://, ...): read through zarr's fsspec store
        import fsspec

        fs, root = fsspec.core.url_to_fs(os.fspath(path))
        if not fs.exists(root):
            raise MissingInputError(f"no attention store at {os.fspath(path)!r}: check the URL, or copy the store "
                                    f"there (an extraction writes it to results/attention/...)")
    else:
        path = Path(path).absolute()  # Dask workers may run from another directory
        if not path.exists():
            part = partial_path(path)
            hint = (f" (an unfinished extraction is at {part}; re-run snakemake to resume it)" if part.exists() else "")
            raise MissingInputError(f"no attention store at {str(path)!r}{hint}; run the extraction first: "
                                    f"`{snakemake_command(_target(path))}`")
    group = open_group(path)
    attrs = dict(group.attrs)
    if attrs.get("complete") is not True:
        raise IncompleteStoreError(f"{path} is not marked complete (complete={attrs.get('complete')!r}): the "
                                   f"extraction was interrupted or is still running; delete it and re-run "
                                   f"(`rm -rf {_target(path)}`; `{snakemake_command(_target(path))}`: an "
                                   f"interrupted run resumes from {partial_path(path)})")
    try:
        arrays = dict(group.arrays())  # from the consolidated metadata
    except (OSError, ValueError, TypeError, KeyError) as err:
        if not damaged_metadata(err):  # not zarr's or json's: a bug keeps its type and traceback
            raise
        raise StoreError(f"{path} is not a readable Zarr store ({err}); {refix(path)}") from None
    missing = [v for v in (*DIMS, "layer", "head") if v not in arrays]
    if missing:
        raise StoreError(f"{path} lacks variable(s) {missing}: not an attention store (docs/reference.md#store); "
                         f"{refix(path)}")
    if "n_chunks" not in attrs:
        raise StoreError(f"{path} has no `n_chunks` attribute: not a store written by the extraction "
                         f"(docs/reference.md#store); {refix(path)}")
    if store_layout(attrs) not in LAYOUTS:
        raise StoreError(f"{path} has layout {store_layout(attrs)!r}, which this version of bertology does not read "
                         f"(it reads {', '.join(LAYOUTS)}); {refix(path)}")
    if store_layout(attrs) == LAYOUT and shard_format(arrays["attention"]) is None:
        raise StoreError(f"{path}: `attention` is sharded with other codecs than the {LAYOUT} layout's: not a store "
                         f"written by bertology (docs/reference.md#store-chunks); {refix(path)}")
    diffs = attr_differences(attrs, expect or {})
    if diffs:
        lines = "; ".join(f"attribute {k!r} is {h!r} in the store but {w!r} is asked" for k, h, w in diffs)
        raise StoreMismatchError(f"{path} was extracted for other settings: {lines}. Delete it and re-run the "
                                 f"extraction (`rm -rf {_target(path)}`; `{snakemake_command(_target(path))}`), or "
                                 f"ask for what the store holds")
    optional = [v for v in OPTIONAL_DIMS if v in arrays]
    if attrs.get("value_norms") and "value_norm" not in optional:
        raise StoreError(f"{path} says value_norms=true but lacks `value_norm`: the store is damaged; {refix(path)}")
    holes = missing_chunks(arrays, tuple(DIMS) + tuple(optional))
    if holes:
        more = f" and {len(holes) - 1} more" if len(holes) > 1 else ""
        raise StoreError(f"{path} lacks {holes[0]}{more}: the store is damaged; {refix(path)}")
    reader = _Reader(path, arrays, attrs)
    if store_layout(attrs) == LEGACY_LAYOUT:
        log.info("%s is in the earlier layout (%s: a read decompresses a whole chunk of %s examples); it is read as "
                 "before; delete it and re-run the extraction for the faster %s layout", path, LEGACY_LAYOUT,
                 reader.arrays["attention"].chunks[0], LAYOUT)
    variables = {}
    for name, dims in {**DIMS, **{v: OPTIONAL_DIMS[v] for v in optional}}.items():
        arr = reader.arrays[name]
        var = xr.Variable(dims, _lazy(reader, name))
        var.encoding = {"chunks": tuple(arr.chunks), "preferred_chunks": dict(zip(dims, arr.chunks)),
                        "shards": getattr(arr, "shards", None), "dtype": var.dtype}
        variables[name] = var
    try:
        coords = {c: (c, np.asarray(arrays[c][:])) for c in ("layer", "head")}
    except (ValueError, RuntimeError) as err:
        if not damaged_bytes(err):
            raise
        raise StoreError(f"{path}: the coordinates layer/head cannot be read ({type(err).__name__}: {err}); "
                         f"{refix(path)}") from None
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    if check_rows and ds.sizes["example"]:
        reader.attention(np.array([0]))
        if optional:
            reader.read("value_norm", (np.array([0]),) + (slice(None),) * 3)
    return ds if chunks is None else ds.chunk(chunks)

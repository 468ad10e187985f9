"""The attention store (docs/reference.md#store): schema, chunked writer and validating reader.

One Zarr v3 store per task and variant, ``results/attention/{task}/{variant}.zarr``, an xarray Dataset:

    attention       (example, layer, head, query, key) float16  post-softmax; NaN where query or key >= length
    input_ids       (example, query)                   int32    pad id past length
    token_type_ids  (example, query)                   int8     what the model was given (all 0 for RoBERTa-style)
    segment         (example, query)                   int8     0 first text, 1 second text, -1 padding
    word_ids        (example, query)                   int16    spaCy word of each wordpiece; -1 specials/padding
    length          (example,)                         int16    real tokens, [CLS] and [SEP]s included
    example_idx     (example,)                         int64    `idx` in results/data/{task}/{split}.parquet
    value_norm      (example, layer, head, key)        float32  ||f_h(x_j)|| (optional: attribute value_norms)
    layer, head     coordinates, 0-based

Query/key have size max_length. Layout on disk (attribute ``layout``, :data:`LAYOUT`): ``attention`` is one
Zarr v3 shard file per example chunk (chunk = attention.chunk_size examples) holding one inner chunk per example
(1, L, H, Q, K), Blosc-compressed with a CRC32C checksum (the shard index has its own), so one map or one
example is read and decompressed alone and a reduction reads each example cropped to its own length
(:func:`read_chunk` with ``crop``); the small variables are chunked along ``example`` (one file per example
chunk). The extraction writes and the reductions read the shard files directly (:func:`write_shard`,
:func:`read_shard_cropped`); any Zarr v3 reader reads them. Stores written before the ``layout`` attribute
(:data:`LEGACY_LAYOUT`: ``attention`` chunked along ``example`` only, a whole chunk decompressed for any read) are
still read, with the same checks (bench/bench_store_layout.py compares the two).

Lifecycle: :func:`create_store` writes the empty layout to ``{path}.partial`` with ``complete=False``;
:func:`write_chunk` fills whole example chunks and then raises the ``chunks_done`` attribute; a killed run
resumes from ``chunks_done`` (:func:`resume_point`); :func:`finalize` sets ``complete=True`` last,
consolidates the metadata and renames ``.partial`` to the final path.

Reading: :func:`open_store` refuses anything without ``complete=True`` or ``n_chunks`` (not written by the
extraction), of a layout it does not read, with attributes other than the expected ones (:func:`expected_attrs`)
or with a missing chunk or shard file, from the consolidated metadata and a stat of each file; its Dataset reads
lazily without Dask, each example's inner chunk alone, and checks what it reads. Every read, there and in the
analyses' chunks (:func:`read_chunk`, :func:`map_chunks`), is checked: a missing or undecodable chunk, shard or
inner chunk (a checksum that does not match), a length outside 1..max_length, NaN inside an example's length or
rows that do not sum to 1 raise :class:`StoreError` naming the store, the chunk (and the example) and the fix.

Precision (:func:`precision_attrs`): by default ``attention`` is the eager forward's float32 attention cast to
float16 and nothing else (lossless with respect to float16). ``attention.keepbits = k`` opts in to relative
rounding: a numcodecs ``BitRound`` filter in the array's codec pipeline keeps k mantissa bits; the attributes
``keepbits``, ``rounding``, ``max_rel_error`` and ``max_abs_error_subnormal`` record it. Float16 attention is
close to incompressible (about 13 bits of entropy per value); Blosc zstd-1 with byte shuffle stores the real
values at about 85% of their size and the NaN padding at almost nothing (bench/bench_extract.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertology.config import ConfigError
from bertology.errors import MissingInputError, UserError

log = logging.getLogger(__name__)
# zarr-python warns on every open of an array with a numcodecs filter (BitRound, keepbits stores); it reads them
warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")

DIMS = {
    "attention": ("example", "layer", "head", "query", "key"),
    "input_ids": ("example", "query"),
    "token_type_ids": ("example", "query"),
    "segment": ("example", "query"),
    "word_ids": ("example", "query"),
    "length": ("example",),
    "example_idx": ("example",),
}
# Optional variables: written when the extraction computes them (attribute ``value_norms``: true), absent else.
# value_norm is float32, not float16: a norm is unbounded (float16 overflows at 65504) and the variable is Q times
# smaller than `attention`, so float32 adds little to the store.
OPTIONAL_DIMS = {"value_norm": ("example", "layer", "head", "key")}
OPTIONAL_DTYPES = {"value_norm": "float32"}
DTYPES = {"attention": "float16", "input_ids": "int32", "token_type_ids": "int8", "segment": "int8",
          "word_ids": "int16",
          "length": "int16", "example_idx": "int64"}
FILL = {"attention": float("nan"), "input_ids": 0, "token_type_ids": 0, "segment": -1, "word_ids": -1, "length": 0,
        "example_idx": -1, "value_norm": float("nan")}

# Attributes that define a store's content: a store whose value of any of these differs from what is asked
# is another store (another model or checkpoint, other examples, other precision) and is never reused.
IDENTITY_ATTRS = ("model", "variant", "task", "split", "examples", "seed", "max_length", "weights_fingerprint",
                  "sample_hash", "keepbits", "spacy_model", "cls_token_id", "sep_token_id", "pad_token_id",
                  "layers", "heads", "n_examples")
# Layout attributes that must also match to resume a partial store.
LAYOUT_ATTRS = ("chunk_size", "n_chunks", "codec", "layout", "value_norms")

#: the layout of `attention` (attribute ``layout``): one shard file per example chunk, one inner chunk per example
LAYOUT = "example-shards"
#: stores without a ``layout`` attribute: `attention` chunked along ``example`` only (bertology <= 0.1 stores)
LEGACY_LAYOUT = "example-chunks"
LAYOUTS = (LAYOUT, LEGACY_LAYOUT)


def store_layout(attrs: Mapping[str, Any]) -> str:
    """The layout a store's attributes declare (:data:`LEGACY_LAYOUT` for stores written before it was recorded)."""
    return str(attrs.get("layout", LEGACY_LAYOUT))


class StoreError(UserError, ValueError):
    """An attention store is missing, incomplete, corrupt or not the one asked for; the message says the fix."""


class IncompleteStoreError(StoreError):
    pass


class StoreMismatchError(StoreError):
    pass


# --------------------------------------------------------------------------------------------------
# identity (the sample itself is results/attention/{task}/sample.parquet, drawn by bertology.data.sample_rows)


def sample_hash(example_idx: np.ndarray) -> str:
    """Short sha256 of the sample's example_idx sequence (identifies the examples and their order)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(example_idx, dtype="<i8").tobytes()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------------
# writing


def partial_path(path: str | Path) -> Path:
    """Where an unfinished store lives (not a Snakemake output, so an interrupted job keeps its chunks)."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


# The attention compressor (whatever the precision): Blosc zstd level 1, byte shuffle, 1 MiB blocks (see
# bench/bench_store.py); recorded in the `codec` attribute, so a partial store of another codec is not resumed.
ATTENTION_CODEC = "blosc-zstd1-shuffle-1MiB"


def attention_codec():
    """The zarr codec named by ATTENTION_CODEC."""
    import zarr

    return zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle", typesize=2, blocksize=1 << 20)


def attention_compressors(layout: str) -> list:
    """The bytes-to-bytes codecs of `attention`'s chunks: Blosc (ATTENTION_CODEC), then, in :data:`LAYOUT`, a
    CRC32C of each inner chunk (4 bytes per example), so a damaged example is an error, never silent values."""
    import zarr

    return [attention_codec()] + ([zarr.codecs.Crc32cCodec()] if layout == LAYOUT else [])


@contextlib.contextmanager
def blosc_threads(n: int):
    """Blosc compresses each chunk with `n` threads inside the block (its global context, which numcodecs
    serialises with a lock), restored on exit.

    numcodecs' default compresses a chunk on one thread when called off the main thread, as zarr's codec
    pipeline does: on 2 cores a 151 MB attention chunk then takes twice as long to write.
    """
    import numcodecs.blosc as nb

    before_use, before_n = nb.use_threads, nb.get_nthreads()
    nb.use_threads = True
    nb.set_nthreads(max(1, int(n)))
    try:
        yield
    finally:
        nb.use_threads = before_use
        nb.set_nthreads(before_n)


FLOAT16_MANTISSA_BITS = 10


def precision_attrs(keepbits: int | None) -> dict[str, Any]:
    """The attributes that record how `attention` was rounded (the one definition; see the module docstring).

    max_rel_error bounds |stored - a| / |a| for the eager forward's float32 value a in float16's normal range
    (|a| >= 2**-14); max_abs_error_subnormal bounds |stored - a| below it. keepbits None: the float16 cast only
    (round to nearest, 2**-11); k: the cast, then BitRound to k mantissa bits (a further 2**-(k+1)).
    """
    if keepbits is None:
        return {"keepbits": None, "rounding": "float16 cast (round to nearest even); nothing else",
                "max_rel_error": 2.0 ** -11, "max_abs_error_subnormal": 2.0 ** -25}
    k = int(keepbits)
    if not 1 <= k < FLOAT16_MANTISSA_BITS:
        raise ConfigError(f"attention.keepbits={k}: keep 1..{FLOAT16_MANTISSA_BITS - 1} of float16's "
                         f"{FLOAT16_MANTISSA_BITS} mantissa bits (null = lossless)")
    rel = (1 + 2.0 ** -11) * (1 + 2.0 ** -(k + 1)) - 1
    return {"keepbits": k, "rounding": f"float16 cast, then mantissa rounded to {k} bits (numcodecs BitRound, "
                                       f"round half to even)",
            "max_rel_error": rel, "max_abs_error_subnormal": 2.0 ** -25 + 2.0 ** -(k + 1) * 2.0 ** -14}


def attention_filters(keepbits: int | None) -> list:
    """The array-to-array codecs of `attention`: [] (lossless) or [BitRound(keepbits)], stored in its metadata."""
    import zarr

    if keepbits is None:
        return []
    with warnings.catch_warnings():  # "numcodecs codecs are not in the Zarr v3 spec": zarr-python reads them
        warnings.simplefilter("ignore")
        return [zarr.codecs.BitRound(keepbits=int(keepbits))]


def _jsonable(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(attrs), default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def create_store(path: str | Path, *, example_idx: np.ndarray, layers: int, heads: int, max_length: int,
                 chunk_size: int, attrs: Mapping[str, Any], layout: str = LAYOUT, value_norms: bool = False):
    """Create an empty store at `path` (overwriting), with example_idx and the coordinates written.

    example_idx: (E,) the sample. attrs: the store's attributes (identity + provenance, with `keepbits`:
    None or the BitRound filter of `attention`); `complete`, `chunks_done`, `n_chunks`, `chunk_size`,
    `codec`, `layout` are set here. layout: :data:`LAYOUT`, or :data:`LEGACY_LAYOUT` (what earlier versions
    wrote: only to compare with, in tests and bench/bench_store_layout.py). value_norms: also the optional
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
    root = zarr.open_group(str(path), mode="w", zarr_format=3, attributes=_jsonable(all_attrs))
    for name, shape in shapes.items():
        chunks = (min(chunk_size, max(E, 1)),) + shape[1:]
        shards = None
        if name == "attention":
            compressors = attention_compressors(layout)
            if layout == LAYOUT:  # one shard file per example chunk, one inner chunk per example
                shards, chunks = chunks, (1,) + shape[1:]
        elif name in OPTIONAL_DIMS:
            # value_norm: zstd 1 (zstd 9 took longer than the forward pass itself: 2.8 s vs 2.4 s for 256 MRPC pairs)
            compressors = [zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")]
        else:
            # zstd 9 (3 before LAYOUT): the small variables' bytes pay for the shard index (16 bytes an example)
            compressors = [zarr.codecs.BloscCodec(cname="zstd", clevel=9 if layout == LAYOUT else 3, shuffle="shuffle")]
        # write_empty_chunks: skip zarr's scan of every chunk for all-fill values (a third of the write cost)
        filters = attention_filters(attrs.get("keepbits")) if name == "attention" else []
        dtype = DTYPES.get(name) or OPTIONAL_DTYPES[name]
        root.create_array(name, shape=shape, chunks=chunks, shards=shards, dtype=dtype, fill_value=FILL[name],
                          filters=filters, compressors=compressors,
                          dimension_names=DIMS.get(name) or OPTIONAL_DIMS[name],
                          config={"write_empty_chunks": True})
    for coord, size in (("layer", layers), ("head", heads)):
        arr = root.create_array(coord, shape=(size,), dtype="int64", dimension_names=(coord,), fill_value=0)
        arr[:] = np.arange(size)
    root["example_idx"][:] = np.asarray(example_idx, dtype=np.int64)
    return root


# --------------------------------------------------------------------------------------------------
# shard files of `attention` (LAYOUT): written and read here directly, in Zarr v3's sharding format
#
# zarr-python writes and reads these files too (xr.open_zarr, any Zarr v3 reader); the extraction and the
# reductions do it here because zarr-python's per-inner-chunk overhead made a shard slower to write than one
# big chunk (extraction 0.84x of a plain forward instead of 0.93x) and a reduction's per-example reads no faster
# than today's (bench/bench_store_layout.py). A shard file: the encoded inner chunks one after another (each: the
# array's filters, little-endian bytes, Blosc, then its CRC32C, 4 bytes little-endian), then the index, one
# (offset, size) little-endian uint64 pair per inner chunk in C order (2**64 - 1 twice: absent), and the
# index's CRC32C. tests/test_store_layout.py checks that a file written here is byte for byte the one
# zarr-python writes.

ABSENT = 2 ** 64 - 1


@dataclass(frozen=True)
class ShardFormat:
    """`attention`'s sharding, when it is exactly the one :func:`create_store` writes (:func:`shard_format`).

    per_shard: inner chunks (examples) per shard file; inner: an inner chunk's shape without its example
    axis (L, H, Q, K); blosc: the numcodecs Blosc of the array's settings; keepbits: of its BitRound filter.
    """

    per_shard: int
    inner: tuple[int, ...]
    dtype: str
    blosc: Any
    keepbits: int | None

    @property
    def index_bytes(self) -> int:
        return self.per_shard * 16 + 4


def shard_format(arr) -> ShardFormat | None:
    """The ShardFormat of a zarr array, or None for any other layout (which zarr-python then reads)."""
    import numcodecs
    import zarr

    codecs = arr.metadata.codecs if getattr(arr.metadata, "zarr_format", 3) == 3 else ()
    if len(codecs) != 1 or not isinstance(codecs[0], zarr.codecs.ShardingCodec):
        return None
    sh = codecs[0]
    little = zarr.codecs.BytesCodec(endian="little")
    inner = list(sh.codecs)
    keepbits = None
    if inner and isinstance(inner[0], zarr.codecs.BitRound):
        keepbits = int(inner.pop(0).codec_config["keepbits"])
    ok = (sh.index_location.value == "end" and tuple(sh.index_codecs) == (little, zarr.codecs.Crc32cCodec())
          and len(inner) == 3 and inner[0] == little and isinstance(inner[1], zarr.codecs.BloscCodec)
          and inner[2] == zarr.codecs.Crc32cCodec() and sh.chunk_shape == (1,) + tuple(arr.shape[1:])
          and arr.metadata.chunk_grid.chunk_shape == (arr.metadata.chunk_grid.chunk_shape[0],) + tuple(arr.shape[1:]))
    if not ok:
        return None
    b = inner[1]
    blosc = numcodecs.Blosc(cname=b.cname.value, clevel=b.clevel, blocksize=b.blocksize, typesize=b.typesize,
                            shuffle={"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[b.shuffle.value])
    return ShardFormat(int(arr.metadata.chunk_grid.chunk_shape[0]), tuple(arr.shape[1:]), str(arr.dtype), blosc,
                       keepbits)


def _crc32c(data: bytes) -> bytes:
    import google_crc32c

    return int(google_crc32c.value(data)).to_bytes(4, "little")


def encode_shard(block: np.ndarray, fmt: ShardFormat) -> bytes:
    """One shard file of `attention`: block (e, L, H, Q, K), e <= per_shard examples (the last shard may be short).

    Compression runs on the Blosc threads of the caller's :func:`blosc_threads` context (the extraction's).
    """
    import numcodecs

    block = np.ascontiguousarray(block, dtype=fmt.dtype)
    if fmt.keepbits is not None:
        block = numcodecs.BitRound(keepbits=fmt.keepbits).encode(block).reshape(block.shape)
    index = np.full((fmt.per_shard, 2), ABSENT, dtype="<u8")
    parts, offset = [], 0
    for i in range(block.shape[0]):
        data = fmt.blosc.encode(block[i])
        parts += [data, _crc32c(data)]
        index[i] = (offset, len(data) + 4)
        offset += len(data) + 4
    raw = index.tobytes()
    return b"".join(parts) + raw + _crc32c(raw)


def _shard_key(arr, k: int) -> str:
    return arr.metadata.encode_chunk_key((k,) + (0,) * (arr.ndim - 1))


def write_shard(arr, k: int, block: np.ndarray, fmt: ShardFormat) -> None:
    """Write shard file k of `attention` (examples k * per_shard ...) through the array's store."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    data = default_buffer_prototype().buffer.from_bytes(encode_shard(block, fmt))
    sync((arr.store_path / _shard_key(arr, k)).set(data))


def read_shard_cropped(arr, fmt: ShardFormat, start: int, length: np.ndarray, where: str,
                       path: str | Path) -> np.ndarray:
    """Examples start.. (one per length, all in one shard) of `attention`, each decoded alone and cropped:
    (e, L, H, m, m) with m the longest length, NaN past each example's length.

    Reads the shard file once; checks the index's and each inner chunk's CRC32C. A missing file, an absent
    inner chunk, a checksum that does not match or an undecodable chunk raise StoreError naming them and the fix.
    """
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    k, first = divmod(int(start), fmt.per_shard)
    e = len(length)
    m = int(length.max()) if e else 0
    out = np.full((e,) + fmt.inner[:-2] + (m, m), np.nan, dtype=fmt.dtype)
    if not e:
        return out
    buf = sync((arr.store_path / _shard_key(arr, k)).get(prototype=default_buffer_prototype()))
    if buf is None:
        raise StoreError(f"{where} is missing: the store is incomplete or damaged; {refix(path)}")
    raw = buf.to_bytes()
    index = shard_index(raw[-fmt.index_bytes:], fmt, where, path)
    body = len(raw) - fmt.index_bytes
    scratch = np.empty(fmt.inner, dtype=fmt.dtype)
    for i, n in enumerate(length.tolist()):
        offset, size = (int(x) for x in index[first + i])
        what = f"{where}: the inner chunk of example {start + i}"
        if offset != ABSENT and offset + size > body:
            raise StoreError(f"{what} does not match its checksum; the store is corrupt: {refix(path)}")
        decode_inner(raw[offset:offset + size] if offset != ABSENT else None, fmt, scratch, what, path)
        out[i, ..., :n, :n] = scratch[..., :n, :n]
    return out


def shard_index(tail: bytes, fmt: ShardFormat, where: str, path: str | Path) -> np.ndarray:
    """The (per_shard, 2) (offset, size) index of a shard file from its last ``fmt.index_bytes`` bytes, its
    CRC32C checked (StoreError naming `where` and the fix if it does not match)."""
    if len(tail) != fmt.index_bytes or _crc32c(tail[:-4]) != tail[-4:]:
        raise StoreError(f"{where}: the shard index does not match its checksum; the store is corrupt: {refix(path)}")
    return np.frombuffer(tail[:-4], dtype="<u8").reshape(fmt.per_shard, 2)


def decode_inner(data: bytes | None, fmt: ShardFormat, out: np.ndarray, what: str, path: str | Path) -> np.ndarray:
    """Decode one inner chunk (its encoded bytes followed by their CRC32C; None: absent from the index) into
    `out` (fmt.inner), its checksum checked; StoreError naming `what` (the example) and the fix otherwise."""
    if data is None:
        raise StoreError(f"{what} is missing; the store is damaged: {refix(path)}")
    if len(data) < 4 or _crc32c(data[:-4]) != data[-4:]:
        raise StoreError(f"{what} does not match its checksum; the store is corrupt: {refix(path)}")
    try:
        fmt.blosc.decode(data[:-4], out=out)
    except Exception as err:  # noqa: BLE001 - whatever Blosc says
        raise StoreError(f"{what} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                         f"{refix(path)}") from None
    return out


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

    with zarr.config.set({"array.write_empty_chunks": True}):  # every chunk file exists, even an all-fill one
        optional = [name for name in OPTIONAL_DIMS if name in root]
        for name in ("attention", "input_ids", "token_type_ids", "segment", "word_ids", "length", *optional):
            arr = root[name]
            fmt = shard_format(arr) if name == "attention" else None
            if fmt is not None and start % fmt.per_shard == 0:
                write_shard(arr, start // fmt.per_shard, arrays[name], fmt)
            else:
                arr[start:stop] = np.asarray(arrays[name], dtype=arr.dtype)
    root.attrs["chunks_done"] = chunk + 1


def _differences(attrs: Mapping[str, Any], expect: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    out = []
    for key, want in expect.items():
        have = attrs.get(key, "<missing>")
        if _jsonable({"v": have})["v"] != _jsonable({"v": want})["v"]:
            out.append((key, have, want))
    return out


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
    diffs = _differences(have, {k: attrs[k] for k in keys})
    if diffs:
        what = "; ".join(f"{k}: {h!r} there, {w!r} asked" for k, h, w in diffs)
        log.warning("partial store %s was written for other settings (%s); starting over", path, what)
        shutil.rmtree(path)
        return None
    done = int(have.get("chunks_done", 0))
    log.info("resuming %s from chunk %d of %d", path, done, int(have["n_chunks"]))
    return root, done


def finalize(root, partial: str | Path, final: str | Path) -> Path:
    """Mark the store complete (last attribute written), consolidate its metadata, move it into place."""
    import zarr

    n = int(root.attrs["n_chunks"])
    if int(root.attrs["chunks_done"]) != n:
        raise IncompleteStoreError(f"{partial}: only {root.attrs['chunks_done']} of {n} chunks written")
    root.attrs["complete"] = True
    with warnings.catch_warnings():  # consolidated metadata is a zarr-python extension of v3; xarray reads it
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(partial))
    final = Path(final)
    if final.exists():
        shutil.rmtree(final)
    Path(partial).rename(final)
    return final


# --------------------------------------------------------------------------------------------------
# reading


def row_sum_tolerance(attrs: Mapping[str, Any], n: int) -> float:
    """Allowed |row sum - 1| for a row of n real keys: the recorded rounding (relative, and absolute below
    float16's normal range) plus float32 softmax error; lossless float16 by default."""
    prec = precision_attrs(None)
    rel = float(attrs.get("max_rel_error", prec["max_rel_error"]))
    sub = float(attrs.get("max_abs_error_subnormal", prec["max_abs_error_subnormal"]))
    return 1e-3 + 1.01 * rel + n * sub


def refix(path: str | Path) -> str:
    """The fix for a damaged or stale store: what every reading error ends with."""
    return f"delete {path} and re-run the extraction (`snakemake {path}` re-creates it)"


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
        if np.isnan(sums).any():
            raise StoreError(f"{where}: {name} has NaN inside its length {n} (a missing or damaged chunk?); the "
                             f"store is corrupt or unfinished: {fix}")
        if padding and not (np.isnan(a[..., n:, :]).all() and np.isnan(a[..., :n, n:]).all()):
            raise StoreError(f"{where}: {name} has values outside its length {n} (expected NaN); "
                             f"{fix}")
        err = float(np.abs(sums - 1.0).max())
        tol = row_sum_tolerance(attrs, int(n))
        if err > tol:
            raise StoreError(f"{where}: attention rows of {name} sum to 1 +- {err:.4f} over its {n} real keys "
                             f"(tolerance {tol:.4f}): not post-softmax attention; {fix}")


def _open_group(path: str | Path):
    import zarr

    try:
        return zarr.open_group(str(path), mode="r")
    except Exception as err:  # noqa: BLE001 - any unreadable store is the same user error
        raise StoreError(f"{path} is not a readable Zarr store ({type(err).__name__}: {err}); {refix(path)}") from None


def _array(group, name: str, path: str | Path):
    try:
        return group[name]
    except Exception as err:  # noqa: BLE001
        raise StoreError(f"{path} lacks variable `{name}` or its metadata is unreadable ({type(err).__name__}: "
                         f"{err}); {refix(path)}") from None


def _missing_keys(arr, keys: list[str]) -> list[str]:
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


def _file_examples(arr) -> int:
    """Examples per chunk file of an array: its shard (sharded `attention`) or its chunk along `example`."""
    shards = getattr(arr, "shards", None)
    return int((shards or arr.chunks)[0])


def _has_chunk(arr, key: str) -> bool:
    from zarr.core.sync import sync

    return bool(sync((arr.store_path / key).exists()))


def missing_chunks(path: str | Path, variables: Sequence[str] = tuple(DIMS), group=None,
                   arrays: Mapping[str, Any] | None = None) -> list[str]:
    """'variable chunk k (examples a..b, file ...)' for every example chunk (or shard) file the store lacks (the
    extraction writes every one, all-fill chunks included). arrays: the group's arrays by name, when at hand."""
    group = group if group is not None or arrays is not None else _open_group(path)
    out = []
    for name in variables:
        arr = arrays[name] if arrays is not None else _array(group, name, path)
        size, E = _file_examples(arr), arr.shape[0]
        kind = "shard" if getattr(arr, "shards", None) else "chunk"
        keys = {arr.metadata.encode_chunk_key((k,) + (0,) * (arr.ndim - 1)): k for k in range(-(-E // size))}
        for key in _missing_keys(arr, list(keys)):
            k = keys[key]
            out.append(f"`{name}` {kind} {k} (examples {k * size}..{min((k + 1) * size, E) - 1}, file {name}/{key})")
    return out


def read_chunk(path: str, start: int, stop: int, variables: Sequence[str], check: bool = True,
               group=None, crop: bool = False) -> dict[str, np.ndarray]:
    """Examples [start, stop) of `variables` of a store (path or fsspec URL) as numpy arrays, checked.

    A missing or undecodable chunk, shard or inner chunk raises StoreError naming the store, the variable, the
    chunk (file) and the fix. check: when `attention` is read, every example's length is in 1..max_length, its
    n x n block holds no NaN and its rows sum to 1 (:func:`check_block`, padding not rescanned), so no analysis
    ever computes on a hole. crop: `attention` comes cropped to the block's longest example m,
    (e, L, H, m, m), NaN past each example's length; in :data:`LAYOUT` each example is read and decompressed
    alone up to its own length (one inner chunk each), so memory and copies scale with the real tokens.
    """
    group = group if group is not None else _open_group(path)
    want_att = "attention" in variables
    names = list(dict.fromkeys(list(variables) + (["length", "example_idx"] if check and want_att else [])
                               + (["length"] if crop and want_att else [])))
    names.sort(key=lambda v: v == "attention")  # length first: a cropped read needs it
    out: dict[str, np.ndarray] = {}
    for name in names:
        arr = _array(group, name, path)
        k = start // _file_examples(arr)
        key = arr.metadata.encode_chunk_key((k,) + (0,) * (arr.ndim - 1))
        kind = "shard" if getattr(arr, "shards", None) else "chunk"
        where = f"{path}: `{name}` {kind} {k} (examples {start}..{stop - 1}, file {name}/{key})"
        if not _has_chunk(arr, key):
            raise StoreError(f"{where} is missing: the store is incomplete or damaged; {refix(path)}")
        if name == "attention" and crop:
            Q = int(arr.shape[-1])
            if check:
                check_lengths(out["length"], Q, where, out.get("example_idx"), path)
            out[name] = _read_cropped(arr, start, np.clip(out["length"], 0, Q).astype(np.int64), where, path)
            continue
        try:
            out[name] = np.asarray(arr[start:stop])
        except Exception as err:  # noqa: BLE001 - a corrupt chunk, whatever the codec says
            raise StoreError(f"{where} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                             f"{refix(path)}") from None
    if check and want_att:
        att = group["attention"]
        k = start // _file_examples(att)
        kind = "shard" if getattr(att, "shards", None) else "chunk"
        check_block(out["attention"], out["length"], dict(group.attrs), padding=False,
                    where=f"{path} `attention` {kind} {k} (examples {start}..{stop - 1})",
                    example_idx=out["example_idx"], store=path, max_length=int(att.shape[-1]))
    return {name: out[name] for name in variables}


def _read_cropped(arr, start: int, length: np.ndarray, where: str, path: str | Path) -> np.ndarray:
    """attention of examples start.. (one per length), cropped to the longest: (e, L, H, m, m), NaN padded.

    :data:`LAYOUT`: one read of the shard file, each example's inner chunk decoded alone and cropped
    (:func:`read_shard_cropped`); another sharding: zarr reads each example's n x n block; unsharded: one read of
    the block [start:stop, ..., :m, :m] (the whole chunk is decompressed).
    """
    fmt = shard_format(arr)
    if fmt is not None and start // fmt.per_shard == (start + len(length) - 1) // fmt.per_shard:
        return read_shard_cropped(arr, fmt, start, length, where, path)
    e = len(length)
    m = int(length.max()) if e else 0
    if not getattr(arr, "shards", None):
        try:
            return np.asarray(arr[start:start + e, ..., :m, :m])
        except Exception as err:  # noqa: BLE001
            raise StoreError(f"{where} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                             f"{refix(path)}") from None
    out = np.full((e,) + tuple(arr.shape[1:-2]) + (m, m), np.nan, dtype=arr.dtype)
    for i, n in enumerate(length):
        try:
            out[i, ..., :n, :n] = arr[start + i, ..., :n, :n]
        except Exception as err:  # noqa: BLE001 - a damaged shard index or inner chunk
            raise StoreError(f"{where}: the inner chunk of example {start + i} cannot be decoded "
                             f"({type(err).__name__}: {err}); the store is corrupt: {refix(path)}") from None
    return out


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
        size = _file_examples(arr)
        k = e // size
        kind = "shard" if getattr(arr, "shards", None) else "chunk"
        return (f"{self.path}: `{name}` {kind} {k} (examples {k * size}..{min((k + 1) * size, arr.shape[0]) - 1}, "
                f"file {name}/{_shard_key(arr, k)})")

    def zarr_read(self, name: str, key: tuple, first: int) -> np.ndarray:
        try:
            return np.asarray(self.arrays[name].oindex[key])
        except Exception as err:  # noqa: BLE001 - a corrupt chunk, whatever the codec says
            raise StoreError(f"{self.where(name, first)} cannot be decoded ({type(err).__name__}: {err}); the store "
                             f"is corrupt: {refix(self.path)}") from None

    def chunk_file(self, name: str, k: int) -> np.ndarray:
        """Examples of chunk file k of a 1-d variable: in a local store whose codecs are the writer's (little-endian
        bytes, Blosc), the file read and decoded here, without zarr's event loop (a thread hand-off per read that
        costs milliseconds on a loaded machine); otherwise through zarr."""

        import numcodecs
        import zarr
        from zarr.storage import LocalStore

        arr = self.arrays[name]
        size, E = _file_examples(arr), int(arr.shape[0])
        rows = slice(k * size, min((k + 1) * size, E))
        codecs = tuple(arr.metadata.codecs)
        sp = arr.store_path
        if not (arr.ndim == 1 and isinstance(sp.store, LocalStore) and len(codecs) == 2
                and codecs[0] == zarr.codecs.BytesCodec(endian="little")
                and isinstance(codecs[1], zarr.codecs.BloscCodec)):
            return self.zarr_read(name, (rows,), k * size)
        try:
            with open(os.path.join(str(sp.store.root), sp.path, _shard_key(arr, k)), "rb") as fh:
                raw = numcodecs.Blosc().decode(fh.read())
            return np.frombuffer(raw, dtype=np.dtype(str(arr.dtype)).newbyteorder("<"))[:rows.stop - rows.start]
        except Exception as err:  # noqa: BLE001 - a missing or corrupt chunk, whatever Blosc says
            raise StoreError(f"{self.where(name, k * size)} cannot be read ({type(err).__name__}: {err}); the store "
                             f"is corrupt: {refix(self.path)}") from None

    def length(self, e: int) -> int:
        size = _file_examples(self.arrays["length"])
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
        sp = att.store_path / _shard_key(att, k)
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
                                    f"`snakemake {path}`")
    group = _open_group(path)
    attrs = dict(group.attrs)
    if attrs.get("complete") is not True:
        raise IncompleteStoreError(f"{path} is not marked complete (complete={attrs.get('complete')!r}): the "
                                   f"extraction was interrupted or is still running; delete it and re-run "
                                   f"`snakemake {path}` (an interrupted run resumes from {partial_path(path)})")
    try:
        arrays = dict(group.arrays())  # from the consolidated metadata
    except Exception as err:  # noqa: BLE001
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
    diffs = _differences(attrs, expect or {})
    if diffs:
        lines = "; ".join(f"attribute {k!r} is {h!r} in the store but {w!r} is asked" for k, h, w in diffs)
        raise StoreMismatchError(f"{path} was extracted for other settings: {lines}. Delete {path} and re-run the "
                                 f"extraction (snakemake --forcerun extract_attention {path}), or ask for what the "
                                 f"store holds")
    optional = [v for v in OPTIONAL_DIMS if v in arrays]
    if attrs.get("value_norms") and "value_norm" not in optional:
        raise StoreError(f"{path} says value_norms=true but lacks `value_norm`: the store is damaged; {refix(path)}")
    holes = missing_chunks(path, tuple(DIMS) + tuple(optional), group=group, arrays=arrays)
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
    except Exception as err:  # noqa: BLE001
        raise StoreError(f"{path}: the coordinates layer/head cannot be read ({type(err).__name__}: {err}); "
                         f"{refix(path)}") from None
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    if check_rows and ds.sizes["example"]:
        reader.attention(np.array([0]))
        if optional:
            reader.read("value_norm", (np.array([0]),) + (slice(None),) * 3)
    return ds if chunks is None else ds.chunk(chunks)


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


def expected_attrs(config, task: str, variant: str) -> dict[str, Any]:
    """What an analysis asks of the store of (task, variant): the identity attributes the config determines.

    config: the typed Config (sections model, data.seed, data.max_length, attention.split, attention.examples,
    attention.keepbits, attention.spacy_model: :data:`EXPECT_SECTIONS`, to declare in a step's StepSpec).
    """
    att = config.attention
    return {"model": str(config.model), "task": task, "variant": variant, "split": att.split,
            "examples": att.examples, "seed": int(config.data.seed), "max_length": int(config.data.max_length),
            "keepbits": att.keepbits, "spacy_model": att.spacy_model}


#: config keys :func:`expected_attrs` reads (a step that opens a store declares them)
EXPECT_SECTIONS = ("model", "data.seed", "data.max_length", "attention.split", "attention.examples",
                   "attention.keepbits", "attention.spacy_model")


# --------------------------------------------------------------------------------------------------
# special tokens: the one definition every analysis uses


@dataclass(frozen=True)
class SpecialTokens:
    """The tokenizer's special ids a store records (attributes ``cls_token_id``, ``sep_token_id``).

    [CLS] = every real position (< length) holding ``cls_token_id`` (position 0 for BERT- and RoBERTa-style
    tokenizers); [SEP] = every real position holding ``sep_token_id`` (RoBERTa's ``</s></s>`` are two). The
    other real positions are the ordinary tokens (Q of docs/reference.md#notation). Picklable, for any Dask scheduler.
    """

    cls_token_id: int | None
    sep_token_id: int

    @classmethod
    def of(cls, attrs: Mapping[str, Any], where: str = "the attention store") -> "SpecialTokens":
        """The special ids of a store's attributes."""
        if attrs.get("sep_token_id") is None:
            raise StoreError(f"{where} has no sep_token_id attribute (docs/reference.md#store): not a store written by "
                             f"the extraction; delete it and re-run the extraction")
        cls_id = attrs.get("cls_token_id")
        return cls(None if cls_id is None else int(cls_id), int(attrs["sep_token_id"]))

    def masks(self, input_ids: np.ndarray, length: Any) -> tuple[np.ndarray, np.ndarray]:
        """([CLS] mask, [SEP] mask): bool, shaped like input_ids (..., T); length (...) the real lengths n."""
        ids = np.asarray(input_ids)
        real = np.arange(ids.shape[-1]) < np.asarray(length, dtype=np.int64)[..., None]
        sep = real & (ids == self.sep_token_id)
        if self.cls_token_id is None:
            return np.zeros(sep.shape, dtype=bool), sep
        return real & (ids == self.cls_token_id), sep


# --------------------------------------------------------------------------------------------------
# chunked reductions: the one way an analysis reads a store


class _Opaque:
    """Holds a task's arguments so that Dask neither walks nor hashes them (a chunk's words are thousands of
    small objects: walking them cost a tenth of a reduction)."""

    def __init__(self, value: Any):
        self.value = value


def _chunk_task(fn: Callable[..., Any], paths: list[str], variables: list[tuple[str, ...]], start: int, stop: int,
                kwargs: _Opaque, crop: bool = True) -> Any:
    blocks = [read_chunk(p, start, stop, names, crop=crop) for p, names in zip(paths, variables)]
    return fn(*blocks, **kwargs.value)


def map_chunks(fn: Callable[..., Any], stores: str | Path | Sequence[str | Path], *,
               variables: Sequence[str] | Sequence[Sequence[str]], compute_kwargs: Mapping[str, Any] | None = None,
               per_chunk: Callable[[int, int], Mapping[str, Any]] | None = None, crop: bool = True,
               **shared: Any) -> list[Any]:
    """``fn`` over every example chunk of one store, or of several aligned stores: one Dask task per chunk.

    stores: a store (path or fsspec URL) or a sequence of stores holding the same examples in the same order
    (the chunks are the first store's own). variables: the variables read, one sequence of names for every
    store or one sequence per store. A task carries paths, not data: it opens the store(s), reads examples
    [start, stop) as numpy arrays and returns ``fn(*blocks, **shared, **per_chunk(start, stop))`` (blocks:
    one dict name -> array per store; per_chunk gives small inputs of that chunk, e.g. its words). crop
    (default): `attention` is (e, L, H, m, m), cropped to the chunk's longest example m (:func:`read_chunk`),
    NaN past each example's length; fn must then index a map only within its example's length. A chunk
    is freed as soon as fn returns: memory holds at most one chunk per worker, whatever the store's size.
    fn must be picklable (a module-level function) for the process and distributed schedulers.
    compute_kwargs: for ``dask.compute`` (:func:`bertology.daskutil.compute_kwargs`).

    Returns fn's results in chunk order; the caller combines them.
    """

    import dask

    paths = [os.fspath(stores)] if isinstance(stores, (str, os.PathLike)) else [os.fspath(s) for s in stores]
    if variables and all(isinstance(v, str) for v in variables):
        names = [tuple(variables)] * len(paths)
    else:
        names = [tuple(v) for v in variables]
    if len(names) != len(paths):
        raise ValueError(f"map_chunks: {len(paths)} stores but {len(names)} variable lists")
    att = _array(_open_group(paths[0]), "attention", paths[0])
    size, E = _file_examples(att), int(att.shape[0])
    bounds = [(start, min(start + size, E)) for start in range(0, E, size)]
    tasks = [dask.delayed(_chunk_task, pure=False)(
        fn, paths, names, start, stop, _Opaque({**shared, **(dict(per_chunk(start, stop)) if per_chunk else {})}),
        crop) for start, stop in bounds]
    return list(dask.compute(*tasks, **dict(compute_kwargs or {}))) if tasks else []


def read_words(path: str | Path):
    """The words table beside a store (results/attention/{task}/words.parquet), its columns checked."""
    import pandas as pd

    from bertology.annotate import WORD_COLUMNS

    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"no words table at {str(path)!r}; it is written with the attention store: "
                                f"`snakemake {path}`")
    words = pd.read_parquet(path)
    missing = [c for c in WORD_COLUMNS if c not in words.columns]
    if missing:
        raise StoreError(f"{path} lacks column(s) {missing}: not a words table of the annotation step (columns "
                         f"{', '.join(WORD_COLUMNS)}); delete it and re-run `snakemake {path}`")
    return words

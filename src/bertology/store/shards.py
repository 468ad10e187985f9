"""The shard files of `attention` in :data:`LAYOUT`: written and read here directly, in Zarr v3's sharding format.

One shard file per example chunk (chunk = attention.chunk_size examples) holds one inner chunk per example
(1, L, H, Q, K), so one map or one example is read and decompressed alone. zarr-python writes and reads these
files too (xr.open_zarr, any Zarr v3 reader); the extraction and the reductions do it here because zarr-python's
per-inner-chunk overhead made a shard slower to write than one big chunk (extraction 0.84x of a plain forward
instead of 0.93x) and a reduction's per-example reads no faster than the earlier layout's
(bench/bench_store_layout.py). A shard file: the encoded inner chunks one after another (each: the array's
filters, little-endian bytes, Blosc, then its CRC32C, 4 bytes little-endian), then the index, one (offset, size)
little-endian uint64 pair per inner chunk in C order (2**64 - 1 twice: absent), and the index's CRC32C.
tests/test_store_layout.py checks that a file written here is byte for byte the one zarr-python writes.
Imports bertology.store.schema and bertology.store.files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertology.store.files import file_key
from bertology.store.schema import StoreError, damaged_bytes, refix

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


def crc32c(data: bytes) -> bytes:
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
    for i, data in enumerate(encode_examples(fmt.blosc, block)):
        parts += [data, crc32c(data)]
        index[i] = (offset, len(data) + 4)
        offset += len(data) + 4
    raw = index.tobytes()
    return b"".join(parts) + raw + crc32c(raw)


def encode_examples(blosc: Any, block: np.ndarray) -> list[bytes]:
    """Blosc of each example of block (e, L, H, Q, K): e byte strings.

    Inside a :func:`blosc_threads` context of n > 1 threads, n examples are compressed at once, each by Blosc's
    own per-call context on one thread (numcodecs releases the GIL): one example of 1 MiB blocks (2.4 MB for
    6 x 12 x 128 x 128 float16) keeps n threads only partly busy when they share it. Outside such a context
    (or with one example), one after another as the caller's Blosc settings say. Either way each string decodes
    to the same values and has the same length; with one thread an example its blocks are also in order, so its
    bytes are the same on every run (Blosc's threads in one call store blocks in the order they finish).
    """
    import numcodecs.blosc as nb

    n = nb.get_nthreads()
    if nb.use_threads is not True or n <= 1 or block.shape[0] <= 1:
        return [blosc.encode(x) for x in block]
    from concurrent.futures import ThreadPoolExecutor

    nb.use_threads = False  # the blosc_threads context restores it on exit; restored here too
    try:
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="blosc") as pool:
            return list(pool.map(blosc.encode, block))
    finally:
        nb.use_threads = True


def write_shard(arr, k: int, block: np.ndarray, fmt: ShardFormat) -> None:
    """Write shard file k of `attention` (examples k * per_shard ...) through the array's store."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    data = default_buffer_prototype().buffer.from_bytes(encode_shard(block, fmt))
    sync((arr.store_path / file_key(arr, k)).set(data))


#: every float16 number as float32, indexed by its bits: a gather from this 256 KiB table converts float16 to float32
#: about twice as fast as numpy's cast, bit for bit the same (the table IS numpy's cast of every float16)
F16_TO_F32 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def as_float32(a: np.ndarray) -> np.ndarray:
    """A new float32 array of `a`'s values, any shape and strides (float16: through :data:`F16_TO_F32`)."""
    if a.dtype == np.float16:
        return F16_TO_F32.take(a.view(np.uint16))
    return np.array(a, dtype=np.float32)


def _decoded(arr, fmt: ShardFormat, start: int, length: np.ndarray, where: str, path: str | Path):
    """Examples start.. (one per length, all in one shard) of `attention`, each decoded alone: yields (i, n, inner)
    with inner (L, H, Q, K) the stored inner chunk of example start + i, a scratch array overwritten by the next.

    Reads the shard file once; checks the index's and each inner chunk's CRC32C. A missing file, an absent
    inner chunk, a checksum that does not match or an undecodable chunk raise StoreError naming them and the fix.
    """
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    if not len(length):
        return
    k, first = divmod(int(start), fmt.per_shard)
    buf = sync((arr.store_path / file_key(arr, k)).get(prototype=default_buffer_prototype()))
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
        yield i, n, scratch


def read_shard_cropped(arr, fmt: ShardFormat, start: int, length: np.ndarray, where: str,
                       path: str | Path) -> np.ndarray:
    """Examples start.. (one per length, all in one shard) of `attention`, each decoded alone and cropped:
    (e, L, H, m, m) with m the longest length, NaN past each example's length.

    Reads the shard file once; checks the index's and each inner chunk's CRC32C. A missing file, an absent
    inner chunk, a checksum that does not match or an undecodable chunk raise StoreError naming them and the fix.
    """
    m = int(length.max()) if len(length) else 0
    out = np.full((len(length),) + fmt.inner[:-2] + (m, m), np.nan, dtype=fmt.dtype)
    for i, n, inner in _decoded(arr, fmt, start, length, where, path):
        out[i, ..., :n, :n] = inner[..., :n, :n]
    return out


def read_shard_examples(arr, fmt: ShardFormat, start: int, length: np.ndarray, where: str,
                        path: str | Path) -> list[np.ndarray]:
    """Examples start.. (one per length, all in one shard) of `attention`, each decoded alone and cropped to its
    own length n, as float32: one (L, H, n, n) array per example, nothing padded (:func:`read_shard_cropped`'s
    reads and checks; the values converted once, exactly, by :func:`as_float32`)."""
    return [as_float32(inner[..., :n, :n]) for _, n, inner in _decoded(arr, fmt, start, length, where, path)]


def shard_index(tail: bytes, fmt: ShardFormat, where: str, path: str | Path) -> np.ndarray:
    """The (per_shard, 2) (offset, size) index of a shard file from its last ``fmt.index_bytes`` bytes, its
    CRC32C checked (StoreError naming `where` and the fix if it does not match)."""
    if len(tail) != fmt.index_bytes or crc32c(tail[:-4]) != tail[-4:]:
        raise StoreError(f"{where}: the shard index does not match its checksum; the store is corrupt: {refix(path)}")
    return np.frombuffer(tail[:-4], dtype="<u8").reshape(fmt.per_shard, 2)


def decode_inner(data: bytes | None, fmt: ShardFormat, out: np.ndarray, what: str, path: str | Path) -> np.ndarray:
    """Decode one inner chunk (its encoded bytes followed by their CRC32C; None: absent from the index) into
    `out` (fmt.inner), its checksum checked; StoreError naming `what` (the example) and the fix otherwise."""
    if data is None:
        raise StoreError(f"{what} is missing; the store is damaged: {refix(path)}")
    if len(data) < 4 or crc32c(data[:-4]) != data[-4:]:
        raise StoreError(f"{what} does not match its checksum; the store is corrupt: {refix(path)}")
    try:
        fmt.blosc.decode(data[:-4], out=out)
    except (ValueError, RuntimeError) as err:
        if not damaged_bytes(err):  # not Blosc's own error: a bug keeps its type and traceback
            raise
        raise StoreError(f"{what} cannot be decoded ({type(err).__name__}: {err}); the store is corrupt: "
                         f"{refix(path)}") from None
    return out

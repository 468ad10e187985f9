"""The codecs of a store's arrays: how each variable is compressed and checked on disk.

Float16 attention is close to incompressible (about 13 bits of entropy per value); Blosc zstd-1 with byte shuffle
stores the real values at about 85% of their size and the NaN padding at almost nothing (bench/bench_extract.py).
Imports only bertology.store.schema.
"""

from __future__ import annotations

import contextlib
import warnings

from bertology.store.schema import LAYOUT, LEGACY_LAYOUT, OPTIONAL_DIMS

# zarr-python warns on every open of an array with a numcodecs filter (BitRound, keepbits stores); it reads them
warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")

# The attention compressor (whatever the precision): Blosc zstd level 1, byte shuffle, 1 MiB blocks (see
# bench/bench_store.py); recorded in the `codec` attribute, so a partial store of another codec is not resumed.
# Re-encoding the inner chunks of 256 real MRPC train examples (issue 23) found nothing smaller: 91.81 MB here
# against 91.81-91.86 MB with 512 KiB to 4 MiB blocks, 92.25 / 92.10 MB with zstd 2 / 3, 100.5 MB with Blosc's
# automatic block size, 101.7 MB with bit shuffle and 119.2 MB with lz4.
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


def attention_filters(keepbits: int | None) -> list:
    """The array-to-array codecs of `attention`: [] (lossless) or [BitRound(keepbits)], stored in its metadata."""
    import zarr

    if keepbits is None:
        return []
    with warnings.catch_warnings():  # "numcodecs codecs are not in the Zarr v3 spec": zarr-python reads them
        warnings.simplefilter("ignore")
        return [zarr.codecs.BitRound(keepbits=int(keepbits))]


#: the small variables whose chunks are plain zstd level 19 with zstd's own checksum in :data:`LAYOUT` (see
#: :func:`compressors`); the others are Blosc zstd 9 (zstd's level 22), then a CRC32C
ZSTD19 = ("token_type_ids", "segment", "word_ids")
#: the small variables Blosc bit-shuffles (the others: byte shuffle)
BITSHUFFLE = ("length", "example_idx")


def compressors(name: str, layout: str) -> list:
    """The bytes-to-bytes codecs of variable `name` in `layout`.

    The small variables of :data:`LAYOUT` (chosen by measurement on the store of all 3668 MRPC train pairs, 58
    chunk files a variable; bytes, and ms to compress one 64-example chunk on the shared 2-core machine, load 8):
    token_type_ids, segment and word_ids zstd 19 with zstd's checksum (11,755 / 14,982 / 56,981 bytes against
    12,901 / 16,149 / 65,393 with Blosc zstd 9, at the same cost, about 15 to 22 ms a chunk); input_ids Blosc zstd 9
    with byte shuffle (277,702; zstd 19 alone: 285,636); length and example_idx Blosc zstd 9 with bit shuffle
    (5,702 / 4,073 against 6,132 / 6,445 with byte shuffle), each followed by a CRC32C, as value_norm's chunks
    (Blosc zstd 1): every chunk of every variable is checksummed. :data:`LEGACY_LAYOUT` (what bertology <= 0.1
    wrote): Blosc zstd 3, no checksum.
    """
    import zarr

    if name == "attention":
        return attention_compressors(layout)
    crc = [] if layout == LEGACY_LAYOUT else [zarr.codecs.Crc32cCodec()]
    if name in OPTIONAL_DIMS:
        # value_norm: zstd 1 (zstd 9 took longer than the forward pass itself: 2.8 s vs 2.4 s for 256 MRPC pairs)
        return [zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")] + crc
    if layout == LEGACY_LAYOUT:
        return [zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")]
    if name in ZSTD19:
        return [zarr.codecs.ZstdCodec(level=19, checksum=True)]
    shuffle = "bitshuffle" if name in BITSHUFFLE else "shuffle"
    return [zarr.codecs.BloscCodec(cname="zstd", clevel=9, shuffle=shuffle)] + crc


def metadata_config(layout: str) -> dict:
    """zarr-python's config for writing a store's JSON metadata: compact in :data:`LAYOUT` (7.6 kB less than
    zarr's default indent of 2 for the 10 zarr.json files of a store, the consolidated copy included); the default
    in :data:`LEGACY_LAYOUT`."""
    return {"json_indent": None} if layout == LAYOUT else {}


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

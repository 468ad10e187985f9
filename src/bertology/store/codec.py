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
# Re-encoding the inner chunks of 256 real MRPC train examples found nothing smaller: 91.81 MB here
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


#: the zstd level of the small variables whose chunks are plain zstd with zstd's own checksum in :data:`LAYOUT` (see
#: :func:`compressors`); the others are Blosc zstd (:data:`BLOSC_LEVEL`), then a CRC32C
ZSTD_LEVEL = {"token_type_ids": 3, "segment": 3, "word_ids": 12}
#: the Blosc zstd level of the other small variables (Blosc's 5 is zstd's 9, Blosc's 9 zstd's 22)
BLOSC_LEVEL = {"input_ids": 5, "length": 9, "example_idx": 9}
#: the small variables Blosc bit-shuffles (the others: byte shuffle)
BITSHUFFLE = ("length", "example_idx")


def compressors(name: str, layout: str) -> list:
    """The bytes-to-bytes codecs of variable `name` in `layout`.

    The small variables of :data:`LAYOUT`, chosen by measurement on real MRPC train pairs (12 chunks of 64
    examples; bytes of the 12 chunks, and ms to compress one chunk on the 2-core machine, 26 Nov 2026): the cost
    of a high zstd level on these small chunks is its set-up, about 10 to 24 ms a chunk whatever the bytes, which
    made them cost more than the chunk's whole `attention` write. token_type_ids and segment zstd 3
    (2,045 / 2,905 bytes; zstd 19: 2,395 / 3,049 at 15 / 14 ms a chunk, zstd 3 about 0.05 ms), word_ids zstd 12
    (13,332 bytes, 2 ms; zstd 19: 11,904 at 24 ms), each with zstd's checksum; input_ids Blosc zstd 5 with byte
    shuffle (59,416 bytes; Blosc zstd 9: 57,985 at 11 ms a chunk); length and example_idx Blosc zstd 9 with bit
    shuffle (a few hundred bytes: cheap at any level), each followed by a CRC32C, as value_norm's chunks (Blosc
    zstd 1): every chunk of every variable is checksummed. Each is smaller than the earlier layout's Blosc
    zstd 3 with byte shuffle but input_ids (+1.3%); stores written with the earlier levels (zstd 19 and Blosc
    zstd 9) read the same (the codecs are in each array's metadata). :data:`LEGACY_LAYOUT` (what bertology <=
    0.1 wrote): Blosc zstd 3, no checksum.
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
    if name in ZSTD_LEVEL:
        return [zarr.codecs.ZstdCodec(level=ZSTD_LEVEL[name], checksum=True)]
    shuffle = "bitshuffle" if name in BITSHUFFLE else "shuffle"
    return [zarr.codecs.BloscCodec(cname="zstd", clevel=BLOSC_LEVEL.get(name, 9), shuffle=shuffle)] + crc


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

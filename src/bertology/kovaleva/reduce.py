"""Kovaleva et al.'s per-head statistics of a store: the kernel of the one-pass reduction and its tables.

:class:`KovalevaKernel` is the per-example kernel (:class:`bertology.attention.onepass.ExampleKernel`) of patterns (4.1),
dependency relations (4.2), features (4.4) and [CLS] attention (4.5): each example adds to a small
:class:`Partial` of running sums (sum, sum of squares, count per head and feature; class counts), partials are
added, and means / standard deviations (ddof=1) / counts come out at the end. The one-pass reduction
(:func:`bertology.attention.onepass.reduce_store`) runs it in the same read of a store as every other store analysis
(Clark et al.'s entropy and parser, Pande et al.'s sieve scores); :func:`store_stats` runs it alone.

:func:`store_pair` reads the pretrained and fine-tuned stores chunk-aligned in one pass: cosine (4.3) and the
paired feature differences (:func:`bertology.attention.onepass.run_chunks`).

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
from bertology.attention.negation import negation_list
from bertology.attention.onepass import (Example, ExampleKernel, Job, Outputs, StoreInfo, example_groups, reduce_store,
                               run_chunks)
from bertology.stats.moments import Moments, feature_moments_table, head_grid, moments_table
from bertology.store import SpecialTokens, StoreError, open_store

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# partial sums


@dataclass
class Partial:
    """What the examples of a chunk contribute. Shapes: features (L, H, F); cls (H, F'); dependency (L, H);
    patterns (L, H, C) class counts; examples: how many examples were reduced."""

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


# --------------------------------------------------------------------------------------------------
# words


@dataclass
class ExampleWords:
    """The word annotation of one example, indexed by word number: flags feature -> (W,) bool and dependency
    links (dependent, head)."""

    flags: dict[str, np.ndarray]
    links: list[tuple[int, int]] = field(default_factory=list)


def prepare_words(words: pd.DataFrame, *, negation: str) -> dict[int, ExampleWords]:
    """The words table (results/data/{task}/words.parquet) -> example_idx -> ExampleWords (feature flags by
    word number, dependency links).

    negation: the negation word list (``analysis.features.negation``): ``paper`` (Kovaleva et al.'s footnote 6)
    or ``extended`` (:mod:`bertology.attention.negation`).
    """
    negation_list(negation)
    if words.empty:
        return {}
    flags = feat.word_feature_flags(words, negation=negation)
    out: dict[int, ExampleWords] = {}
    word = words["word"].to_numpy(np.int64)
    head = words["head"].to_numpy(np.int64)
    exi = words["example_idx"].to_numpy(np.int64)
    for group in example_groups(exi):
        w = word[group]
        size = int(w.max()) + 1
        f: dict[str, np.ndarray] = {}
        for name in feat.WORD_FEATURES:
            arr = np.zeros(size, bool)
            arr[w] = flags[name].to_numpy(bool)[group]
            f[name] = arr
        out[int(exi[group[0]])] = ExampleWords(f, rel.dependency_links(w, head[group]))
    return out


def _chunk_words(by_example: Mapping[int, ExampleWords], idx: np.ndarray) -> dict[int, ExampleWords]:
    """The ExampleWords of one chunk's examples `idx` (E,) only (a task carries its own words)."""
    return {int(i): by_example[int(i)] for i in idx if int(i) in by_example}


# --------------------------------------------------------------------------------------------------
# the kernel


_CNN_CACHE: dict[str, pat.PatternCNN] = {}


def _cnn(path: str) -> pat.PatternCNN:
    if path not in _CNN_CACHE:
        _CNN_CACHE[path] = pat.PatternCNN.load(path)
    return _CNN_CACHE[path]


def example_stats(ex: Example, words: ExampleWords | None, classifier: str) -> dict[str, np.ndarray | None]:
    """Every Kovaleva statistic of one example (:class:`bertology.attention.onepass.Example`, attention (L, H, n, n)).

    Returns features (L, H, F), cls (H, F'), dependency (L, H), patterns (L, H) class indices (rule) or None
    (CNN classification is batched per chunk).
    """
    attn, n = ex.attention, ex.n
    names_all = tuple(dict.fromkeys(feat.FEATURES + feat.CLS_FEATURES))
    tokens = feat.feature_tokens(ex.word_ids, ex.cls, ex.sep, words.flags if words else None, names_all)
    mask = rel.link_pair_mask(ex.word_ids, n, words.links) if words else np.zeros((n, n), bool)
    return {
        "features": feat.feature_scores(attn, tokens),
        "cls": feat.cls_scores(attn[-1], tokens, query=n - 1 if ex.causal else 0),
        "dependency": rel.relation_scores(attn, mask),
        "patterns": (pat.classify_rule_exact(attn, ex.cls | ex.sep, ex.segment[:n])
                     if classifier == "rule" else None),
    }


@dataclass
class _ChunkPartial:
    """A chunk's Partial while its examples are added, with the maps the CNN classifies at its end."""

    part: Partial
    cnn_maps: list[np.ndarray] = field(default_factory=list)


@dataclass(frozen=True)
class KovalevaKernel(ExampleKernel):
    """Patterns, features, [CLS] and dependency relations of a store, example by example.

    classifier: ``rule`` or the path of a trained pattern CNN (``analysis.patterns.classifier``); negation:
    ``analysis.features.negation``, the negation word list.
    """

    classifier: str = "rule"
    negation: str = "paper"
    name: str = "kovaleva"
    variables: tuple[str, ...] = ("attention", "input_ids", "word_ids", "segment", "length", "example_idx")

    def prepare(self, words: pd.DataFrame | None, info: StoreInfo) -> dict[int, ExampleWords]:
        return prepare_words(words, negation=self.negation) if words is not None else {}

    def select(self, prepared: Mapping[int, ExampleWords], example_idx: np.ndarray) -> dict[int, ExampleWords]:
        return _chunk_words(prepared, example_idx)

    def empty(self, info: StoreInfo) -> _ChunkPartial:
        return _ChunkPartial(empty_partial(info.layers, info.heads))

    def add(self, part: _ChunkPartial, ex: Example, words: ExampleWords | None) -> None:
        stats = example_stats(ex, words, self.classifier)
        p = part.part
        p.features.add(stats["features"])
        p.cls.add(stats["cls"])
        p.dependency.add(stats["dependency"])
        if stats["patterns"] is not None:
            p.patterns += np.eye(len(pat.CLASSES), dtype=np.int64)[stats["patterns"]]
        else:
            part.cnn_maps.extend(ex.attention.reshape(-1, ex.n, ex.n))
        p.examples += 1

    def finish_chunk(self, part: _ChunkPartial, info: StoreInfo) -> Partial:
        if part.cnn_maps:
            pred = _cnn(self.classifier).predict(part.cnn_maps).reshape(-1, info.layers, info.heads)
            part.part.patterns += np.eye(len(pat.CLASSES), dtype=np.int64)[pred].sum(0)
        return part.part

    @classmethod
    def build(cls, job: Job) -> KovalevaKernel:
        """analysis.patterns.classifier (``rule``, or the rule's input ``classifier``: a trained CNN) and
        analysis.features.negation of the job's config."""
        cfg = job.config.analysis
        classifier = "rule" if cfg.patterns.classifier == "rule" else str(job.inputs["classifier"])
        return cls(classifier=classifier, negation=cfg.features.negation)

    def outputs(self, result: Partial, job: Job) -> Outputs:
        """patterns.csv, features.csv, cls.csv, relations.csv (dependency arcs, after the FrameNet rows of the
        rule's input ``framenet`` when it gives one) and their MLflow metrics."""
        layers, _ = result.dependency.total.shape
        patterns = patterns_table(result.patterns)
        features = features_table(result)
        relations = relations_table(result.dependency, "dependency", job.config.analysis.relations.percentile)
        framenet = job.inputs.get("framenet")
        if framenet is not None:
            relations = pd.concat([pd.read_csv(framenet), relations], ignore_index=True)
        metrics: list[tuple[dict[str, float], int | None]] = [
            ({f"pattern_fraction.{row['class'].replace('+', '_')}": float(row["fraction"])
              for _, row in patterns[patterns["layer"] == -1].iterrows()}, None)]
        for f in ("cls", "sep"):
            for layer, value in features[features["feature"] == f].groupby("layer")["mean"].mean().items():
                metrics.append(({f"feature_by_layer.{f}": float(value)}, int(layer)))
        return Outputs({"patterns": patterns, "features": features, "cls": cls_table(result, layers),
                        "relations": relations}, metrics)


# --------------------------------------------------------------------------------------------------
# stores


def store_stats(store: str | Path, words: pd.DataFrame | None, *, classifier: str, negation: str,
                compute_kwargs: Mapping[str, Any] | None = None,
                expect: Mapping[str, Any] | None = None) -> Partial:
    """One read of a store -> the summed Partial of patterns, features, cls and dependency relations (the
    Kovaleva kernel alone; the workflow runs it with every other store analysis, :mod:`bertology.attention.onepass`).

    store: an attention store (validated by :func:`bertology.store.open_store`); words: the words table
    (None: no word features, no dependency links); negation: ``analysis.features.negation``.
    expect: the attributes the store must have (:func:`bertology.store.expected_attrs`).
    """
    kernel = KovalevaKernel(classifier=classifier, negation=negation)
    return reduce_store(store, [kernel], words, expect=expect, compute_kwargs=compute_kwargs)[kernel.name]


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
    by_example = prepare_words(words, negation=negation) if words is not None else {}
    parts, _ = run_chunks(_pair_task, [pretrained, finetuned], variables=PAIR_VARS, opened=[da, db],
                          select=lambda idx: {"words": _chunk_words(by_example, idx)},
                          compute_kwargs=compute_kwargs, specials=SpecialTokens.of(da.attrs, str(pretrained)))
    return sum(parts[1:], parts[0])


def features_diff_table(part: PairPartial) -> pd.DataFrame:
    """features_diff.csv: layer, head, feature, mean, std, n of the per-example fine-tuned minus pretrained
    feature score (paired: the same examples, the same tokens)."""
    return feature_moments_table(part.features_diff, feat.FEATURES)


# --------------------------------------------------------------------------------------------------
# tables


def features_table(part: Partial) -> pd.DataFrame:
    """features.csv: layer, head, feature, mean, std, n."""
    return feature_moments_table(part.features, feat.FEATURES)


def cls_table(part: Partial, layers: int) -> pd.DataFrame:
    """cls.csv: layer (the last, 0-based), head, feature, mean, std, n."""
    frames = []
    for f, name in enumerate(feat.CLS_FEATURES):
        df = moments_table(part.cls[None, :, f], feature=name)
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
    lay, hd = head_grid(layers, heads)
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

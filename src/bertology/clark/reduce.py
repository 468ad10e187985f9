"""Clark et al.'s statistics of a store: the kernel of attention entropy (3.3) and heads as dependency parsers
(4.2) in the one-pass reduction (:mod:`bertology.attention.onepass`), and their tables.

The task stores run it with every other store analysis (entropy.csv and parser.csv of the spaCy arcs, in the same
read as Kovaleva's statistics and the sieve scores); the gold-syntax stores run its parser alone
(:func:`store_parser`).

Glossary: L layers, H heads, n real length of one example, F entropy features.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.clark import entropy as ent
from bertology.clark import parser as prs
from bertology.attention.onepass import Example, ExampleKernel, Job, Outputs, StoreInfo, example_groups, reduce_store
from bertology.stats.moments import Moments, feature_moments_table


@dataclass
class Partial:
    """What examples contribute: entropy (L, H, F) pooled over query rows; parser: per-relation counts."""

    entropy: Moments
    parser: prs.ParserCounts

    def __add__(self, other: "Partial") -> "Partial":
        return Partial(self.entropy + other.entropy, self.parser + other.parser)

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads)."""
        return self.entropy.total.shape[:2]


def arcs_by_example(words: pd.DataFrame) -> dict[int, prs.Arcs]:
    """The words table -> example_idx -> its Arcs (rows in table order)."""
    exi = words["example_idx"].to_numpy(np.int64)
    word, head = words["word"].to_numpy(np.int64), words["head"].to_numpy(np.int64)
    dep = words["dep"].astype(str).to_numpy(object)
    return {int(exi[g[0]]): prs.Arcs.from_words(word[g], head[g], dep[g]) for g in example_groups(exi)}


@dataclass(frozen=True)
class ClarkKernel(ExampleKernel):
    """Attention entropy (entropy=False: left out, for the gold-syntax stores) and heads as parsers on the words
    table's arcs, example by example."""

    entropy: bool = True
    name: str = "clark"
    variables: tuple[str, ...] = ("attention", "word_ids", "length", "example_idx")

    def prepare(self, words: pd.DataFrame | None, info: StoreInfo) -> dict[int, prs.Arcs]:
        return arcs_by_example(words) if words is not None and len(words) else {}

    def select(self, prepared: Mapping[int, prs.Arcs], example_idx: np.ndarray) -> dict[int, prs.Arcs]:
        return {int(i): prepared[int(i)] for i in example_idx if int(i) in prepared}

    def empty(self, info: StoreInfo) -> Partial:
        return Partial(Moments.zeros((info.layers, info.heads, len(ent.FEATURES))), prs.ParserCounts())

    def add(self, part: Partial, ex: Example, words: prs.Arcs | None) -> None:
        if self.entropy:
            part.entropy.add_sums(*ent.example_entropy(ex.attention, ex.classified, ex.row_sums, causal=ex.causal))
        if words is not None:
            part.parser.add_example(ex.attention, ex.word_ids, words, causal=ex.causal)

    def outputs(self, result: Partial, job: Job) -> Outputs:
        """entropy.csv and parser.csv (heads as parsers on the words table's spaCy arcs) and their metrics."""
        entropy, parser = entropy_table(result), parser_table(result)
        return Outputs({"entropy": entropy, "parser": parser},
                       clark_metrics(entropy, parser, skipped=result.parser.skipped))


def store_parser(store: str | Path, words: pd.DataFrame, *, compute_kwargs: Mapping[str, Any] | None = None,
                 expect: Mapping[str, Any] | None = None) -> tuple[prs.ParserCounts, int, int]:
    """One pass over a store -> (ParserCounts of the words table's arcs, layers, heads): the parser kernel alone
    (the gold-syntax stores). expect: the attributes the store must have (:func:`bertology.store.expected_attrs`)."""
    kernel = ClarkKernel(entropy=False)
    part = reduce_store(store, [kernel], words, expect=expect, compute_kwargs=compute_kwargs)[kernel.name]
    return (part.parser, *part.shape)


def entropy_table(part: Partial) -> pd.DataFrame:
    """entropy.csv: layer, head, feature, mean, std, n (features of :data:`bertology.clark.entropy.FEATURES`)."""
    return feature_moments_table(part.entropy, ent.FEATURES)


def parser_table(part: Partial) -> pd.DataFrame:
    """parser.csv: heads as dependency parsers on the words table's arcs (:func:`bertology.clark.parser.parser_table`)."""
    return prs.parser_table(part.parser, *part.shape)


#: relations reported as MLflow metrics need at least this many scored arcs
METRIC_MIN_N = 20


def clark_metrics(entropy: pd.DataFrame | None, parser: pd.DataFrame, *, skipped: int = 0,
                  prefix: str = "") -> list[tuple[dict[str, float], int | None]]:
    """MLflow metrics of Clark et al.'s analyses of one store, as (metrics, step or None) in order.

    entropy (may be None): ``entropy_by_layer.{all,cls,uniform}`` stepped by layer (mean over heads).
    parser: per relation with >= METRIC_MIN_N arcs, ``parser.{relation}.best`` (best head, either direction) and
    ``parser.{relation}.baseline``; ``parser.arcs`` and ``parser.arcs_skipped``.
    """
    from bertology.clark.clark_figures import best_per_relation

    out: list[tuple[dict[str, float], int | None]] = []
    if entropy is not None and len(entropy):
        for feature in ("all", "cls", "uniform"):
            sub = entropy[entropy["feature"] == feature]
            for layer, value in sub.groupby("layer")["mean"].mean().items():
                if np.isfinite(value):
                    out.append(({f"{prefix}entropy_by_layer.{feature}": float(value)}, int(layer)))
    best = best_per_relation(parser) if len(parser) else parser
    metrics = {f"{prefix}parser.arcs_skipped": float(skipped)}
    if len(best):
        metrics[f"{prefix}parser.arcs"] = float(best["n"].sum())
    for _, row in best[best["n"] >= METRIC_MIN_N].iterrows() if len(best) else []:
        name = str(row["relation"]).replace(":", "_")
        metrics[f"{prefix}parser.{name}.best"] = float(row["accuracy"])
        metrics[f"{prefix}parser.{name}.baseline"] = float(row["baseline_accuracy"])
    out.append((metrics, None))
    return out

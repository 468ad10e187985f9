"""Gu et al. 2024's attention sink on a store, every model alike: each example's alpha_0 per head, in the one read
of a store (docs/reference.md#sinks).

For one example of real length n (the store's ``length``, specials included, padding excluded) and one head's map A
(n, n), cropped to the real block, in the store's own token order::

    alpha_0 = (1 / n) sum_{t=0}^{n-1} A[t, 0]

the mean over every real query row t, t = 0 included, of the attention to position 0, the first token whatever it
is ([CLS] for BERT-like encoders, <s> for RoBERTa or MPNet, BOS or the first word for a decoder). This is Gu et
al.'s ``compute_attention_sink`` (``eval_sink_open_source.py``) for key 0: it divides the column of key k summed
over every query row by T - k, so key 0's score is the mean over all T rows, row 0 included; their sequences are
cut to exactly T = 64 tokens, one at a time, so no row is padding. Here a whole example is read (up to
``data.max_length``) and padding rows never enter. Rows are not renormalised (Gu's are not either); a decoder's
causal row t covers keys 0..t, so its A[0, 0] = 1 counts as Gu's does. Examples of every length (a lone token:
alpha_0 = A[0, 0]) are read.

Tables: ``sinks.csv`` one row per example x layer x head (:data:`SINK_COLUMNS`); ``sink_heads.csv`` per head
(:data:`bertology.registry.MOMENTS`'s columns) of the features ``alpha_0`` (its mean, std and n over the examples)
and ``over`` (1 where an example's alpha_0 > epsilon, 0.3, else 0: its mean is the head's share of sink examples).

Glossary: E examples, L layers, H heads, n real length of one example.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bertology.attention.onepass import Example, ExampleKernel, Job, Outputs, StoreInfo
from bertology.decoders.heads import SINK_EPSILON

#: sinks.csv's columns: the example (its idx in the store), the head, alpha_0 and the query rows averaged
SINK_COLUMNS = ("example_idx", "layer", "head", "alpha_0", "n")
#: sink_heads.csv's features
HEAD_FEATURES = ("alpha_0", "over")
HEAD_COLUMNS = ("layer", "head", "feature", "mean", "std", "n")


def first_token_alpha(attention: np.ndarray) -> np.ndarray:
    """attention (L, H, n, n) of one example cropped to its real length n >= 1 -> (L, H) float64: alpha_0, the mean
    over the n query rows t = 0 .. n-1 of A[t, 0] (the float16 values summed in float64, exact, then divided by n)."""
    n = attention.shape[-1]
    if n < 1 or attention.shape[-2] != n:
        raise ValueError(f"attention of shape {attention.shape} is not (L, H, n, n) with n >= 1")
    return attention[..., :, 0].sum(axis=-1, dtype=np.float64) / n


def sink_table(example_idx: np.ndarray, alpha: np.ndarray, rows: np.ndarray) -> pd.DataFrame:
    """sinks.csv: example_idx (E,), alpha (E, L, H) alpha_0 per example and head, rows (E,) the query rows each
    example's alpha_0 averages (its real length) -> one row per example x layer x head (:data:`SINK_COLUMNS`),
    examples in the given order, then layer, then head."""
    e, n_layers, n_heads = alpha.shape
    idx, layer, head = np.meshgrid(np.asarray(example_idx, dtype=np.int64), np.arange(n_layers), np.arange(n_heads),
                                   indexing="ij")
    return pd.DataFrame({"example_idx": idx.ravel(), "layer": layer.ravel(), "head": head.ravel(),
                         "alpha_0": alpha.ravel(), "n": np.repeat(np.asarray(rows, dtype=np.int64),
                                                                   n_layers * n_heads)}, columns=list(SINK_COLUMNS))


def head_table(sinks: pd.DataFrame, epsilon: float = SINK_EPSILON) -> pd.DataFrame:
    """sink_heads.csv from sinks.csv's rows: per head and feature (``alpha_0``; ``over``: 1 where alpha_0 >
    epsilon, else 0) the mean, std (ddof 1; empty for one example) and n over the examples."""
    values = sinks.assign(over=(sinks["alpha_0"].to_numpy(float) > epsilon).astype(float))
    long = values.melt(id_vars=["layer", "head"], value_vars=list(HEAD_FEATURES), var_name="feature")
    stats = long.groupby(["layer", "head", "feature"], sort=False)["value"].agg(["mean", "std", "count"])
    out = stats.reset_index().rename(columns={"count": "n"})
    order = {f: i for i, f in enumerate(HEAD_FEATURES)}
    out = out.sort_values(["layer", "head", "feature"], key=lambda c: c.map(order) if c.name == "feature" else c)
    return out.reset_index(drop=True)[list(HEAD_COLUMNS)]


@dataclass
class SinkPartial:
    """The examples read so far: their idx, alpha_0 (L, H) and real length, in store order."""

    example_idx: list[int] = field(default_factory=list)
    alpha: list[np.ndarray] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class SinkKernel(ExampleKernel):
    """Per example and head, Gu et al.'s alpha_0: the mean attention to position 0 over the example's real query
    rows (every example, a lone token included)."""

    name: str = "sinks"
    short_examples: bool = True

    def empty(self, info: StoreInfo) -> SinkPartial:
        return SinkPartial()

    def add(self, part: SinkPartial, ex: Example, words) -> None:
        # ex.attention (L, H, n, n) float32, cropped to the store's real length ex.n
        part.example_idx.append(ex.example_idx)
        part.alpha.append(first_token_alpha(ex.attention))
        part.rows.append(ex.n)

    def combine(self, parts: list[SinkPartial], info: StoreInfo) -> SinkPartial:
        """Every chunk's examples, in chunk order (= store order)."""
        out = SinkPartial()
        for p in parts:
            out.example_idx += p.example_idx
            out.alpha += p.alpha
            out.rows += p.rows
        return out

    def outputs(self, result: SinkPartial, job: Job) -> Outputs:
        """sinks.csv, sink_heads.csv and ``sinks.rate`` (Gu's Sink_0^epsilon as a fraction: the share of example x
        layer x head with alpha_0 > epsilon) with ``sinks_by_layer.alpha_0`` (the mean over a layer's heads and
        examples, step = layer)."""
        ds = job.ds
        layers, heads = int(ds.sizes["layer"]), int(ds.sizes["head"])
        alpha = np.stack(result.alpha) if result.alpha else np.zeros((0, layers, heads))
        sinks = sink_table(np.asarray(result.example_idx, dtype=np.int64), alpha, np.asarray(result.rows))
        metrics: list[tuple[dict[str, float], int | None]] = []
        if alpha.size:
            metrics.append(({"sinks.rate": float((alpha > SINK_EPSILON).mean())}, None))
            for layer, value in enumerate(alpha.mean(axis=(0, 2))):
                metrics.append(({"sinks_by_layer.alpha_0": float(value)}, layer))
        return Outputs({"sinks": sinks, "sink_heads": head_table(sinks)}, metrics)

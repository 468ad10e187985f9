"""Gu et al.'s attention sink across models: alpha_0 per head, the sink rate, and alpha_0 per layer.

alpha_0 of one sequence and head is the mean over its queries of the attention to the first token,
(1 / n) sum_{t=0}^{n-1} A[t, 0] (Gu et al. 2024, ``eval_sink_open_source.py``: ``compute_attention_sink``'s
importance score of key 0). Their sink rate Sink_0^epsilon is the share of (sequence, layer, head) with alpha_0 >
epsilon (0.3). Where alpha_0 comes from, per model and task, the first of its sources that has rows
(docs/reference.md#compare-sinks):

- a decoder: the probe's ``decoder_sink.csv`` (the pretrained model's first 64 tokens of each example, as Gu et
  al.), else the pretrained store's ``sinks.csv`` (whole examples): the two are not the same sequences, so the
  probe's, Gu's own setting, comes first;
- an encoder: the pretrained store's ``sinks.csv``, one alpha_0 per example x layer x head
  (:mod:`bertology.attention.sinks`), else ``features.csv``'s feature ``cls``: per head the mean over examples of
  the same quantity, so only the per-head share is computed from it and Gu's per-sequence rate is left empty with
  its reason.

The ``source`` column names the table each row was computed from; a row pooled over tasks pools only the tasks of
the model's first source among them, never two sources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from bertology.compare.common import DECODER, ENCODER, POOLED, frame, missing, pooled_note, relative_depth, rows_of, size
from bertology.compare.depth import DEPTH_COLUMNS
from bertology.decoders.heads import SINK_EPSILON
from bertology.pipeline.layout import fill

SINK_COLUMNS = ("model", "task", "kind", "source", "layers", "heads", "epsilon", "sink_rate", "share_heads_over",
                "n_heads_over", "mean_alpha0", "n", "note")

#: the sources of alpha_0, in each kind's order of preference: its name in the ``source`` column
PROBE, STORE, FEATURES = "decoder_sink.csv alpha_0", "sinks.csv alpha_0", "features.csv cls"
ORDER = {DECODER: (PROBE, STORE), ENCODER: (STORE, FEATURES)}

ENCODER_RATE = ("Gu's per-sequence rate needs each example's alpha_0; features.csv holds per-head means "
                "(share_heads_over is computed)")


def decoder_heads(rows: pd.DataFrame, epsilon: float = SINK_EPSILON) -> tuple[pd.DataFrame, float, int]:
    """Per-example rows of one model (task, example, layer, head, alpha_0; any number of tasks: decoder_sink.csv,
    or sinks.csv with example_idx as example) -> per head (layer, head, alpha_0: mean over the examples), Gu's
    Sink_0^epsilon as a fraction (the share of example x layer x head rows with alpha_0 > epsilon) and the number of
    (task, example) sequences."""
    rows = rows.dropna(subset=["alpha_0"])
    heads = rows.groupby(["layer", "head"], as_index=False)["alpha_0"].mean()
    rate = float((rows["alpha_0"].to_numpy(float) > epsilon).mean()) if len(rows) else float("nan")
    return heads, rate, len(rows[["task", "example"]].drop_duplicates())


def encoder_heads(rows: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """features.csv rows of the feature ``cls`` of one model (task, layer, head, mean, n; any number of tasks) ->
    per head (layer, head, alpha_0: the mean over every task's examples, each task weighted by its n) and the
    examples read (the largest n of a head, summed over tasks)."""
    rows = rows.dropna(subset=["mean"]).assign(weighted=lambda d: d["mean"] * d["n"])
    sums = rows.groupby(["layer", "head"], as_index=False)[["weighted", "n"]].sum()
    heads = sums.assign(alpha_0=sums["weighted"] / sums["n"])[["layer", "head", "alpha_0"]]
    return heads, int(rows.groupby("task")["n"].max().sum()) if len(rows) else 0


def summary(heads: pd.DataFrame, epsilon: float = SINK_EPSILON) -> dict[str, object]:
    """The per-head part of a sinks.csv row: layers, heads, n_heads_over (heads whose alpha_0 > epsilon),
    share_heads_over (their share of all heads) and mean_alpha0 (over heads). heads: layer, head, alpha_0."""
    layers, n_heads = size(heads)
    over = int((heads["alpha_0"].to_numpy(float) > epsilon).sum())
    return {"layers": layers, "heads": n_heads, "n_heads_over": over, "share_heads_over": over / len(heads),
            "mean_alpha0": float(heads["alpha_0"].mean())}


def per_layer(heads: pd.DataFrame, *, model: str, task: str, kind: str) -> pd.DataFrame:
    """alpha_0 per layer (the mean over the layer's heads) as depth.csv rows (statistic ``alpha_0``)."""
    layers, _ = size(heads)
    curve = heads.groupby("layer", as_index=False).agg(value=("alpha_0", "mean"), n_heads=("alpha_0", "size"))
    return curve.assign(model=model, task=task, kind=kind, variant="pretrained", statistic="alpha_0", layers=layers,
                        depth=relative_depth(curve["layer"], layers), note="")[list(DEPTH_COLUMNS)]


def _heads(source: str, rows: pd.DataFrame, epsilon: float) -> tuple[pd.DataFrame, float, int]:
    if source != FEATURES:
        return decoder_heads(rows, epsilon)
    heads, n = encoder_heads(rows)
    return heads, float("nan"), n


def task_rows(source: str, decoder_sink: Mapping[str, pd.DataFrame], features: Mapping[str, pd.DataFrame],
              store: Mapping[str, pd.DataFrame], model: str, task: str, *,
              sources: Mapping[str, str]) -> tuple[pd.DataFrame, str]:
    """One model's rows of one task from `source` (the pretrained model's; per-example rows with an ``example``
    column) and, where it has none, the note naming what it lacks (its path from `sources`: the path text of each
    source table, ``decoder_sink``, ``sinks``, ``features``)."""
    if source == PROBE:
        rows = rows_of(decoder_sink, model, task)
        return (rows[rows["variant"] == "pretrained"] if len(rows) else rows), missing(sources, "decoder_sink", task)
    if source == STORE:
        rows = rows_of(store, model, task, "pretrained").rename(columns={"example_idx": "example"})
        return rows, missing(sources, "sinks", task, variant="pretrained")
    table = rows_of(features, model, task, "pretrained")
    if len(table) == 0:
        return table, missing(sources, "features", task, variant="pretrained")
    return table[table["feature"] == "cls"], (
        f"not computed: {fill(sources['features'], task=task, variant='pretrained')} has no cls rows "
        f"(the tokenizer adds no leading special token)")


def sinks(decoder_sink: Mapping[str, pd.DataFrame], features: Mapping[str, pd.DataFrame],
          kinds: Mapping[str, str], tasks: Sequence[str], epsilon: float = SINK_EPSILON, *,
          store: Mapping[str, pd.DataFrame] | None = None,
          sources: Mapping[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gu et al.'s sink statistics of every model, per task and (with two or more tasks) pooled over them.

    decoder_sink: model -> its decoder_sink.csv rows (every task, a ``task`` column); features: model -> its
    pretrained features.csv rows (``task``, ``variant`` columns); store: model -> its pretrained sinks.csv rows
    (``task``, ``variant`` columns); kinds: model -> encoder | decoder (the order of the models); sources: the
    path text of each source table (``decoder_sink``, ``sinks``, ``features``), for the notes
    (:mod:`bertology.compare.common`). Each task's rows come from the first source of the kind's :data:`ORDER`
    that has them. Returns (sinks.csv: SINK_COLUMNS, one row per model and task; its alpha_0 per layer: depth.csv
    rows). A task no source has is a row with only its note, naming what each source lacks."""
    store = store or {}
    out, curves = [], []
    for model, kind in kinds.items():
        pooled: dict[str, list[tuple[str, pd.DataFrame]]] = {}
        for task in tasks:
            found = [(source, *task_rows(source, decoder_sink, features, store, model, task, sources=sources))
                     for source in ORDER[kind]]
            source, rows, _ = next((f for f in found if len(f[1])), found[0])
            base = {"model": model, "task": task, "kind": kind, "source": source, "epsilon": epsilon}
            if len(rows) == 0:
                out.append({**base, "note": "not computed: " + "; ".join(
                    note.removeprefix("not computed: ") for _, _, note in found)})
                continue
            heads, rate, n = _heads(source, rows, epsilon)
            out.append({**base, **summary(heads, epsilon), "sink_rate": rate, "n": n,
                        "note": ENCODER_RATE if source == FEATURES else ""})
            curves.append(per_layer(heads, model=model, task=task, kind=kind))
            pooled.setdefault(source, []).append((task, rows))
        if len(tasks) > 1 and pooled:
            source = next(s for s in ORDER[kind] if s in pooled)
            done = [task for task, _ in pooled[source]]
            heads, rate, n = _heads(source, pd.concat([r for _, r in pooled[source]], ignore_index=True), epsilon)
            out.append({"model": model, "task": POOLED, "kind": kind, "source": source, "epsilon": epsilon,
                        **summary(heads, epsilon), "sink_rate": rate, "n": n, "note": pooled_note(done)})
            curves.append(per_layer(heads, model=model, task=POOLED, kind=kind))
    layers = pd.concat(curves, ignore_index=True) if curves else frame([], DEPTH_COLUMNS)
    return frame(out, SINK_COLUMNS), layers


__all__ = ["ORDER", "SINK_COLUMNS", "decoder_heads", "encoder_heads", "per_layer", "sinks", "summary", "task_rows"]

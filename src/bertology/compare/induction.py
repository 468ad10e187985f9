"""The best induction head of every model (Olsson et al. 2022): per head the mean over the probe's sequences of
its induction score (decoder_induction.csv, column ``induction``: TransformerLens' detection score), the head
with the largest mean, its layer, head and relative depth, beside the best head of the same architecture at its
random initialisation (the probe's ``random-init`` rows). The probe runs on decoders only: an encoder's row says
so (docs/reference.md#compare-induction)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from bertology.compare.common import DECODER, frame, missing, relative_depth, rows_of, size

INDUCTION_COLUMNS = ("model", "task", "kind", "layers", "heads", "layer", "head", "depth", "score",
                     "random_init_score", "n", "note")

ENCODER_NOTE = "not computed: the induction probe runs on decoders only (an encoder's maps are not causal)"


def head_means(rows: pd.DataFrame, column: str = "induction") -> pd.DataFrame:
    """Probe rows of one model (sequence, layer, head, `column`) -> per head (layer, head, score: the mean over
    sequences, n: the sequences), in (layer, head) order."""
    return (rows.groupby(["layer", "head"], as_index=False)
            .agg(score=(column, "mean"), n=(column, "size")).sort_values(["layer", "head"], kind="stable"))


def best_head(rows: pd.DataFrame, column: str = "induction") -> dict[str, object]:
    """The head with the largest mean score (the first in (layer, head) order on a tie): layer, head, score, n,
    and the model's layers, heads and the head's relative depth."""
    means = head_means(rows, column)
    top = means.loc[means["score"].idxmax()]
    layers, heads = size(rows)
    return {"layers": layers, "heads": heads, "layer": int(top["layer"]), "head": int(top["head"]),
            "depth": float(relative_depth(int(top["layer"]), layers)), "score": float(top["score"]),
            "n": int(top["n"])}


def induction(decoder_induction: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], *,
              sources: Mapping[str, str]) -> pd.DataFrame:
    """induction.csv: per model and task the pretrained model's best induction head (:func:`best_head`) and, as
    random_init_score, the best mean score of its random initialisation (empty without those rows).

    decoder_induction: model -> its decoder_induction.csv rows of every task (a ``task`` column); kinds: model ->
    encoder | decoder; sources: the path text of each source (``decoder_induction``), for the notes
    (:mod:`bertology.compare.common`). An encoder, or a decoder without the task's table, is a row with only its
    note."""
    out = []
    for model, kind in kinds.items():
        for task in tasks:
            base = {"model": model, "task": task, "kind": kind}
            if kind != DECODER:
                out.append({**base, "note": ENCODER_NOTE})
                continue
            rows = rows_of(decoder_induction, model, task)
            trained = rows[rows["variant"] == "pretrained"].dropna(subset=["induction"]) if len(rows) else rows
            if len(trained) == 0:
                out.append({**base, "note": missing(sources, "decoder_induction", task)})
                continue
            random = rows[rows["variant"] == "random-init"].dropna(subset=["induction"])
            reference = head_means(random)["score"].max() if len(random) else float("nan")
            out.append({**base, **best_head(trained), "random_init_score": reference, "note": ""})
    return frame(out, INDUCTION_COLUMNS)


__all__ = ["ENCODER_NOTE", "INDUCTION_COLUMNS", "best_head", "head_means", "induction"]

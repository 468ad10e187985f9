"""What every comparison shares: the two kinds of model, the pooled task, relative depth, a model's size read
from its per-head tables, the rows of one model and task, and the one wording of a "not computed" note.

A comparison takes per-model tables: model short name -> one DataFrame, the model's table of that name read
from its results root for every task (and store variant) and concatenated, with a ``task`` column (and a
``variant`` column for the per-variant tables), and ``sources``: each table's path text under a model's results
root, by the table's name (what the step read: bertology.analyses.compare.SOURCES). A model absent from the
mapping, or a task without rows, is "not computed", its note naming the table's path (docs/reference.md#compare).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bertology.pipeline.layout import fill

ENCODER, DECODER = "encoder", "decoder"
KINDS = (ENCODER, DECODER)

#: the ``task`` of a row pooled over every task of the run
POOLED = "all"

#: the store variants a comparison reads: the pretrained model, and the first seed's fine-tuned one where it exists
VARIANTS = ("pretrained", "finetuned")


def relative_depth(layer: int | np.ndarray | pd.Series, layers: int | np.ndarray | pd.Series):
    """(layer + 1) / layers for 0-based layers: a 6-layer model's layer 5 and a 12-layer model's layer 11 are
    both at 1.0, the first layer of an L-layer model at 1 / L."""
    return (np.asarray(layer, dtype=float) + 1.0) / np.asarray(layers, dtype=float)


def size(rows: pd.DataFrame) -> tuple[int, int]:
    """(layers, heads) of a per-head table: one more than its largest 0-based layer and head (the rows with
    layer = head = -1, a pooled row of patterns.csv, ignored)."""
    real = rows[(rows["layer"] >= 0) & (rows["head"] >= 0)]
    return int(real["layer"].max()) + 1, int(real["head"].max()) + 1


def rows_of(tables: Mapping[str, pd.DataFrame], model: str, task: str | None = None,
            variant: str | None = None) -> pd.DataFrame:
    """The rows of one model (of one task and store variant, where given); empty when it has none."""
    table = tables.get(model)
    if table is None or table.empty:
        return pd.DataFrame()
    keep = np.ones(len(table), dtype=bool)
    if task is not None:
        keep &= (table["task"] == task).to_numpy()
    if variant is not None:
        keep &= (table["variant"] == variant).to_numpy()
    return table[keep]


def missing(sources: Mapping[str, str], source: str, task: str, **values: str) -> str:
    """The note of a row that could not be computed: the model's table it lacks, relative to its results root.
    sources: each source's path text under a model's results root, by its name (the caller's: the step passes
    bertology.analyses.compare.SOURCES' paths); source: the name of the table lacked; the path's task and other
    fields (`values`) filled.

    >>> missing({"patterns": "stats/{task}/{variant}/classes.csv"}, "patterns", "rte", variant="pretrained")
    'not computed: no stats/rte/pretrained/classes.csv'
    """
    return f"not computed: no {fill(sources[source], task=task, **values)}"


def pooled_note(tasks: Sequence[str]) -> str:
    """The note of a pooled row: the tasks it pools."""
    return f"pooled over {', '.join(tasks)}"


def frame(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> pd.DataFrame:
    """Rows as a table with exactly `columns`, in that order (an absent value is empty)."""
    return pd.DataFrame(list(rows), columns=list(columns))

"""The words table beside a store (results/attention/{task}/words.parquet, docs/reference.md#store-words).

Imports only bertology.store.schema.
"""

from __future__ import annotations

from pathlib import Path

from bertology.pipeline.errors import MissingInputError
from bertology.store.schema import StoreError


def read_words(path: str | Path):
    """The words table beside a store (results/attention/{task}/words.parquet), its columns checked."""
    import pandas as pd

    from bertology.attention.annotate import WORD_COLUMNS

    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"no words table at {str(path)!r}; it is written with the attention store: "
                                f"`snakemake {path}`")
    words = pd.read_parquet(path)
    missing = [c for c in WORD_COLUMNS if c not in words.columns]
    if missing:
        raise StoreError(f"{path} lacks column(s) {missing}: not a words table of the annotation step (columns "
                         f"{', '.join(WORD_COLUMNS)}); delete it and re-run `snakemake {path}`")
    return words

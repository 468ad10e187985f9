"""The words table beside a store (results/data/{task}/words.parquet, docs/reference.md#store-words).

Imports only bertology.store.schema (and the ground, bertology.pipeline). The table's columns are defined here, once:
the annotation step (:mod:`bertology.attention.annotate`) writes them, every reader checks them.
"""

from __future__ import annotations

from pathlib import Path

from bertology.pipeline.errors import MissingInputError, snakemake_command
from bertology.store.schema import StoreError

# The columns of words.parquet and their dtypes: the one definition (the annotator and every reader import them).
WORD_DTYPES: dict[str, str] = {
    "example_idx": "int64", "word": "int16", "segment": "int8", "text": "object", "lemma": "object",
    "pos": "object", "tag": "object", "dep": "object", "head": "int16", "is_punct": "bool",
    "start_char": "int32", "end_char": "int32",
}
WORD_COLUMNS: list[str] = list(WORD_DTYPES)


def read_words(path: str | Path):
    """The words table beside a store (results/data/{task}/words.parquet), its columns checked."""
    import pandas as pd


    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"no words table at {str(path)!r}; it is written with the attention store: "
                                f"`{snakemake_command(path)}`")
    words = pd.read_parquet(path)
    missing = [c for c in WORD_COLUMNS if c not in words.columns]
    if missing:
        raise StoreError(f"{path} lacks column(s) {missing}: not a words table of the annotation step (columns "
                         f"{', '.join(WORD_COLUMNS)}); delete it and re-run (`rm {path}`; `{snakemake_command(path)}`)")
    return words

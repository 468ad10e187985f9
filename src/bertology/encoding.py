"""Tokenisation of prepared task frames (idx, text_a, text_b, label) into model inputs."""

from __future__ import annotations

import pandas as pd


def texts(df: pd.DataFrame) -> tuple[list[str], list[str] | None]:
    """The (text_a, text_b) lists of a prepared frame; text_b is None for single-sentence tasks."""
    a = df["text_a"].astype(str).tolist()
    has_b = "text_b" in df and df["text_b"].notna().any()
    return a, (df["text_b"].astype(str).tolist() if has_b else None)


def encode(tokenizer, df: pd.DataFrame, max_length: int, *, offsets: bool = False, padding: bool | str = False):
    """Tokenise a frame: [CLS] a [SEP] (b [SEP]), truncated to max_length (longest first).

    Returns a BatchEncoding of python lists (no padding unless asked), with offset mappings if
    `offsets` (needed to align spaCy words to wordpieces).
    """
    a, b = texts(df)
    return tokenizer(a, b, truncation=True, max_length=max_length, padding=padding,
                     return_offsets_mapping=offsets, return_token_type_ids=True)

"""Tokenisation of prepared task frames (idx, text_a, text_b, label) into model inputs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
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


def segments(sequence_ids: Sequence[int | None], pair: bool) -> np.ndarray:
    """Segment of every token of one encoded example: 0 first text, 1 second text (docs/reference.md#store-segment).

    sequence_ids: the tokenizer's ``BatchEncoding.sequence_ids(i)`` (None on its special tokens), without
    padding; pair: whether the example was encoded as a pair. A special token belongs to the text it opens or
    closes: the specials before the first text to it ([CLS], <s>); of the specials between two texts the
    first closes the first text and the others open the second (BERT's [SEP] -> 0; RoBERTa's </s></s> ->
    0, 1); the specials after the last text to it (the last [SEP] -> 1). This holds for any post-processor
    template, whatever token types it gives (RoBERTa's and ModernBERT's are all 0). Returns (n,) int8.
    """
    seq = list(sequence_ids)
    out = np.zeros(len(seq), np.int8)
    texts = [s for s in seq if s is not None]
    if not texts:
        return out
    prev: int | None = None
    pending: list[int] = []  # positions of the specials since the last text token
    for t, s in enumerate(seq):
        if s is None:
            pending.append(t)
            continue
        if pending:
            if prev is None:
                out[pending] = s
            else:
                out[pending[0]] = prev
                out[pending[1:]] = s
            pending = []
        out[t] = s
        prev = s
    if pending:  # after the last text; a pair whose second text is empty still opens segment 1
        if pair and prev == 0 and len(pending) > 1:
            out[pending[0]] = 0
            out[pending[1:]] = 1
        else:
            out[pending] = prev
    return out

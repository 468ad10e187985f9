"""Token categories of Kobayashi et al. 2020 from the tokenizer's own API (docs/reference.md#norms).

[CLS] = positions holding the tokenizer's cls id (bos where it names none), [SEP] = its sep id (eos where it names
none; RoBERTa's ``</s></s>`` are two), punctuation = tokens whose text (``convert_tokens_to_string``, so
WordPiece's ``##`` and byte-level BPE's space marker are gone) is one or more Unicode punctuation characters
(category P*), other = the rest. Padding is -1.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd

CATEGORIES = ("cls", "sep", "punctuation", "other")
CLS, SEP, PUNCT, OTHER = range(4)


def _first(tokenizer, *names: str) -> int | None:
    return next((int(v) for v in (getattr(tokenizer, n, None) for n in names) if v is not None), None)


class TokenKinds:
    """Categories and texts of token ids, for one tokenizer."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.cls_id = _first(tokenizer, "cls_token_id", "bos_token_id")
        self.sep_id = _first(tokenizer, "sep_token_id", "eos_token_id")
        self._punct: dict[int, bool] = {}

    def text(self, token_id: int) -> str:
        tok = self.tokenizer.convert_ids_to_tokens(int(token_id))
        return self.tokenizer.convert_tokens_to_string([tok]).strip()

    def is_punct(self, token_id: int) -> bool:
        token_id = int(token_id)
        if token_id not in self._punct:
            text = self.text(token_id)
            self._punct[token_id] = bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)
        return self._punct[token_id]

    def categories(self, input_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """input_ids (B, T), lengths (B,) -> (B, T) int8 category codes (index into CATEGORIES), -1 on padding."""
        ids = np.asarray(input_ids)
        out = np.full(ids.shape, OTHER, np.int8)
        punct = np.vectorize(self.is_punct, otypes=[bool])(ids) if ids.size else np.zeros(ids.shape, bool)
        out[punct] = PUNCT
        if self.sep_id is not None:
            out[ids == self.sep_id] = SEP
        if self.cls_id is not None:
            out[ids == self.cls_id] = CLS
        out[np.arange(ids.shape[-1])[None, :] >= np.asarray(lengths)[:, None]] = -1
        return out


def token_frequencies(tokenizer, frame: pd.DataFrame, max_length: int) -> np.ndarray:
    """How often each token id occurs in a prepared frame's inputs as the model sees them (both texts, specials
    included, truncated to max_length): (vocabulary size,) int64."""
    from bertology.models.encoding import encode

    counts = np.zeros(len(tokenizer), np.int64)
    for start in range(0, len(frame), 1000):
        enc = encode(tokenizer, frame.iloc[start:start + 1000], max_length)
        for ids in enc["input_ids"]:
            np.add.at(counts, np.asarray(ids, np.int64), 1)
    return counts

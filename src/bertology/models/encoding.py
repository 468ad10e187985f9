"""Tokenisation of prepared task frames (idx, text_a, text_b, label) into model inputs: the token lists of a frame
(:class:`Encoded`, :func:`encode_frame`) and rows of it padded into tensors (:class:`Batch`, :func:`pad_rows`).
A model is given ``token_type_ids`` exactly where its own tokenizer produces them (:func:`gives_token_type_ids`).

Glossary: E examples, n_e tokens of example e, N rows of a batch, T their longest length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bertology.pipeline.errors import InputError
from bertology.pipeline.tasks import TaskSpec

if TYPE_CHECKING:
    import torch


def texts(df: pd.DataFrame) -> tuple[list[str], list[str] | None]:
    """The (text_a, text_b) lists of a prepared frame; text_b is None for single-sentence tasks."""
    a = df["text_a"].astype(str).tolist()
    has_b = "text_b" in df and df["text_b"].notna().any()
    return a, (df["text_b"].astype(str).tolist() if has_b else None)


def gives_token_type_ids(tokenizer) -> bool:
    """Whether the model is given ``token_type_ids``: exactly where its tokenizer produces them, i.e. names them
    among its ``model_input_names`` (BERT's, ELECTRA's and DeBERTa's tokenizers do; GPT-2's, Llama's, RoBERTa's,
    DistilBERT's and ModernBERT's do not). The one rule of every forward pass (training, scoring, extraction, the
    norm views, ablation, the decoder probe); where a model's forward also takes ``token_type_ids`` but its
    tokenizer produces none (GPT-2 adds the embedding of the token ids it is given), it gets none, as
    ``model(**tokenizer(text))`` gives it."""
    return "token_type_ids" in (getattr(tokenizer, "model_input_names", None) or ())


def encode(tokenizer, df: pd.DataFrame, max_length: int, *, offsets: bool = False, padding: bool | str = False):
    """Tokenise a frame: [CLS] a [SEP] (b [SEP]), truncated to max_length (longest first).

    Returns a BatchEncoding of python lists (no padding unless asked), with offset mappings if
    `offsets` (needed to align spaCy words to wordpieces), and ``token_type_ids`` where the model is given
    them (:func:`gives_token_type_ids`).
    """
    a, b = texts(df)
    return tokenizer(a, b, truncation=True, max_length=max_length, padding=padding,
                     return_offsets_mapping=offsets, return_token_type_ids=gives_token_type_ids(tokenizer))


@dataclass
class Encoded:
    """A tokenised frame, unpadded: one entry per example, in the frame's order.

    input_ids: E int64 arrays (n_e,), the token ids ([CLS] a [SEP] (b [SEP]), truncated: :func:`encode`);
    token_type_ids: E int64 arrays (n_e,), the tokenizer's segment ids, or None where the model is given none
    (:func:`gives_token_type_ids`);
    idx: (E,) int64, the frame's ``idx``; labels: (E,) the gold labels as a classifier reads them (int64, float32
    for regression), None when not asked for.
    """

    input_ids: list[np.ndarray]
    token_type_ids: list[np.ndarray] | None
    idx: np.ndarray
    labels: np.ndarray | None = None

    @property
    def lengths(self) -> np.ndarray:
        """(E,) int64: n_e of every example."""
        return np.array([len(i) for i in self.input_ids], np.int64)

    def __len__(self) -> int:
        return len(self.input_ids)

    def padded(self, rows: np.ndarray, pad_id: int) -> Batch:
        """The examples `rows` (N,) padded to their longest (:func:`pad_rows`)."""
        return pad_rows(self.input_ids, self.token_type_ids, rows, pad_id)


@dataclass
class Batch:
    """Rows of a tokenised frame padded on the right to their longest, as tensors.

    rows: (N,) positions of the examples in their frame; input_ids: (N, T) int64, ``pad_id`` after each example's
    tokens; token_type_ids: (N, T) int64, 0 after them, or None where the model is given none;
    attention_mask: (N, T) int64, 1 on the real tokens.
    """

    rows: np.ndarray
    input_ids: torch.Tensor
    token_type_ids: torch.Tensor | None
    attention_mask: torch.Tensor

    def to(self, device) -> Batch:
        return Batch(self.rows, self.input_ids.to(device),
                     None if self.token_type_ids is None else self.token_type_ids.to(device),
                     self.attention_mask.to(device))

    def inputs(self) -> dict[str, torch.Tensor]:
        """The keyword inputs of the model's forward: input_ids, attention_mask and, where it is given them,
        token_type_ids; each (N, T)."""
        out = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            out["token_type_ids"] = self.token_type_ids
        return out


def encode_frame(tokenizer, df: pd.DataFrame, max_length: int, labels: np.ndarray | None = None) -> Encoded:
    """Tokenise a prepared frame (:func:`encode`, no padding) into an :class:`Encoded`; labels: (E,) or None."""
    enc = encode(tokenizer, df, max_length)
    ids = [np.asarray(i, np.int64) for i in enc["input_ids"]]
    tts = [np.asarray(t, np.int64) for t in enc["token_type_ids"]] if "token_type_ids" in enc else None
    return Encoded(ids, tts, df["idx"].to_numpy(np.int64), labels)


def encode_split(tokenizer, df: pd.DataFrame, spec: TaskSpec, max_length: int) -> Encoded:
    """Tokenise a prepared frame (idx, text_a, text_b, label) for the task's classifier, with its labels
    (:func:`split_labels`)."""
    if len(df) == 0:
        raise InputError(f"{spec.name}: the data split is empty; check data.max_*_examples and the source")
    return encode_frame(tokenizer, df, max_length, split_labels(df, spec))


def split_labels(df: pd.DataFrame, spec: TaskSpec) -> np.ndarray:
    """The gold labels of a prepared frame as the classifier reads them: (E,) int64, float32 for regression."""
    return df["label"].to_numpy(np.float32 if spec.is_regression else np.int64)


def pad_rows(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]] | None, rows: np.ndarray,
             pad_id: int) -> Batch:
    """The examples `rows` (N,) of per-example token and segment ids (n_e each; segment ids None where the model
    is given none) padded on the right to their longest: a :class:`Batch` of (N, T) tensors."""
    import torch

    rows = np.asarray(rows)
    lengths = np.array([len(input_ids[r]) for r in rows])
    width = int(lengths.max())
    ids = torch.full((len(rows), width), int(pad_id), dtype=torch.long)
    tt = None if token_type_ids is None else torch.zeros((len(rows), width), dtype=torch.long)
    am = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, n) in enumerate(zip(rows, lengths)):
        ids[i, :n] = torch.as_tensor(input_ids[r])
        if tt is not None:
            tt[i, :n] = torch.as_tensor(token_type_ids[r])
        am[i, :n] = 1
    return Batch(rows, ids, tt, am)


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

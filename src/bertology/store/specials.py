"""The special tokens of a store: the one definition of [CLS] and [SEP] every analysis uses.

Imports only bertology.store.schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertology.store.schema import StoreError


@dataclass(frozen=True)
class SpecialTokens:
    """The tokenizer's special ids a store records (attributes ``cls_token_id``, ``sep_token_id``).

    [CLS] = every real position (< length) holding ``cls_token_id`` (position 0 for BERT- and RoBERTa-style
    tokenizers); [SEP] = every real position holding ``sep_token_id`` (RoBERTa's ``</s></s>`` are two). The
    other real positions are the ordinary tokens (Q of docs/reference.md#notation). Picklable, for any Dask scheduler.
    """

    cls_token_id: int | None
    sep_token_id: int

    @classmethod
    def of(cls, attrs: Mapping[str, Any], where: str = "the attention store") -> "SpecialTokens":
        """The special ids of a store's attributes."""
        if attrs.get("sep_token_id") is None:
            raise StoreError(f"{where} has no sep_token_id attribute (docs/reference.md#store): not a store written by "
                             f"the extraction; delete it and re-run the extraction")
        cls_id = attrs.get("cls_token_id")
        return cls(None if cls_id is None else int(cls_id), int(attrs["sep_token_id"]))

    def masks(self, input_ids: np.ndarray, length: Any) -> tuple[np.ndarray, np.ndarray]:
        """([CLS] mask, [SEP] mask): bool, shaped like input_ids (..., T); length (...) the real lengths n."""
        ids = np.asarray(input_ids)
        real = np.arange(ids.shape[-1]) < np.asarray(length, dtype=np.int64)[..., None]
        sep = real & (ids == self.sep_token_id)
        if self.cls_token_id is None:
            return np.zeros(sep.shape, dtype=bool), sep
        return real & (ids == self.cls_token_id), sep

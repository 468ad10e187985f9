"""Attention maps and stores whose Kovaleva statistics are known by construction (used by test_kovaleva_*)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tests.builders import store as store_builder

CLS_ID, SEP_ID, PAD_ID = 101, 102, 0


@dataclass
class Example:
    """One input: word_ids (-1 for specials), segment per position, the words table rows."""

    word_ids: list[int]
    segments: list[int]
    words: list[dict]

    @property
    def n(self) -> int:
        return len(self.word_ids)

    def input_ids(self) -> list[int]:
        ids = []
        for p, w in enumerate(self.word_ids):
            ids.append(CLS_ID if p == 0 else SEP_ID if w == -1 else 1000 + w)
        return ids

    @property
    def special(self) -> np.ndarray:
        return np.array([w == -1 for w in self.word_ids])


def word(i: int, text: str, pos: str, dep: str, head: int, segment: int = 0) -> dict:
    return {"word": i, "text": text, "lemma": text.lower(), "pos": pos, "tag": pos, "dep": dep, "head": head,
            "segment": segment, "is_punct": pos == "PUNCT", "start_char": 0, "end_char": len(text)}


def pair_example() -> Example:
    """[CLS] The dog+s bark+ed [SEP] It did n't . [SEP]  (n = 12; 'dogs' and 'barked' are 2 wordpieces).

    "did" + "n't" is "didn't", a negation of Kovaleva et al.'s footnote-6 list (the default list).
    positions: 0 CLS | 1 The (w0) | 2,3 dogs (w1) | 4,5 barked (w2) | 6 SEP | 7 It (w3) | 8 did (w4) |
               9 n't (w5) | 10 . (w6) | 11 SEP
    """
    word_ids = [-1, 0, 1, 1, 2, 2, -1, 3, 4, 5, 6, -1]
    segments = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    words = [word(0, "The", "DET", "det", 1), word(1, "dogs", "NOUN", "nsubj", 2), word(2, "barked", "VERB", "ROOT", 2),
             word(3, "It", "PRON", "nsubj", 4, 1), word(4, "did", "AUX", "ROOT", 4, 1),
             word(5, "n't", "PART", "neg", 4, 1), word(6, ".", "PUNCT", "punct", 4, 1)]
    return Example(word_ids, segments, words)


def single_example() -> Example:
    """[CLS] Cats chase knots [SEP] (n = 5; one wordpiece per word; no negation: 'knots' is not 'not')."""
    word_ids = [-1, 0, 1, 2, -1]
    words = [word(0, "Cats", "NOUN", "nsubj", 1), word(1, "chase", "VERB", "ROOT", 1), word(2, "knots", "NOUN", "dobj", 1)]
    return Example(word_ids, [0] * 5, words)


def on_columns(n: int, cols: list[int], weights: list[float] | None = None) -> np.ndarray:
    """(n, n): every row puts `weights` (default: equal shares) on `cols`."""
    a = np.zeros((n, n))
    w = weights or [1.0 / len(cols)] * len(cols)
    for c, x in zip(cols, w):
        a[:, c] += x
    return a


def previous_token(n: int) -> np.ndarray:
    """(n, n): row i attends to i-1 (row 0 to itself)."""
    a = np.zeros((n, n))
    a[0, 0] = 1.0
    a[np.arange(1, n), np.arange(0, n - 1)] = 1.0
    return a


def uniform(n: int) -> np.ndarray:
    return np.full((n, n), 1.0 / n)


def block(segments: list[int], special: np.ndarray) -> np.ndarray:
    """(n, n): each row uniform over the non-special tokens of its own segment."""
    seg = np.asarray(segments)
    same = (seg[:, None] == seg[None, :]) & ~special[None, :]
    return same / same.sum(1, keepdims=True)


def build_store(examples: list[Example], maps, max_length: int = 16, pad_value: float = np.nan):
    """An xarray Dataset of docs/reference.md#store. `maps(example) -> (L, H, n, n)` gives each example's attention."""
    import xarray as xr

    first = np.asarray(maps(examples[0]))
    layers, heads = first.shape[:2]
    e = len(examples)
    att = np.full((e, layers, heads, max_length, max_length), pad_value, dtype=np.float16)
    ids = np.full((e, max_length), PAD_ID, np.int32)
    tt = np.zeros((e, max_length), np.int8)
    seg = np.full((e, max_length), -1, np.int8)
    wid = np.full((e, max_length), -1, np.int16)
    length = np.zeros(e, np.int16)
    for i, ex in enumerate(examples):
        n = ex.n
        att[i, :, :, :n, :n] = maps(ex)
        ids[i, :n] = ex.input_ids()
        tt[i, :n] = ex.segments
        seg[i, :n] = ex.segments
        wid[i, :n] = ex.word_ids
        length[i] = n
    return xr.Dataset(
        {"attention": (("example", "layer", "head", "query", "key"), att),
         "input_ids": (("example", "query"), ids), "token_type_ids": (("example", "query"), tt),
         "segment": (("example", "query"), seg), "word_ids": (("example", "query"), wid), "length": (("example",), length),
         "example_idx": (("example",), np.arange(100, 100 + e, dtype=np.int64))},
        coords={"layer": np.arange(layers), "head": np.arange(heads)},
        attrs={"model": "test", "variant": "pretrained", "task": "mrpc", "split": "validation",
               "cls_token_id": CLS_ID, "sep_token_id": SEP_ID, "pad_token_id": PAD_ID, "max_length": max_length,
               "complete": True})


def words_table(examples: list[Example]) -> pd.DataFrame:
    rows = []
    for i, ex in enumerate(examples):
        for w in ex.words:
            rows.append({"example_idx": 100 + i, **w})
    df = pd.DataFrame(rows)
    return df.astype({"example_idx": "int64", "word": "int16", "segment": "int8", "head": "int16"})


def write_store(ds, path, chunk: int = 2):
    """`ds` (:func:`build_store`) written through the extraction's writer (tests/builders/store.py)."""
    return store_builder.write_store(path, ds, chunk_size=chunk)


def long_example(n_a: int = 14, n_b: int | None = 12) -> Example:
    """[CLS] w0 .. w(n_a-1) [SEP] (w.. [SEP]): one wordpiece per word, nouns and verbs alternating."""
    word_ids, segments, words = [-1], [0], []
    for seg, count in enumerate([n_a] + ([n_b] if n_b else [])):
        for _ in range(count):
            w = len(words)
            words.append(word(w, f"w{w}", "NOUN" if w % 2 == 0 else "VERB", "dep", w, seg))
            word_ids.append(w)
            segments.append(seg)
        word_ids.append(-1)
        segments.append(seg)
    return Example(word_ids, segments, words)


def maps(ex: Example, variant: str = "pretrained") -> np.ndarray:
    """(2, 3, n, n). Layer 0: [CLS] stripe, uniform (previous token when fine-tuned), previous token.
    Layer 1: last-[SEP] stripe, uniform, previous token."""
    n = ex.n
    second = previous_token(n) if variant == "finetuned" else uniform(n)
    return np.stack([np.stack([on_columns(n, [0]), second, previous_token(n)]),
                     np.stack([on_columns(n, [n - 1]), uniform(n), previous_token(n)])])

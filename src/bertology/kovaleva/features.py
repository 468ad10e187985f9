"""Kovaleva et al. 4.4 (attention to linguistic features) and 4.5 ([CLS] in the last layer).

Glossary: L layers, H heads, n real length of one example ([CLS] and [SEP]s included), T tokens of one
feature type, W words of one example. An attention map ``A`` is ``(L, H, n, n)`` (rows = queries,
columns = keys), cropped to the real length.

A *token* of a feature is a set of wordpiece positions: the special tokens are one position each
([CLS], every [SEP]: bertology.store.SpecialTokens); a word is all its wordpieces ``wp(w)`` (never only the first one).

Definitions (docs/reference.md#features):

* features: score(f) = max over tokens w of type f of (sum_i sum_{s in wp(w)} A[i, s]) / n, averaged
  over the examples that contain f;
* cls: last layer, the [CLS] row: max over tokens w of type f of sum_{s in wp(w)} A[0, s]; on a decoder's causal
  maps the row of the token its classifier reads, the last real one (A[n - 1, s]).

Negation words (``analysis.features.negation``): ``paper`` (the default) is exactly Kovaleva et al.'s
footnote 6; ``extended`` adds no, nobody, cannot and every n't form; both matched on whole spaCy words, a
contraction through its clitic (the lists and the test: :mod:`bertology.attention.negation`).

A wordpiece shared by several spaCy words (WordPiece keeps "cannot" whole, spaCy reads "can" + "not")
has one word in the store's ``word_ids`` (int16, one per position, docs/reference.md#store). The alignment
(:func:`bertology.attention.annotate.align_words`) gives such a piece to the negation word among its sharers
(``not``), so the negation token of "I cannot go" is the piece ``cannot``; the other sharer ("can", an
AUX, which carries none of these features) is left without a piece. This module reads ``word_ids`` as
they are: wp(w) = the positions whose word id is w.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.attention.negation import negation_flags

FEATURES: tuple[str, ...] = ("cls", "sep", "noun", "verb", "pronoun", "subject", "object", "negation")
CLS_FEATURES: tuple[str, ...] = FEATURES + ("punctuation",)
WORD_FEATURES: tuple[str, ...] = ("noun", "verb", "pronoun", "subject", "object", "negation", "punctuation")

NOUN_POS = frozenset({"NOUN", "PROPN"})
VERB_POS = frozenset({"VERB"})
PRONOUN_POS = frozenset({"PRON"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass"})
OBJECT_DEPS = frozenset({"dobj", "obj"})  # direct objects (UD `obj` counts as dobj)


def word_feature_flags(words: pd.DataFrame, *, negation: str) -> pd.DataFrame:
    """Boolean feature columns for a words table (columns text, pos, dep, is_punct as in words.parquet).

    Returns a frame with the same index and one bool column per name in WORD_FEATURES.
    noun = POS NOUN/PROPN; verb = VERB (not AUX); pronoun = PRON; subject = nsubj/nsubjpass/csubj(pass);
    object = dobj/obj; negation = whole words of the `negation` list (``paper``: Kovaleva et al.'s
    footnote 6, the default; ``extended``), contractions through their clitic
    (:func:`bertology.attention.negation.is_negation`); punctuation = is_punct.
    """
    pos = words["pos"].astype(str)
    dep = words["dep"].astype(str)
    out = pd.DataFrame(index=words.index)
    out["noun"] = pos.isin(NOUN_POS)
    out["verb"] = pos.isin(VERB_POS)
    out["pronoun"] = pos.isin(PRONOUN_POS)
    out["subject"] = dep.isin(SUBJECT_DEPS)
    out["object"] = dep.isin(OBJECT_DEPS)
    out["negation"] = negation_flags(words, negation)
    out["punctuation"] = words["is_punct"].astype(bool) if "is_punct" in words else pos.eq("PUNCT")
    return out


def word_membership(word_ids: np.ndarray, n: int, n_words: int) -> np.ndarray:
    """(W, n) float32: M[w, s] = 1 when wordpiece s belongs to word w (s < n; specials have id -1)."""
    ids = np.asarray(word_ids[:n]).astype(np.int64)
    m = np.zeros((n_words, n), dtype=np.float32)
    pos = np.flatnonzero((ids >= 0) & (ids < n_words))
    m[ids[pos], pos] = 1.0
    return m


def feature_tokens(word_ids: np.ndarray, cls: np.ndarray, sep: np.ndarray, flags: dict[str, np.ndarray] | None,
                   names: tuple[str, ...] = FEATURES) -> dict[str, np.ndarray]:
    """Membership matrices of the tokens of each feature in one example.

    word_ids: (Q,) of the example (Q >= n). cls, sep: (n,) bool, the [CLS] and [SEP] positions of the real
    tokens (bertology.store.SpecialTokens.masks). flags: feature -> (W,) bool per word index (from
    word_feature_flags, in word order), None when the example has no word annotation.
    Returns feature -> (T, n) float32 (T may be 0: the example does not contain the feature). Words
    whose wordpieces were all truncated away have an empty row and are dropped.
    """
    n = len(cls)
    cls_pos, sep_pos = np.flatnonzero(cls), np.flatnonzero(sep)
    eye = np.eye(n, dtype=np.float32)
    out: dict[str, np.ndarray] = {}
    n_words = 0 if not flags else len(next(iter(flags.values())))
    members = word_membership(word_ids, n, n_words) if n_words else np.zeros((0, n), np.float32)
    present = members.sum(1) > 0
    for name in names:
        if name == "cls":
            out[name] = eye[cls_pos]
        elif name == "sep":
            out[name] = eye[sep_pos]
        elif flags and name in flags:
            out[name] = members[np.asarray(flags[name], bool) & present]
        else:
            out[name] = np.zeros((0, n), np.float32)
    return out


def feature_scores(attn: np.ndarray, tokens: dict[str, np.ndarray], names: tuple[str, ...] = FEATURES) -> np.ndarray:
    """Kovaleva 4.4 scores of one example.

    attn: (L, H, n, n). tokens: feature -> (T, n) membership. Returns (L, H, F) float64 with
    score[l, h, f] = max_T (sum_i sum_{s in wp(T)} A[l, h, i, s]) / n; NaN where the feature is absent.
    """
    n = attn.shape[-1]
    colsum = attn.sum(axis=-2, dtype=np.float64)  # (L, H, n): attention each key receives
    out = np.full(attn.shape[:2] + (len(names),), np.nan)
    for f, name in enumerate(names):
        m = tokens[name]
        if m.shape[0]:
            out[..., f] = (colsum @ m.T).max(axis=-1) / n
    return out


def cls_scores(attn_last: np.ndarray, tokens: dict[str, np.ndarray], names: tuple[str, ...] = CLS_FEATURES,
               query: int = 0) -> np.ndarray:
    """Kovaleva 4.5 scores of one example: what the classified query attends to in the last layer.

    attn_last: (H, n, n), the last layer; query: the row the classifier reads (0: BERT's [CLS]; a decoder's
    last real token, n - 1: :attr:`bertology.attention.onepass.Example.classified`). Returns (H, F): max over tokens of
    type f of sum_{s in wp(w)} A[h, query, s]; NaN where the feature is absent.
    """
    row = np.asarray(attn_last[:, query, :], dtype=np.float64)  # (H, n)
    out = np.full((attn_last.shape[0], len(names)), np.nan)
    for f, name in enumerate(names):
        m = tokens[name]
        if m.shape[0]:
            out[:, f] = (row @ m.T).max(axis=-1)
    return out

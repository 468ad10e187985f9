"""Kovaleva et al. 4.4 (attention to linguistic features) and 4.5 ([CLS] in the last layer).

Glossary: L layers, H heads, n real length of one example ([CLS] and [SEP]s included), T tokens of one
feature type, W words of one example. An attention map ``A`` is ``(L, H, n, n)`` (rows = queries,
columns = keys), cropped to the real length.

A *token* of a feature is a set of wordpiece positions: the special tokens are one position each
([CLS], every [SEP]: bertology.store.SpecialTokens); a word is all its wordpieces ``wp(w)`` (never only the first one).

Definitions (DESIGN section 6):

* features: score(f) = max over tokens w of type f of (sum_i sum_{s in wp(w)} A[i, s]) / n, averaged
  over the examples that contain f;
* cls: last layer, the [CLS] row: max over tokens w of type f of sum_{s in wp(w)} A[0, s].
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FEATURES: tuple[str, ...] = ("cls", "sep", "noun", "verb", "pronoun", "subject", "object", "negation")
CLS_FEATURES: tuple[str, ...] = FEATURES + ("punctuation",)
WORD_FEATURES: tuple[str, ...] = ("noun", "verb", "pronoun", "subject", "object", "negation", "punctuation")

#: Kovaleva et al.'s footnote 6 (neither, nor, not, never, none, don't, won't, didn't, hadn't, haven't,
#: can't, isn't, wasn't, shouldn't, couldn't, nothing, nowhere), plus the other common negators and every
#: n't contraction. spaCy splits "don't" into "do" + "n't", so "n't" (and "nt" from "dont") is the word
#: that carries the negation. Matching is on whole words, lower-cased, with typographic apostrophes
#: normalised; "knot", "note" or "nothingness" never match.
NEGATION_WORDS: frozenset[str] = frozenset({
    "neither", "nor", "not", "never", "none", "nothing", "nowhere", "no", "nobody", "cannot", "n't",
    "don't", "won't", "didn't", "hadn't", "haven't", "can't", "isn't", "wasn't", "shouldn't", "couldn't",
    "doesn't", "aren't", "weren't", "hasn't", "wouldn't", "mustn't", "needn't", "mightn't", "shan't",
    "ain't",
})

NOUN_POS = frozenset({"NOUN", "PROPN"})
VERB_POS = frozenset({"VERB"})
PRONOUN_POS = frozenset({"PRON"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass"})
OBJECT_DEPS = frozenset({"dobj", "obj"})  # direct objects (UD `obj` counts as dobj)


def normalise_word(text: str) -> str:
    """Lower-case, typographic apostrophes to ASCII."""
    return str(text).strip().lower().replace("\u2019", "'").replace("\u2018", "'")


def is_negation(text: str) -> bool:
    """Whole-word negation test: ``is_negation("don't")`` and ``("n't")`` are True, ``("knot")`` is False."""
    return normalise_word(text) in NEGATION_WORDS


def word_feature_flags(words: pd.DataFrame) -> pd.DataFrame:
    """Boolean feature columns for a words table (columns text, pos, dep, is_punct as in words.parquet).

    Returns a frame with the same index and one bool column per name in WORD_FEATURES.
    noun = POS NOUN/PROPN; verb = VERB (not AUX); pronoun = PRON; subject = nsubj/nsubjpass/csubj(pass);
    object = dobj/obj; negation = NEGATION_WORDS (whole words); punctuation = is_punct.
    """
    pos = words["pos"].astype(str)
    dep = words["dep"].astype(str)
    out = pd.DataFrame(index=words.index)
    out["noun"] = pos.isin(NOUN_POS)
    out["verb"] = pos.isin(VERB_POS)
    out["pronoun"] = pos.isin(PRONOUN_POS)
    out["subject"] = dep.isin(SUBJECT_DEPS)
    out["object"] = dep.isin(OBJECT_DEPS)
    out["negation"] = words["text"].map(is_negation).astype(bool)
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


def cls_scores(attn_last: np.ndarray, tokens: dict[str, np.ndarray], names: tuple[str, ...] = CLS_FEATURES) -> np.ndarray:
    """Kovaleva 4.5 scores of one example: what the [CLS] query attends to in the last layer.

    attn_last: (H, n, n), the last layer. Returns (H, F): max over tokens of type f of
    sum_{s in wp(w)} A[h, 0, s]; NaN where the feature is absent.
    """
    row = np.asarray(attn_last[:, 0, :], dtype=np.float64)  # (H, n)
    out = np.full((attn_last.shape[0], len(names)), np.nan)
    for f, name in enumerate(names):
        m = tokens[name]
        if m.shape[0]:
            out[:, f] = (row @ m.T).max(axis=-1)
    return out

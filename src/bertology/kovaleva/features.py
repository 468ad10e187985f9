"""Kovaleva et al. 4.4 (attention to linguistic features) and 4.5 ([CLS] in the last layer).

Glossary: L layers, H heads, n real length of one example ([CLS] and [SEP]s included), T tokens of one
feature type, W words of one example. An attention map ``A`` is ``(L, H, n, n)`` (rows = queries,
columns = keys), cropped to the real length.

A *token* of a feature is a set of wordpiece positions: the special tokens are one position each
([CLS], every [SEP]: bertology.store.SpecialTokens); a word is all its wordpieces ``wp(w)`` (never only the first one).

Definitions (docs/reference.md#features):

* features: score(f) = max over tokens w of type f of (sum_i sum_{s in wp(w)} A[i, s]) / n, averaged
  over the examples that contain f;
* cls: last layer, the [CLS] row: max over tokens w of type f of sum_{s in wp(w)} A[0, s].

Negation words (``analysis.features.negation``): ``paper`` (the default) is exactly Kovaleva et al.'s
footnote 6 (neither, nor, not, never, none, don't, won't, didn't, hadn't, haven't, can't, isn't, wasn't,
shouldn't, couldn't, nothing, nowhere); ``extended`` adds no, nobody, cannot and every n't form. Both are
matched on whole spaCy words; a contraction is matched through its clitic (spaCy's "do" + "n't", "do" +
"nt" for "dont"): see :func:`is_negation`.

A wordpiece shared by several spaCy words (WordPiece keeps "cannot" whole, spaCy reads "can" + "not")
has one word in the store's ``word_ids`` (int16, one per position, docs/reference.md#store). The alignment
(:func:`bertology.annotate.align_words`) gives such a piece to the negation word among its sharers
(``not``), so the negation token of "I cannot go" is the piece ``cannot``; the other sharer ("can", an
AUX, which carries none of these features) is left without a piece. This module reads ``word_ids`` as
they are: wp(w) = the positions whose word id is w.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from bertology.config import ConfigError

FEATURES: tuple[str, ...] = ("cls", "sep", "noun", "verb", "pronoun", "subject", "object", "negation")
CLS_FEATURES: tuple[str, ...] = FEATURES + ("punctuation",)
WORD_FEATURES: tuple[str, ...] = ("noun", "verb", "pronoun", "subject", "object", "negation", "punctuation")

#: Kovaleva et al.'s footnote 6, exactly: the default list (``analysis.features.negation: paper``).
PAPER_NEGATION_WORDS: frozenset[str] = frozenset({
    "neither", "nor", "not", "never", "none", "don't", "won't", "didn't", "hadn't", "haven't", "can't", "isn't",
    "wasn't", "shouldn't", "couldn't", "nothing", "nowhere",
})
#: The paper's list plus the other common negators and every n't contraction
#: (``analysis.features.negation: extended``).
EXTENDED_NEGATION_WORDS: frozenset[str] = PAPER_NEGATION_WORDS | frozenset({
    "no", "nobody", "cannot", "doesn't", "aren't", "weren't", "hasn't", "wouldn't", "mustn't", "needn't",
    "mightn't", "shan't", "ain't",
})
NEGATION_LISTS: dict[str, frozenset[str]] = {"paper": PAPER_NEGATION_WORDS, "extended": EXTENDED_NEGATION_WORDS}
CLITICS: frozenset[str] = frozenset({"n't", "nt"})  # spaCy's negative clitic, with and without apostrophe

NOUN_POS = frozenset({"NOUN", "PROPN"})
VERB_POS = frozenset({"VERB"})
PRONOUN_POS = frozenset({"PRON"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass"})
OBJECT_DEPS = frozenset({"dobj", "obj"})  # direct objects (UD `obj` counts as dobj)


APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'", "`": "'"})


def normalise_word(text: str) -> str:
    """Lower-case; typographic apostrophes, the modifier letter apostrophe, acute accent and backtick to ASCII '."""
    return str(text).strip().lower().translate(APOSTROPHES)


def negation_list(negation: str) -> frozenset[str]:
    """The word list of ``analysis.features.negation`` (``paper`` or ``extended``)."""
    try:
        return NEGATION_LISTS[negation]
    except KeyError:
        raise ConfigError(f"analysis.features.negation is {negation!r}; use one of {sorted(NEGATION_LISTS)} "
                         f"(paper = Kovaleva et al.'s footnote 6, extended = that list plus no, nobody, cannot "
                         f"and every n't form)") from None


def is_negation(text: str, host: str | None = None, *, negation: str, attached: bool = True) -> bool:
    """Whole-word negation test of one spaCy word.

    Matching is on whole words (lower-cased, apostrophes normalised): "knot", "note" or "nothingness" never
    match. Contractions: spaCy splits "don't" into the host "do" and the clitic "n't" (and "dont" into
    "do" + "nt"), so the clitic is the word that carries the negation. With the ``paper`` list a clitic
    counts when host + "n't" is a listed contraction ("do" + "n't" = "don't", "wo" + "nt" = "won't",
    "ca" + "n't" = "can't"; but "does" + "n't" = "doesn't" is not in the list); with ``extended`` every
    clitic counts. "nt" counts only when `attached` to its host (no space between), so that "Windows NT"
    is no negation; "n't" counts with or without a space ("does n't" in pre-tokenised corpora).
    "cannot" is two spaCy words, "can" + "not", and "not" is in both lists.

    host: the previous word of the same text (None when there is none); negation: ``paper`` or ``extended``
    (analysis.features.negation). With ``paper``: ``is_negation("not")`` is True, ``is_negation("n't", "do")``
    True, ``is_negation("n't", "does")`` False (True with ``extended``); ``is_negation("knot")`` False.
    """
    words = negation_list(negation)
    w = normalise_word(text)
    if w in words:
        return True
    if w not in CLITICS or (w == "nt" and not attached):
        return False
    if negation == "extended":
        return True
    return host is not None and normalise_word(host) + "n't" in words


def negation_flags(words: pd.DataFrame, negation: str) -> np.ndarray:
    """(rows,) bool: :func:`is_negation` of every word of a words table, in the table's row order.

    words: columns text (+ example_idx, word, segment, start_char, end_char when present: the host of a
    word is the previous word of the same example and segment; "nt" is attached when the host ends
    where it starts).
    """
    negation_list(negation)
    if words.empty:
        return np.zeros(0, bool)
    cols = [c for c in ("example_idx", "segment", "word") if c in words.columns]
    order = np.lexsort([words[c].to_numpy() for c in reversed(cols)]) if cols else np.arange(len(words))
    w = words.iloc[order]
    text = w["text"].astype(str).tolist()
    same = np.ones(len(w), bool)
    same[0] = False
    for c in ("example_idx", "segment"):
        if c in w.columns:
            v = w[c].to_numpy()
            same[1:] &= v[1:] == v[:-1]
    if "start_char" in w.columns and "end_char" in w.columns:
        attached = np.zeros(len(w), bool)
        attached[1:] = w["start_char"].to_numpy()[1:] == w["end_char"].to_numpy()[:-1]
        attached &= same
    else:
        attached = same.copy()
    flags = np.array([is_negation(t, text[i - 1] if same[i] else None, negation=negation, attached=bool(attached[i]))
                      for i, t in enumerate(text)], dtype=bool)
    out = np.zeros(len(w), bool)
    out[order] = flags
    return out


def word_feature_flags(words: pd.DataFrame, *, negation: str) -> pd.DataFrame:
    """Boolean feature columns for a words table (columns text, pos, dep, is_punct as in words.parquet).

    Returns a frame with the same index and one bool column per name in WORD_FEATURES.
    noun = POS NOUN/PROPN; verb = VERB (not AUX); pronoun = PRON; subject = nsubj/nsubjpass/csubj(pass);
    object = dobj/obj; negation = whole words of the `negation` list (``paper``: Kovaleva et al.'s
    footnote 6, the default; ``extended``), contractions through their clitic (:func:`is_negation`);
    punctuation = is_punct.
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

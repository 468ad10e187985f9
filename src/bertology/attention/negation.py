"""Negation words (``analysis.features.negation``): the two lists and the whole-word test of one spaCy word.

``paper`` (the default) is exactly Kovaleva et al.'s footnote 6 (neither, nor, not, never, none, don't, won't,
didn't, hadn't, haven't, can't, isn't, wasn't, shouldn't, couldn't, nothing, nowhere); ``extended`` adds no,
nobody, cannot and every n't form. Both are matched on whole spaCy words; a contraction is matched through its
clitic (spaCy's "do" + "n't", "do" + "nt" for "dont"): see :func:`is_negation`.

A neutral module below both of its readers: the word annotation (bertology.attention.annotate: the words that claim a
shared wordpiece) and Kovaleva 4.4's features (bertology.kovaleva.features: the negation feature).

>>> is_negation("not", negation="paper"), is_negation("knot", negation="paper")
(True, False)
>>> is_negation("n't", "does", negation="paper"), is_negation("n't", "does", negation="extended")
(False, True)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.pipeline.config import ConfigError

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

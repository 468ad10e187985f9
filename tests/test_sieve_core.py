"""Sieve masks, bias scores and tests (Pande et al. 2021, docs/reference.md#sieve) on inputs with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bertology.sieve.masks import ROLES, chunk_masks, roles_for, word_relations
from bertology.sieve.reduce import one_sided_tests, sieve_table
from bertology.sieve.scores import example_scores
from bertology.store import SpecialTokens

CLS, SEP, PAD = 101, 102, 0
SPECIALS = SpecialTokens(CLS, SEP)

# [CLS] a## a## a## b [SEP] c d [SEP] pad pad : word a split into three wordpieces, a pair with two segments
IDS = np.array([[CLS, 11, 12, 13, 14, SEP, 15, 16, SEP, PAD, PAD]])
TT = np.array([[0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0]])
WID = np.array([[-1, 0, 0, 0, 1, -1, 2, 3, -1, -1, -1]])
LEN = np.array([9])
# word 0 --nsubj--> word 1 (root); word 2 --obj (UD, counts as dobj)--> word 3 (root of segment b)
WORDS = pd.DataFrame({"example_idx": [7, 7, 7, 7], "word": [0, 1, 2, 3], "dep": ["nsubj", "ROOT", "obj", "ROOT"],
                      "head": [1, 1, 3, 3]})


def sieve_sets(role: str, window: int = 2) -> dict[int, set[int]]:
    sieve, queries = chunk_masks(IDS, TT, WID, LEN, np.array([7]), WORDS, specials=SPECIALS, window=window,
                                 roles=ROLES)
    r = ROLES.index(role)
    return {int(t): set(np.flatnonzero(sieve[0, r, t]).tolist()) for t in np.flatnonzero(queries[0, r])}


def test_structural_sieves_skip_specials_and_respect_edges():
    assert sieve_sets("local") == {1: {1, 2, 3}, 2: {1, 2, 3, 4}, 3: {1, 2, 3, 4}, 4: {2, 3, 4, 6},
                                   6: {4, 6, 7}, 7: {6, 7}}
    # first token has no predecessor in Q, last no successor: they are not queries
    assert sieve_sets("prev_local") == {2: {1}, 3: {1, 2}, 4: {2, 3}, 6: {4}, 7: {6}}
    assert sieve_sets("next_local") == {1: {2, 3}, 2: {3, 4}, 3: {4}, 4: {6}, 6: {7}}
    assert sieve_sets("prev_local", window=1) == {2: {1}, 3: {2}, 4: {3}, 7: {6}}
    assert sieve_sets("block") == {t: ({1, 2, 3, 4} if t < 5 else {6, 7}) for t in (1, 2, 3, 4, 6, 7)}
    assert sieve_sets("delimiter") == {t: {0, 5, 8} for t in (1, 2, 3, 4, 6, 7)}
    assert sieve_sets("cls") == {t: {0} for t in (1, 2, 3, 4, 6, 7)}
    assert sieve_sets("sep") == {t: {5, 8} for t in (1, 2, 3, 4, 6, 7)}


def test_syntactic_sieves_map_words_to_all_their_wordpieces():
    assert sieve_sets("nsubj") == {1: {4}, 2: {4}, 3: {4}}
    assert sieve_sets("dobj") == {6: {7}}                       # UD obj counts as dobj
    assert sieve_sets("amod") == {} and sieve_sets("advmod") == {}
    assert sieve_sets("syntactic") == {1: {4}, 2: {4}, 3: {4}, 6: {7}}


def test_head_word_in_several_wordpieces_and_union_of_relations():
    # [CLS] x y## y## z [SEP]: x --amod--> y (2 wordpieces), z --advmod--> y
    ids = np.array([[CLS, 20, 21, 22, 23, SEP]])
    wid = np.array([[-1, 0, 1, 1, 2, -1]])
    words = pd.DataFrame({"example_idx": [0, 0, 0], "word": [0, 1, 2], "dep": ["amod", "ROOT", "advmod"],
                          "head": [1, 1, 1]})
    sieve, queries = chunk_masks(ids, np.zeros_like(ids), wid, np.array([6]), np.array([0]), words, window=2,
                                 specials=SPECIALS, roles=("amod", "advmod", "syntactic"))
    assert np.flatnonzero(queries[0, 0]).tolist() == [1]
    assert np.flatnonzero(sieve[0, 0, 1]).tolist() == [2, 3]
    assert np.flatnonzero(queries[0, 1]).tolist() == [4]
    assert np.flatnonzero(queries[0, 2]).tolist() == [1, 4]
    assert np.flatnonzero(sieve[0, 2, 4]).tolist() == [2, 3]


def test_word_relations_ignores_other_examples_roots_and_unknown_labels():
    words = pd.concat([WORDS, pd.DataFrame({"example_idx": [9], "word": [0], "dep": ["nsubj"], "head": [1]}),
                       pd.DataFrame({"example_idx": [7], "word": [1], "dep": ["det"], "head": [0]})])
    rel = word_relations(words, np.array([7]), 4)
    assert rel.shape == (1, 4, 4, 4)
    assert sorted(zip(*np.nonzero(rel[0]))) == [(0, 0, 1), (1, 2, 3)]


def test_block_only_for_pair_tasks():
    assert "block" in roles_for(True) and "block" not in roles_for(False)
    assert len(roles_for(False)) == len(ROLES) - 1


def _cls_heavy_attention(length: np.ndarray, T: int, m: float) -> np.ndarray:
    """(E, 1, 1, T, T): every real row puts m on [CLS], (1 - m) / (n - 1) on each other real token."""
    E = len(length)
    att = np.full((E, 1, 1, T, T), np.nan)
    for e, n in enumerate(length):
        att[e, 0, 0, :n, :n] = (1 - m) / (n - 1)
        att[e, 0, 0, :n, 0] = m
    return att.astype(np.float16)


def test_example_scores_match_closed_form():
    m = 0.6
    ids = np.vstack([IDS, [[CLS, 30, 31, 32, SEP, 33, 34, SEP, PAD, PAD, PAD]]])
    tt = np.vstack([TT, [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0]]])
    wid = np.vstack([WID, [[-1, 0, 1, 2, -1, 3, 4, -1, -1, -1, -1]]])
    length = np.array([9, 8])
    sieve, queries = chunk_masks(ids, tt, wid, length, np.array([7, 8]), WORDS, specials=SPECIALS, window=2, roles=ROLES)
    att = _cls_heavy_attention(length, 11, m)
    got = example_scores(att, sieve, queries, length)[:, 0, 0]
    r = {role: i for i, role in enumerate(ROLES)}
    for e, n in enumerate(length):
        other = n * (1 - m) / (n - 1)                          # any sieve inside Q
        assert got[e, r["cls"]] == pytest.approx(n * m, rel=2e-3)
        assert got[e, r["sep"]] == pytest.approx(other, rel=2e-3)
        assert got[e, r["delimiter"]] == pytest.approx(n * (m + 2 * (1 - m) / (n - 1)) / 3, rel=2e-3)
        for role in ("local", "prev_local", "next_local", "block"):
            assert got[e, r[role]] == pytest.approx(other, rel=2e-3)
    assert got[0, r["syntactic"]] == pytest.approx(9 * 0.4 / 8, rel=2e-3)
    assert np.isnan(got[1, r["syntactic"]]) and np.isnan(got[:, r["amod"]]).all()   # no queries -> left out


def reference_scores(att, ids, tt, wid, length, arcs, window):
    """Straight from the definition, one token at a time (slow; independent of masks.py)."""
    E, L, H = att.shape[:3]
    out = np.full((E, L, H, len(ROLES)), np.nan)
    for e in range(E):
        n = int(length[e])
        seps = [i for i in range(n) if ids[e, i] == SEP]
        Q = [i for i in range(1, n) if i not in seps]
        heads = {}
        for (d, rel, h) in arcs[e]:
            heads.setdefault(d, []).append((rel, h))
        for r, role in enumerate(ROLES):
            def S(t):
                if role == "local":
                    return [s for s in Q if abs(s - t) <= window]
                if role == "prev_local":
                    return [s for s in Q if 1 <= t - s <= window]
                if role == "next_local":
                    return [s for s in Q if 1 <= s - t <= window]
                if role == "block":
                    return [s for s in Q if tt[e, s] == tt[e, t]]
                if role == "delimiter":
                    return [0] + seps
                if role == "cls":
                    return [0]
                if role == "sep":
                    return seps
                hw = {h for rel, h in heads.get(wid[e, t], []) if role == "syntactic" or rel == role}
                return [s for s in Q if wid[e, s] in hw]
            for l in range(L):
                for h in range(H):
                    betas = [n * np.mean([float(att[e, l, h, t, s]) for s in S(t)]) for t in Q if S(t)]
                    if betas:
                        out[e, l, h, r] = np.mean(betas)
    return out


def test_scores_equal_a_token_by_token_reference_on_random_attention():
    rng = np.random.default_rng(0)
    E, L, H, T = 4, 2, 3, 14
    length = np.array([14, 9, 12, 6])
    ids = rng.integers(1000, 2000, size=(E, T))
    tt = np.zeros((E, T), dtype=np.int8)
    wid = np.full((E, T), -1)
    arcs = []
    words = []
    for e, n in enumerate(length):
        ids[e, 0], ids[e, n - 1], ids[e, n:] = CLS, SEP, PAD
        mid = n // 2
        ids[e, mid] = SEP
        tt[e, mid + 1:n] = 1
        # words of 1-2 wordpieces over Q
        w, pos = 0, 1
        while pos < n - 1:
            if pos == mid:
                pos += 1
                continue
            span = 2 if (pos + 1 < n - 1 and pos + 1 != mid and rng.random() < 0.4) else 1
            wid[e, pos:pos + span] = w
            pos += span
            w += 1
        labels = rng.choice(["nsubj", "dobj", "obj", "amod", "advmod", "det", "ROOT"], size=w)
        head = rng.integers(0, w, size=w)
        words += [(e, d, labels[d], head[d]) for d in range(w)]
        arcs.append([(d, {"obj": "dobj"}.get(labels[d], labels[d]), head[d]) for d in range(w)
                     if {"obj": "dobj"}.get(labels[d], labels[d]) in ("nsubj", "dobj", "amod", "advmod")
                     and head[d] != d])
    words = pd.DataFrame(words, columns=["example_idx", "word", "dep", "head"])
    logits = rng.normal(size=(E, L, H, T, T)) * 2
    att = np.full((E, L, H, T, T), np.nan)
    for e, n in enumerate(length):
        x = np.exp(logits[e, :, :, :n, :n])
        att[e, :, :, :n, :n] = x / x.sum(-1, keepdims=True)
    att = att.astype(np.float16)
    for window in (1, 2, 3):
        sieve, queries = chunk_masks(ids, tt, wid, length, np.arange(E), words, specials=SPECIALS, window=window)
        got = example_scores(att, sieve, queries, length)
        want = reference_scores(att, ids, tt, wid, length, arcs, window)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_tests_equal_scipy_one_sided_ttest():
    rng = np.random.default_rng(1)
    scores = rng.gamma(2.0, 1.6, size=(40, 2, 3, 4))
    scores[rng.random(scores.shape) < 0.2] = np.nan
    scores[:, 1, 2, 3] = np.nan                      # a role without any query
    scores[1:, 0, 0, 0] = np.nan                     # a single example: no test
    res = one_sided_tests(scores, 3.0)
    for l in range(2):
        for h in range(3):
            for r in range(4):
                x = scores[:, l, h, r]
                x = x[~np.isnan(x)]
                assert res["n"][l, h, r] == len(x)
                if len(x) < 2:
                    assert np.isnan(res["t"][l, h, r]) and np.isnan(res["p_value"][l, h, r])
                    continue
                want = stats.ttest_1samp(x, 3.0, alternative="greater")
                assert res["t"][l, h, r] == pytest.approx(want.statistic, rel=1e-10)
                assert res["p_value"][l, h, r] == pytest.approx(want.pvalue, rel=1e-10)
                manual = (x.mean() - 3.0) / (x.std(ddof=1) / np.sqrt(len(x)))
                assert res["t"][l, h, r] == pytest.approx(manual, rel=1e-10)
                assert res["p_value"][l, h, r] == pytest.approx(stats.t.sf(manual, len(x) - 1), rel=1e-8)
                assert res["std"][l, h, r] == pytest.approx(x.std(ddof=1), rel=1e-10)


def test_sieve_table_columns_assignment_and_fdr_bh():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(2)
    roles = ("local", "cls", "syntactic")
    # means spread around tau so that some heads pass only without correction
    shift = rng.uniform(-0.5, 1.2, size=(1, 3, 2, 3))
    scores = 3.0 + shift + rng.normal(size=(12, 3, 2, 3))
    plain = sieve_table(scores, roles, tau=3.0, alpha=0.05, correction="none")
    assert list(plain.columns[:10]) == ["layer", "head", "role", "n", "mean", "std", "t", "p_value", "assigned", "tau"]
    assert len(plain) == 3 * 2 * 3
    assert (plain["assigned"] == (plain["p_value"] < 0.05)).all()
    assert plain.query("layer == 2 and head == 1 and role == 'cls'")["mean"].item() == pytest.approx(
        scores[:, 2, 1, 1].mean())
    fdr = sieve_table(scores, roles, tau=3.0, alpha=0.05, correction="fdr_bh")
    want = multipletests(plain["p_value"], alpha=0.05, method="fdr_bh")
    np.testing.assert_allclose(fdr["p_adjusted"], want[1])
    assert (fdr["assigned"] == want[0]).all()
    assert fdr["assigned"].sum() <= plain["assigned"].sum()
    assert (fdr["p_value"] == plain["p_value"]).all()
    with pytest.raises(ValueError, match="fdr_bh"):
        sieve_table(scores, roles, tau=3.0, alpha=0.05, correction="bonferroni")


def test_special_tokens_come_from_the_store_attributes():
    """The one [CLS]/[SEP] definition (bertology.store.SpecialTokens): the recorded ids inside the real length."""
    from bertology.store import StoreError

    specials = SpecialTokens.of({"cls_token_id": 0, "sep_token_id": 2})
    assert specials == SpecialTokens(0, 2)
    # RoBERTa-style pair <s> a b </s></s> c </s> <pad>: two [SEP]s in the middle, padding (id 2 here) ignored
    ids = np.array([[0, 11, 12, 2, 2, 13, 2, 2, 2]])
    cls, sep = specials.masks(ids, np.array([7]))
    assert np.flatnonzero(cls[0]).tolist() == [0] and np.flatnonzero(sep[0]).tolist() == [3, 4, 6]
    # one example at a time (the Kovaleva statistics): a scalar length
    cls, sep = specials.masks(ids[0, :7], 7)
    assert cls.tolist() == [True] + [False] * 6 and np.flatnonzero(sep).tolist() == [3, 4, 6]
    # a tokenizer without a [CLS] token has none
    cls, _ = SpecialTokens(None, 2).masks(ids, np.array([7]))
    assert not cls.any()
    with pytest.raises(StoreError, match="sep_token_id"):
        SpecialTokens.of({"cls_token_id": 0})


def test_real_block_reads_only_each_example_s_length():
    from bertology.store import as_float32
    from bertology.sieve.scores import real_block

    att = np.full((2, 1, 1, 5, 5), 7.0, np.float16)  # whatever lies past a length is never read
    att[0, ..., :3, :3] = 0.25
    att[1, ..., :5, :5] = 0.125
    got = real_block(att, np.array([3, 5]), np.array([1, 0]), size=6)
    assert got.dtype == np.float32 and got.shape == (2, 1, 1, 6, 6)
    assert (got[0, ..., :5, :5] == 0.125).all() and (got[0, ..., 5, :] == 0).all() and (got[0, ..., :, 5] == 0).all()
    assert (got[1, ..., :3, :3] == 0.25).all() and got[1].sum() == 9 * 0.25
    bits = np.arange(1 << 16, dtype=np.uint16).view(np.float16)  # every float16, NaNs and infinities included
    assert as_float32(bits).tobytes() == bits.astype(np.float32).tobytes()

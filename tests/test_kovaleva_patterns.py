"""Kovaleva 4.1: the rule classifier on maps built to have each structure; the 8-conv CNN; the export sheet."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.kovaleva import patterns as pat
from tests.builders.kovaleva import block, long_example, on_columns, pair_example, previous_token, uniform


def _classes(ex, maps):
    return [pat.CLASSES[c] for c in pat.classify_rule(np.stack(maps), ex.special, ex.segments)]


def test_rule_on_maps_of_known_structure():
    ex = long_example(14, 12)  # n = 29, a sentence pair
    n = ex.n
    specials = list(np.flatnonzero(ex.special))
    vertical = on_columns(n, specials)
    diagonal = previous_token(n)
    nxt = np.roll(np.eye(n), 1, axis=1)  # row i -> i+1 (wrapping the last row to [CLS])
    rng = np.random.default_rng(0)
    hetero = rng.dirichlet(np.full(n, 0.3), size=n)
    got = _classes(ex, [vertical, diagonal, nxt, 0.5 * vertical + 0.5 * diagonal,
                        block(ex.segments, ex.special), hetero, uniform(n)])
    assert got == ["vertical", "diagonal", "diagonal", "vertical+diagonal", "block", "heterogeneous", "heterogeneous"]


def test_block_needs_a_sentence_pair():
    ex = long_example(20, None)
    within = block(ex.segments, ex.special)  # uniform over one sentence = uniform over real words
    assert _classes(ex, [within]) == ["heterogeneous"]
    v, d, b = pat.pattern_masses(within[None], ex.special, ex.segments)
    assert np.isnan(b[0])


def test_masses_are_excess_over_uniform():
    ex = pair_example()
    v, d, b = pat.pattern_masses(np.stack([uniform(ex.n), on_columns(ex.n, [0])]), ex.special, ex.segments)
    assert v[0] == pytest.approx(0.0, abs=1e-6) and d[0] == pytest.approx(0.0, abs=1e-6)
    assert b[0] == pytest.approx(0.0, abs=1e-6)
    assert v[1] == pytest.approx(1.0)


def test_vertical_plus_diagonal_on_short_pair():
    ex = pair_example()  # n = 12: V* = 0.48, D* = 0.24 for an even mix of [CLS]/[SEP] and previous token
    mix = 0.5 * on_columns(ex.n, [0, 6, 11]) + 0.5 * previous_token(ex.n)
    assert _classes(ex, [mix, previous_token(ex.n), block(ex.segments, ex.special)]) == \
        ["vertical+diagonal", "diagonal", "block"]


def _synthetic_maps(count: int, seed: int) -> tuple[list[np.ndarray], list[str]]:
    rng = np.random.default_rng(seed)
    maps, labels = [], []
    for i in range(count):
        ex = long_example(int(rng.integers(6, 14)), int(rng.integers(6, 12)))
        n = ex.n
        specials = list(np.flatnonzero(ex.special))
        kind = pat.CLASSES[i % len(pat.CLASSES)]
        noise = rng.dirichlet(np.ones(n), size=n)
        base = {"vertical": on_columns(n, specials), "diagonal": previous_token(n),
                "vertical+diagonal": 0.5 * on_columns(n, specials) + 0.5 * previous_token(n),
                "block": block(ex.segments, ex.special), "heterogeneous": noise}[kind]
        maps.append(0.85 * base + 0.15 * noise)
        labels.append(kind)
    return maps, labels


def test_cnn_has_8_conv_layers_and_learns_known_patterns(tmp_path):
    import torch

    torch.set_num_threads(1)  # tiny convolutions: threads only contend with each other
    model = pat.build_cnn(16)
    convs = [m for m in model if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 8 and sum(isinstance(m, torch.nn.ReLU) for m in model) == 8
    maps, labels = _synthetic_maps(100, 0)
    cnn, report = pat.train_cnn(maps, labels, size=16, epochs=20, seed=0, holdout=0)
    assert report["n"] == 100 and report["counts"]["block"] == 20
    _, report = pat.train_cnn(maps[:20], labels[:20], size=16, epochs=1, seed=0, holdout=0.5)
    assert report["holdout_n"] == 10 and 0 <= report["holdout_f1_macro"] <= 1
    test_maps, test_labels = _synthetic_maps(50, 1)
    pred = [pat.CLASSES[c] for c in cnn.predict(test_maps)]
    assert np.mean(np.array(pred) == np.array(test_labels)) >= 0.8
    cnn.save(tmp_path / "cnn.pt")
    again = pat.PatternCNN.load(tmp_path / "cnn.pt")
    assert np.array_equal(again.predict(test_maps), cnn.predict(test_maps))


def test_unknown_labels_and_missing_model_are_explained(tmp_path):
    with pytest.raises(ValueError, match="unknown pattern label"):
        pat.train_cnn([np.eye(4)], ["stripes"])
    with pytest.raises(FileNotFoundError, match="patterns-train"):
        pat.PatternCNN.load(tmp_path / "none.pt")


def test_sample_maps_is_seeded_and_distinct():
    a = pat.sample_maps(10, 2, 3, 20, seed=3)
    assert a.shape == (20, 3) and len({tuple(r) for r in a}) == 20
    assert np.array_equal(a, pat.sample_maps(10, 2, 3, 20, seed=3))
    assert pat.sample_maps(2, 1, 1, 50, seed=0).shape == (2, 3)


def _float16_maps(rng, n: int, count: int, special: np.ndarray, segments) -> np.ndarray:
    """Maps as a store holds them: softmax rows rounded to float16 (a row sums to 1 only up to rounding, some above),
    every kind mixed in random proportions so that masses fall on both sides of every threshold."""
    kinds = [on_columns(n, list(np.flatnonzero(special))), previous_token(n), block(segments, special), uniform(n)]
    w = rng.dirichlet(np.full(len(kinds), 0.4), size=count)  # (count, kinds)
    maps = np.einsum("ck,kij->cij", w, np.stack(kinds)) + rng.random((count, n, n)) * 0.02
    maps /= maps.sum(-1, keepdims=True)
    return maps.astype(np.float16).astype(np.float32)


def test_exact_rule_gives_the_rule_s_classes_on_float16_maps():
    """classify_rule_exact = classify_rule, map by map, on float16 maps whose rows sum to 1 +- rounding (so that the
    float32 products of classify_rule may round), including masses set right at the thresholds."""
    rng = np.random.default_rng(5)
    for ex in (pair_example(), long_example(14, 12), long_example(9, None)):
        maps = _float16_maps(rng, ex.n, 6 * 12, ex.special, ex.segments).reshape(6, 12, ex.n, ex.n)
        assert np.array_equal(pat.classify_rule_exact(maps, ex.special, ex.segments),
                              pat.classify_rule(maps, ex.special, ex.segments))


def test_exact_rule_defers_to_the_rule_next_to_a_threshold(monkeypatch):
    """A map whose special mass may round in float32 (rows summing to more than 1) and whose V* is at a threshold is
    classified by classify_rule itself; a map whose sums cannot round never is."""
    ex = long_example(14, 12)
    n, special = ex.n, ex.special
    sp = list(np.flatnonzero(special))
    heavy = on_columns(n, sp).astype(np.float16).astype(np.float32)
    heavy[:, sp[0]] += np.float32(2.0 ** -10)  # every row's special mass above 1
    light = uniform(n).astype(np.float16).astype(np.float32)
    maps = np.stack([heavy, light])[None]  # (1, 2, n, n)
    v = float(pat.pattern_masses(heavy[None], special, ex.segments)[0][0])
    at = {"vertical": v}  # the heavy map's V* right at the threshold
    calls = []
    real = pat.classify_rule
    monkeypatch.setattr(pat, "classify_rule", lambda a, *args, **kw: calls.append(a.shape[0]) or real(a, *args, **kw))
    got = pat.classify_rule_exact(maps, special, ex.segments, at)
    assert calls == [1]  # the heavy map, alone
    assert np.array_equal(got[0], real(maps[0], special, ex.segments, at))

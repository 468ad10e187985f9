"""Decoder head statistics (bertology.decoders.heads) on maps whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.decoders import heads


def causal_random(rng, e, l, h, t):
    """(E, L, H, T, T) random causal attention maps (rows sum to 1 over keys <= query)."""
    logits = rng.normal(size=(e, l, h, t, t))
    logits = np.where(np.tril(np.ones((t, t), bool)), logits, -np.inf)
    a = np.exp(logits - logits.max(-1, keepdims=True))
    return a / a.sum(-1, keepdims=True)


def test_sink_alpha_is_the_authors_mean_received_attention():
    rng = np.random.default_rng(0)
    attn = causal_random(rng, 3, 2, 4, 9)
    alpha = heads.sink_alpha(attn, np.full(3, 9))
    ratios = np.arange(9, 0, -1)[None, None, None, None, :]               # eval_sink_open_source.py's ratios
    np.testing.assert_allclose(alpha, (attn / ratios).sum(axis=-2), rtol=1e-12)
    # every query on the first token: alpha_0 = 1, every other key 0
    sink = np.zeros((1, 1, 1, 5, 5))
    sink[..., 0] = 1.0
    np.testing.assert_array_equal(heads.sink_alpha(sink, np.array([5]))[0, 0, 0], [1, 0, 0, 0, 0])
    # uniform causal attention: A[t, 0] = 1 / (t + 1), alpha_0 = mean over t of 1 / (t + 1)
    uniform = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    assert heads.sink_alpha(uniform[None, None, None], np.array([4]))[0, 0, 0, 0] == pytest.approx(
        np.mean(1 / np.arange(1, 5)))


def test_sink_alpha_reads_only_the_real_positions():
    rng = np.random.default_rng(1)
    attn = causal_random(rng, 2, 1, 3, 7)
    short = attn.copy()
    short[1, ..., 4:, :] = 99.0  # padding rows of the second example (n = 4): never read
    alpha = heads.sink_alpha(short, np.array([7, 4]))
    assert np.isnan(alpha[1, ..., 4:]).all() and not np.isnan(alpha[1, ..., :4]).any()
    np.testing.assert_allclose(alpha[1, ..., :4], heads.sink_alpha(attn[1:, ..., :4, :4], np.array([4]))[0])


def test_sink_rate_counts_sequences_layers_and_heads():
    alpha0 = np.array([[[0.9, 0.1], [0.31, 0.3]]])                         # (E=1, L=2, H=2)
    assert heads.sink_rate(alpha0) == pytest.approx(50.0)                  # 0.9 and 0.31 exceed 0.3
    assert heads.sink_rate(alpha0, epsilon=0.05) == pytest.approx(100.0)


def test_the_detection_patterns_are_transformerlens():
    tokens = np.array([5, 7, 5, 7, 9])
    prev = heads.previous_token_pattern(5)
    assert prev[1, 0] == prev[4, 3] == 1 and prev.sum() == 4
    dup = heads.duplicate_token_pattern(tokens)
    assert {tuple(x) for x in np.argwhere(dup)} == {(2, 0), (3, 1)}
    ind = heads.induction_pattern(tokens)
    assert {tuple(x) for x in np.argwhere(ind)} == {(2, 1), (3, 2)}      # the token after the earlier occurrence
    batched = heads.induction_pattern(np.stack([tokens, tokens[::-1]]))
    np.testing.assert_array_equal(batched[0], ind)


def test_detection_score_is_the_share_of_attention_on_the_pattern():
    t = 6
    prev_head = np.eye(t, k=-1)
    prev_head[0, 0] = 1.0                                                  # the first query can only attend to itself
    attn = prev_head[None, None, None]
    pattern = heads.previous_token_pattern(t)
    assert heads.detection_scores(attn, pattern)[0, 0, 0] == pytest.approx((t - 1) / t)
    assert heads.detection_scores(attn, pattern, exclude_current_token=True)[0, 0, 0] == pytest.approx(1.0)
    # a shorter example: only its n x n block counts
    padded = np.zeros((1, 1, 1, 8, 8))
    padded[..., :t, :t] = prev_head
    padded[..., t:, :] = 1.0
    assert heads.detection_scores(padded, heads.previous_token_pattern(8), np.array([t]))[0, 0, 0] == \
        pytest.approx((t - 1) / t)


def test_a_perfect_induction_head_on_the_probe():
    s = 5
    rng = np.random.default_rng(3)
    tokens = heads.repeated_random_tokens(rng, vocab_size=10_000, seq_len=s, batch=4, bos_id=0)
    assert tokens.shape == (4, 2 * s + 1)
    np.testing.assert_array_equal(tokens[:, 1:s + 1], tokens[:, s + 1:])
    t = 2 * s + 1
    attn = np.zeros((4, 1, 1, t, t))
    for i in range(t):
        attn[..., i, i - s + 1 if i >= s + 1 else 0] = 1.0                 # second half: the token after i's twin
    stripe = heads.induction_stripe_score(attn, s)
    assert stripe[0, 0] == pytest.approx((1 + 0 + s) / (s + 2))          # rows s-1 (on BOS), s (not), s+1..2s
    patterns = heads.induction_pattern(tokens)                             # no token repeats within a half here
    assert np.unique(tokens[:, 1:s + 1]).size == 4 * s
    score = heads.detection_scores(attn, patterns).mean(axis=0)
    assert score[0, 0] == pytest.approx(s / t)
    with pytest.raises(ValueError, match="repeated twice"):
        heads.induction_stripe_score(attn[..., :-1, :-1], s)

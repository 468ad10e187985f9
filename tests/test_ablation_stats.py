"""Statistics of the disabling sweep: metrics per configuration, paired bootstrap, paired tests, BH."""

from __future__ import annotations

import numpy as np
import pytest

from bertology import ablation_stats as st
from bertology.metrics import compute_metrics


@pytest.mark.parametrize("task", ["cola", "mrpc", "stsb", "mnli"])
def test_batched_metric_equals_compute_metrics(task):
    rng = np.random.default_rng(0)
    e = 60
    if task == "stsb":
        labels = rng.integers(0, 6, e).astype(float)          # ties, as in STS-B gold scores
        preds = np.vstack([rng.normal(size=e), np.round(rng.normal(size=e)), np.zeros(e), labels + 0.1])
    else:
        k = 3 if task == "mnli" else 2
        labels = rng.integers(0, k, e)
        preds = np.vstack([rng.integers(0, k, e), labels, np.zeros(e, int), np.ones(e, int), 1 - (labels > 0)])
    for name in compute_metrics(task, preds[0], labels):
        got = st.batched_metric(name, labels, preds)
        want = [compute_metrics(task, p, labels)[name] for p in preds]
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=name)


def test_mcnemar_exact_known_value():
    # 10 discordant examples: the configuration fixes 8, breaks 2 -> two-sided binomial p = 112/1024
    labels = np.ones(30, int)
    base = np.ones(30, int)
    base[:8] = 0
    cfg = np.ones(30, int)
    cfg[8:10] = 0
    p = st.mcnemar_exact(labels, base, cfg[None])
    assert p[0] == pytest.approx(112 / 1024, abs=1e-12)
    assert st.mcnemar_exact(labels, base, base[None])[0] == 1.0   # nothing changed


def test_randomization_one_changed_example_has_p_one():
    # with one differing example every swap gives |delta*| == |delta|: p = (1 + R) / (R + 1) = 1
    labels = np.array([1, 0, 1, 1, 0, 1, 0, 0])
    base = labels.copy()
    cfg = labels.copy()
    cfg[0] = 0
    p = st.randomization_test("f1", labels, base, cfg[None], n_rounds=50, seed=0)
    assert p[0] == 1.0


def test_randomization_detects_a_large_change():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 300)
    base = np.where(rng.random(300) < 0.6, labels, 1 - labels)
    cfg = labels.copy()                                   # fixes every error of the baseline
    p = st.randomization_test("mcc", labels, base, cfg[None], n_rounds=200, seed=0)
    assert p[0] == pytest.approx(1 / 201)


def test_bootstrap_interval_contains_the_constructed_delta():
    # 400 examples, baseline right on 300, the configuration fixes 40 more and breaks none: delta = 0.1
    labels = np.ones(400, int)
    base = np.r_[np.ones(300, int), np.zeros(100, int)]
    cfg = base.copy()
    cfg[300:340] = 1
    idx = st.bootstrap_indices(400, 2000, seed=0)
    boot = st.paired_bootstrap_deltas("accuracy", labels, base, cfg[None], idx)
    low, high = st.percentile_interval(boot)
    assert low[0] < 0.1 < high[0] and low[0] > 0
    se = np.sqrt(0.1 * 0.9 / 400)                         # paired differences are Bernoulli(0.1)
    assert high[0] - low[0] == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_bootstrap_interval_coverage():
    # per example: config fixes a baseline error w.p. 0.08, breaks a correct answer w.p. 0.03 -> delta 0.05
    rng = np.random.default_rng(2)
    covered, reps = 0, 150
    for r in range(reps):
        u = rng.random(300)
        labels = np.ones(300, int)
        base = np.where(u < 0.08, 0, 1)                   # first 8%: baseline wrong, config right
        cfg = np.where((u >= 0.08) & (u < 0.11), 0, 1)    # next 3%: baseline right, config wrong
        base[(u >= 0.11) & (u < 0.31)] = 0                # both wrong on another 20%
        cfg[(u >= 0.11) & (u < 0.31)] = 0
        boot = st.paired_bootstrap_deltas("accuracy", labels, base, cfg[None], st.bootstrap_indices(300, 300, r))
        low, high = st.percentile_interval(boot)
        covered += low[0] <= 0.05 <= high[0]
    assert 0.88 <= covered / reps <= 0.995


def test_fdr_bh_known_values():
    got = st.fdr_bh(np.array([0.01, 0.04, 0.03, 0.5, np.nan]))
    np.testing.assert_allclose(got[:4], [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.isnan(got[4])


def test_no_bootstrap_gives_nan_intervals():
    low, high = st.percentile_interval(np.zeros((0, 3)))
    assert np.isnan(low).all() and np.isnan(high).all()
    assert np.isnan(st.randomization_test("f1", np.ones(4, int), np.ones(4, int), np.ones((2, 4), int), 0, 0)).all()


def test_batched_metric_rejects_bad_shapes():
    with pytest.raises(ValueError, match="preds must be"):
        st.batched_metric("accuracy", np.ones(4), np.ones((2, 5)))
    with pytest.raises(ValueError, match="unknown metric"):
        st.batched_metric("bleu", np.ones(4), np.ones((2, 4)))

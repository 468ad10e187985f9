"""Statistics of the disabling sweep: the one metrics code (batched = Table 1's), paired bootstrap, paired
tests, BH."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from bertology.ablation import significance as st
from bertology.models.metrics import batched_metric, compute_metrics
from bertology.stats.moments import adjust_p



def _corr(fn, y, p) -> float:
    """How Table 1 called SciPy: 0 for fewer than two examples or a constant side (np.std == 0)."""
    y, p = np.asarray(y, float), np.asarray(p, float)
    if len(y) < 2 or np.std(y) == 0 or np.std(p) == 0:
        return 0.0
    return float(fn(y, p)[0])


# The libraries' implementations of Table 1's metrics: metrics.py's own code must give the same numbers.
LIBRARY = {
    "accuracy": lambda y, p: float(accuracy_score(y, p)),
    "f1": lambda y, p: float(f1_score(y, p, zero_division=0.0)),
    "mcc": lambda y, p: float(matthews_corrcoef(y, p)),
    "pearson": lambda y, p: _corr(stats.pearsonr, y, p),
    "spearman": lambda y, p: _corr(stats.spearmanr, y, p),
}


def _cases(rng, name, e):
    if name in ("pearson", "spearman"):
        labels = (rng.integers(0, 26, e) / 5).astype(np.float32)    # STS-B: ties, float32 in the parquet
        preds = np.vstack([rng.normal(size=e) * 2 + 1, np.round(rng.normal(size=e), 1),
                           labels + rng.normal(size=e) * 0.1, -3 * labels.astype(float) + 0.5])
        return labels, preds
    k = 3 if name != "f1" and e % 2 else 2
    labels = rng.integers(0, k, e)
    preds = np.vstack([rng.integers(0, k, e), labels, np.zeros(e, int), np.ones(e, int), 1 - (labels > 0),
                       np.where(rng.random(e) < 0.8, labels, (labels + 1) % k)])
    return labels, preds


@pytest.mark.parametrize("name", list(LIBRARY))
def test_batched_metric_equals_the_libraries_bit_for_bit(name):
    """Every row, every size, strided (bootstrap-indexed) input too: exactly scikit-learn's / SciPy's number."""
    rng = np.random.default_rng(0)
    for e in (2, 3, 17, 60, 255, 1500):
        labels, preds = _cases(rng, name, e)
        idx = rng.integers(0, e, e)
        for lab, pr in ((labels, preds), (labels[idx], preds[:, idx])):   # preds[:, idx] is not C-contiguous
            got = batched_metric(name, lab, pr)
            want = np.array([LIBRARY[name](lab, p) for p in pr])
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, E={e}")


@pytest.mark.parametrize("name", [*LIBRARY, "macro_f1"])
def test_batched_metric_with_a_label_vector_per_row_is_each_row_alone(name):
    """labels (C, E), one per row (a bootstrap resample draws labels with predictions): row c is the metric of
    (labels[c], preds[c]) alone, bit for bit."""
    rng = np.random.default_rng(3)
    for e in (2, 3, 17, 60, 255):
        labels, preds = _cases(rng, "f1" if name == "macro_f1" else name, e)
        idx = rng.integers(0, e, (preds.shape[0], e))                    # a resample per row
        lab, pr = labels[idx], np.take_along_axis(preds, idx, axis=1)    # (C, E) each
        got = batched_metric(name, lab, pr)
        want = np.array([batched_metric(name, lab[c], pr[c][None])[0] for c in range(len(pr))])
        np.testing.assert_array_equal(got, want, err_msg=f"{name}, E={e}")
        if name in LIBRARY:
            np.testing.assert_array_equal(got, [LIBRARY[name](lab[c], pr[c]) for c in range(len(pr))])


@pytest.mark.parametrize("task", ["cola", "mrpc", "stsb", "mnli", "rte"])
def test_compute_metrics_is_the_batched_code_on_one_row(task):
    rng = np.random.default_rng(1)
    spec_metrics = compute_metrics(task, np.zeros(4), np.arange(4) % 2)
    for e in (5, 80):
        labels, preds = _cases(rng, next(iter(spec_metrics)), e)
        for name in spec_metrics:
            rows = [compute_metrics(task, p, labels)[name] for p in preds]
            assert rows == batched_metric(name, labels, preds).tolist()
            assert rows == [LIBRARY[name](labels, p) for p in preds]


def test_constant_predictions_have_zero_correlation():
    """Where SciPy says NaN (a constant side; 0.1 + 0.1 + 0.1 != 0.3 makes np.std of it non-zero), 0."""
    labels = np.array([1.0, 2.0, 3.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(stats.pearsonr(labels, np.full(4, 0.1))[0])
    for p in (np.full(4, 0.1), np.full(4, 2.5)):
        assert compute_metrics("stsb", p, labels) == {"pearson": 0.0, "spearman": 0.0}
        assert compute_metrics("stsb", labels, p) == {"pearson": 0.0, "spearman": 0.0}
    assert compute_metrics("stsb", np.array([1.0]), np.array([2.0])) == {"pearson": 0.0, "spearman": 0.0}


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
    got = adjust_p(np.array([0.01, 0.04, 0.03, 0.5, np.nan]), "fdr_bh")
    np.testing.assert_allclose(got[:4], [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.isnan(got[4])


def test_no_bootstrap_gives_nan_intervals():
    low, high = st.percentile_interval(np.zeros((0, 3)))
    assert np.isnan(low).all() and np.isnan(high).all()
    assert np.isnan(st.randomization_test("f1", np.ones(4, int), np.ones(4, int), np.ones((2, 4), int), 0, 0)).all()


def test_batched_metric_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"^preds must be \(C, E\) with E = 4, got \(2, 5\)$"):
        batched_metric("accuracy", np.ones(4), np.ones((2, 5)))
    with pytest.raises(ValueError, match="^unknown metric 'bleu'; known: accuracy, f1, macro_f1, mcc, pearson, spearman$"):
        batched_metric("bleu", np.ones(4), np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"^labels must be \(E,\) or \(C, E\) = \(2, 4\), got \(3, 4\)$"):
        batched_metric("accuracy", np.ones((3, 4)), np.ones((2, 4)))

"""Ranking the token views (bertology.norms.ranking): paired differences and the newer-minus-rollout effect on
per-example tables whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology.norms import ranking as rk


def _table(values: dict[str, list[float]], importance: str = "ablation") -> pd.DataFrame:
    rows = [{"example_idx": i, "view": v, "importance": importance, "rho": x}
            for v, xs in values.items() for i, x in enumerate(xs)]
    return pd.DataFrame(rows)


def test_newer_minus_rollout_is_the_mean_per_example_difference():
    t = _table({"rollout": [0.1, 0.2, 0.3, 0.0], "alti": [0.5, 0.6, np.nan, 0.4], "decompx": [0.3, 0.2, 0.7, 0.6],
                "raw": [0.9, 0.9, 0.9, 0.9]})
    per = rk.newer_minus_rollout_values(t)
    # example 0: mean(0.5, 0.3) - 0.1 = 0.3; 1: 0.4 - 0.2 = 0.2; 2: 0.7 - 0.3 = 0.4 (alti undefined); 3: 0.5
    np.testing.assert_allclose(per.to_numpy(), [0.3, 0.2, 0.4, 0.5])
    eff = rk.newer_minus_rollout(t, confidence=0.95, resamples=200, seed=1)
    assert eff["effect"] == pytest.approx(0.35) and eff["n"] == 4
    assert 0.2 <= eff["ci_low"] <= 0.35 <= eff["ci_high"] <= 0.5
    # no newer view: nothing to say
    assert np.isnan(rk.newer_minus_rollout(_table({"rollout": [0.1, 0.2]}), confidence=0.95, resamples=50, seed=0)["effect"])


def test_paired_differences_say_which_intervals_separate():
    rng = np.random.default_rng(0)
    base = rng.normal(size=30)
    t = _table({"rollout": list(base), "alti": list(base + 1.0 + rng.normal(scale=0.01, size=30)),
                "globenc": list(base + rng.normal(scale=0.5, size=30) * np.sign(rng.normal(size=30)))})
    pairs = rk.paired_differences(t, confidence=0.95, resamples=500, seed=2).set_index(["view_a", "view_b"])
    assert set(pairs.columns) == set(rk.PAIR_COLUMNS) - {"view_a", "view_b"}
    row = pairs.loc[("rollout", "alti")]
    assert row["difference"] == pytest.approx(-1.0, abs=0.01) and bool(row["separated"]) and row["n"] == 30


def test_faithfulness_rows_of_multibootstrap_csv():
    from bertology.stats.across_seeds import MULTIBOOTSTRAP_COLUMNS, faithfulness_table

    a = pd.concat([_table({"rollout": [0.0, 0.1, 0.2], "alti": [0.5, 0.6, 0.7]}),
                   _table({"rollout": [0.1, 0.1, 0.1], "random": [0.0, 0.0, 0.0]}, importance="aopc")])
    b = pd.concat([_table({"rollout": [0.0, 0.1, 0.2], "alti": [0.3, 0.4, 0.5]}),
                   _table({"rollout": [0.3, 0.3, 0.3], "random": [0.0, 0.0, 0.0]}, importance="aopc")])
    t = faithfulness_table([a, b], resamples=200, seed=0, confidence=0.9)
    assert set(t.columns) <= set(MULTIBOOTSTRAP_COLUMNS)
    rows = t.set_index(["quantity", "metric"])
    assert rows.loc[("faithfulness.alti", "ablation"), "mean"] == pytest.approx(0.5)
    assert rows.loc[("faithfulness.rollout", "aopc"), "mean"] == pytest.approx(0.2)
    assert rows.loc[("faithfulness.newer_minus_rollout", "ablation"), "mean"] == pytest.approx(0.4)
    assert np.isnan(rows.loc[("faithfulness.newer_minus_rollout", "aopc"), "mean"])   # no newer view's AOPC here
    assert (t["n_seeds"] == 2).all() and (t["n_examples"] == 3).all()

"""The explorer's head grid offers norms.csv (Kobayashi et al. 2020 statistics) when it is present."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_explorer import H, L, build_results


def test_head_grid_offers_the_norm_statistics(tmp_path):
    from bertology.explorer import explorer_inputs, load_explorer_data
    from bertology.norms.stats import NormStats

    results = build_results(tmp_path)
    rng = np.random.default_rng(0)
    st = NormStats(L, H)
    for _ in range(3):
        n = 6
        alpha = rng.dirichlet(np.ones(n), size=(L, H, n))
        st.update(alpha, rng.uniform(0.5, 2, size=(L, H, n)), np.array([0, 3, 2, 3, 3, 1]), rng.integers(1, 9, n))
    table = st.table()
    table.to_csv(results / "stats" / "rte" / "finetuned" / "norms.csv", index=False)
    data = load_explorer_data(results, ["rte"], examples=2, seed=3)
    metrics = {m["id"]: m for m in data["tasks"][0]["metrics"]}
    m = metrics["norms:norm_share cls"]
    assert set(m["variants"]) == {"finetuned"}
    want = table[(table["measure"] == "norm_share") & (table["category"] == "cls") & table["head"].notna()]
    for r in want.itertuples():
        assert m["variants"]["finetuned"][int(r.layer) * H + int(r.head)] == pytest.approx(r.mean, rel=1e-4)
    assert "norms:spearman_norm_frequency ordinary" in metrics
    assert "results/stats/rte/pretrained/norms.csv" in explorer_inputs(["rte"])["optional"]

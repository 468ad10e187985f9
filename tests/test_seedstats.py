"""Statistics over fine-tuning seeds (bertology.stats.across_seeds) against independent computations."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from bertology.stats import across_seeds as ss
from bertology.pipeline.errors import UserError
from bertology.pipeline.layout import syntax_model, variant_model
from bertology.pipeline.seedtags import finetuned_variants, split_variant, store_variants


def test_variant_names_carry_the_seed():
    tags = ["", "-seed43", "-seed7"]
    assert finetuned_variants(tags) == ["finetuned", "finetuned-seed43", "finetuned-seed7"]
    assert store_variants(tags) == ["pretrained", "finetuned", "finetuned-seed43", "finetuned-seed7"]
    assert split_variant("finetuned-seed43") == ("finetuned", "-seed43")
    assert split_variant("finetuned") == ("finetuned", "")
    assert split_variant("pretrained") == ("pretrained", "")
    assert variant_model("rte", "finetuned-seed43") == "results/models/rte/pretrained-seed43"
    assert variant_model("rte", "finetuned") == "results/models/rte/pretrained"
    assert variant_model("rte", "pretrained") is None
    for bad in ("pretrained-seed43", "finetuned-43", "random-finetuned", ""):
        with pytest.raises(UserError, match="unknown variant"):
            split_variant(bad)
    assert syntax_model("pretrained") is None
    assert syntax_model("sst2-finetuned") == "results/models/sst2/pretrained"
    assert syntax_model("sst2-finetuned-seed43") == "results/models/sst2/pretrained-seed43"
    with pytest.raises(UserError, match="unknown model"):
        syntax_model("sst2-pretrained")


def test_seed_moments_mean_std_n_and_each_seed():
    a = pd.DataFrame({"layer": [0, 0, 1], "head": [0, 1, 0], "mean": [1.0, 2.0, np.nan]})
    b = pd.DataFrame({"layer": [0, 0, 1], "head": [0, 1, 0], "mean": [3.0, 2.0, 5.0]})
    c = pd.DataFrame({"layer": [0, 0], "head": [0, 1], "mean": [5.0, 8.0]})  # lacks (1, 0)
    out = ss.seed_moments([a, b, c], [42, 43, 44], ["layer", "head"], "mean")
    assert list(out.columns) == ["layer", "head", "mean", "std", "n", "seed42", "seed43", "seed44"]
    r00, r01, r10 = (out.iloc[i] for i in range(3))
    assert r00["mean"] == pytest.approx(3.0) and r00["std"] == pytest.approx(2.0) and r00["n"] == 3
    assert r01["mean"] == pytest.approx(4.0) and r01["std"] == pytest.approx(np.std([2, 2, 8], ddof=1))
    assert r10["mean"] == pytest.approx(5.0) and np.isnan(r10["std"]) and r10["n"] == 1
    assert np.isnan(r10["seed42"]) and np.isnan(r10["seed44"]) and r10["seed43"] == 5.0


def test_fleiss_kappa_on_hand_made_assignments():
    # 3 seeds (raters) x 4 heads (subjects), categories assigned / not.
    # head:        0  1  2  3
    # seed 1:      1  1  0  0
    # seed 2:      1  0  0  0
    # seed 3:      1  1  0  1
    # counts (yes, no) per head: (3,0) (2,1) (0,3) (1,2)
    # P_i = (sum n_ij^2 - n) / (n (n - 1)) = (9-3)/6, (4+1-3)/6, (9-3)/6, (1+4-3)/6 = 1, 1/3, 1, 1/3 -> P_bar = 2/3
    # p_yes = 6/12 = 1/2, p_no = 1/2 -> P_e = 1/2; kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3
    a = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 0, 1]], dtype=bool)
    assert ss.fleiss_kappa_sets(a) == pytest.approx(1 / 3)
    # perfect agreement with both categories used: kappa 1
    assert ss.fleiss_kappa_sets(np.array([[1, 0, 1], [1, 0, 1]], dtype=bool)) == pytest.approx(1.0)
    # every seed assigns nothing: no chance model, NaN
    assert np.isnan(ss.fleiss_kappa_sets(np.zeros((3, 5), dtype=bool)))
    # two raters that disagree on every head, half yes each: P_bar = 0, P_e = 1/2 -> kappa = -1
    assert ss.fleiss_kappa_sets(np.array([[1, 0], [0, 1]], dtype=bool)) == pytest.approx(-1.0)


def test_mean_pairwise_jaccard_on_hand_made_assignments():
    a = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 0, 1]], dtype=bool)
    # pairs: {0,1}&{0} = 1/2; {0,1}&{0,1,3} = 2/3; {0}&{0,1,3} = 1/3 -> mean 1/2
    assert ss.mean_pairwise_jaccard(a) == pytest.approx((1 / 2 + 2 / 3 + 1 / 3) / 3)
    # a pair of empty sets is left out
    b = np.array([[0, 0, 0], [0, 0, 0], [1, 0, 0]], dtype=bool)
    assert ss.mean_pairwise_jaccard(b) == pytest.approx(0.0)
    assert np.isnan(ss.mean_pairwise_jaccard(np.zeros((2, 3), dtype=bool)))


def test_multibootstrap_equals_a_direct_double_loop():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, 7, 4))
    values[1, 2, 3] = np.nan  # a value that is not there is left out of every average
    seeds, examples = ss.multibootstrap_indices(3, 7, 50, seed=5)
    fast = ss.multibootstrap_samples(values, seeds, examples, batch=8)
    for b in range(50):
        for k in range(4):
            total, count = 0.0, 0
            for s in seeds[b]:
                for x in examples[b]:
                    if np.isfinite(values[s, x, k]):
                        total += values[s, x, k]
                        count += 1
            assert fast[b, k] == pytest.approx(total / count)
    mean, low, high = ss.multibootstrap(values, resamples=50, seed=5, confidence=0.9)
    assert mean == pytest.approx(np.nanmean(values.reshape(-1, 4), axis=0))
    assert low == pytest.approx(np.quantile(fast, 0.05, axis=0))
    assert high == pytest.approx(np.quantile(fast, 0.95, axis=0))


def test_multibootstrap_interval_reflects_seed_variance():
    # two seeds with the same examples: the interval of seeds that differ is wider than that of equal seeds
    rng = np.random.default_rng(1)
    ex = rng.normal(scale=0.1, size=(1, 40, 1))
    same = np.concatenate([ex, ex])
    apart = np.concatenate([ex - 1.0, ex + 1.0])
    _, lo1, hi1 = ss.multibootstrap(same, resamples=400, seed=0, confidence=0.95)
    _, lo2, hi2 = ss.multibootstrap(apart, resamples=400, seed=0, confidence=0.95)
    assert (hi2 - lo2)[0] > 5 * (hi1 - lo1)[0]


def test_role_tables_counts_and_agreement():
    grid = pd.DataFrame(list(itertools.product([0, 1], [0, 1], ["local", "syntactic"])),
                        columns=["layer", "head", "role"])
    a = grid.assign(assigned=[True, False, True, False, False, False, False, True], mean=0.0)
    b = grid.assign(assigned=[True, False, False, False, False, False, False, True], mean=0.0)
    roles, agreement = ss.role_tables([a, b], [1, 2])
    local = roles[roles["role"] == "local"].set_index(["layer", "head"])["assigned"]
    assert local.to_dict() == {(0, 0): 2, (0, 1): 1, (1, 0): 0, (1, 1): 0}
    row = agreement[(agreement["role"] == "local") & agreement["layer"].isna()].iloc[0]
    assert row["jaccard"] == pytest.approx(1 / 2)
    assert row["fleiss_kappa"] == pytest.approx(ss.fleiss_kappa_sets(np.array([[1, 1, 0, 0], [1, 0, 0, 0]], bool)))
    syn = agreement[(agreement["role"] == "syntactic") & agreement["layer"].isna()].iloc[0]
    assert syn["jaccard"] == pytest.approx(1.0) and syn["fleiss_kappa"] == pytest.approx(1.0)
    assert set(agreement["layer"].dropna()) == {0, 1}


def test_disabling_values_per_example():
    # configurations: baseline, (0,0), (0,1), layer 0; 3 examples with labels 1, 0, 1
    preds = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1], [0, 0, 0]])
    values, labels, outcome = ss.disabling_values(preds, np.array([1, 0, 1]), np.array([-1, 0, 0, 0]),
                                                  np.array([-1, 0, 1, -1]), regression=False)
    assert outcome == "accuracy"
    assert labels.to_dict("list") == {"layer": [0, 0], "head": [0, 1]}
    np.testing.assert_array_equal(values, [[0, 0], [-1, 0], [0, 1]])
    reg, _, name = ss.disabling_values(np.array([[1.0, 2.0], [2.0, 2.0]]), np.array([1.0, 1.0]), np.array([-1, 0]),
                                       np.array([-1, 0]), regression=True)
    assert name == "neg_squared_error"
    np.testing.assert_allclose(reg[:, 0], [-1.0, 0.0])


def test_verdicts():
    assert [ss.verdict(k, 5) for k in (5, 3, 2, 1, 0)] == ["every", "most", "some", "one", "none"]
    assert ss.verdict(1, 2) == "one" and ss.verdict(2, 2) == "every"


def test_explorer_shows_each_seeds_value(tmp_path):
    from bertology.explorer.catalogue import catalogue
    from bertology.explorer.inputs import Inputs
    from bertology.registry import OVER_SEEDS

    results = tmp_path / "results"

    def seed_metrics() -> list[dict]:
        notes: list[str] = []
        got = [m for m in catalogue(Inputs.of(results), "rte", 2, 2, notes) if m["group"] == OVER_SEEDS]
        assert not any("seeds" in n for n in notes)  # the seed tables are optional: absent with one seed, no note
        return got

    assert seed_metrics() == []  # one seed: no seeds/ tables, nothing shown
    d = results / "stats" / "rte" / "seeds"
    d.mkdir(parents=True)
    frames = [pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "mean": v}) for v in
              ([0.1, 0.2, 0.3, 0.4], [0.3, 0.2, 0.1, 0.0])]
    ss.seed_moments(frames, [7, 9], ["layer", "head"], "mean").to_csv(d / "cosine.csv", index=False)
    pd.DataFrame({"layer": [0, 1], "head": [1, 0], "role": "local", "assigned": [2, 1], "n_seeds": 2,
                  "share": [1.0, 0.5]}).to_csv(d / "roles.csv", index=False)
    ms = {m["id"]: m for m in seed_metrics()}
    assert set(ms) == {"seeds:cosine", "seeds:cosine:std", "seeds:roles:local"}
    cos = ms["seeds:cosine"]
    assert cos["single"] == pytest.approx([0.2, 0.2, 0.2, 0.2]) and cos["source"] == "stats/rte/seeds/cosine.csv"
    assert cos["seeds"]["7"] == pytest.approx([0.1, 0.2, 0.3, 0.4]) and cos["seeds"]["9"][3] == 0.0
    assert ms["seeds:cosine:std"]["single"][0] == pytest.approx(np.std([0.1, 0.3], ddof=1), rel=1e-5)  # 6 digits kept
    assert "seeds" not in ms["seeds:cosine:std"]
    assert ms["seeds:roles:local"]["single"] == [None, 1.0, 0.5, None]


def test_the_explorer_offers_tables_the_seed_step_writes():
    """Every registry statistic over seeds reads a table of stats/{task}/seeds/ that seed_stats writes."""
    from bertology.analyses import REGISTRY
    from bertology.registry import OVER_SEEDS

    over = [st for st in REGISTRY.statistics() if st.group == OVER_SEEDS]
    assert over, "the registry offers the explorer no statistic over seeds"
    names = {st.table.rsplit("/", 1)[1].removesuffix(".csv") for st in over}
    assert names <= set(REGISTRY.seed_tables()) | {"roles"}
    assert all(st.table.startswith("stats/{task}/seeds/") and st.optional for st in over)


def test_report_has_a_robust_across_seeds_section(tmp_path):
    from bertology.pipeline.config import validate_config
    from bertology.report.page import build_report

    results = tmp_path / "results"
    d = results / "stats" / "rte" / "seeds"
    d.mkdir(parents=True)
    pd.DataFrame([{"finding": "disabling_gain", "paper": "Kovaleva et al. 2019, 4.6", "statement": "s",
                   "holds": "1;0", "seeds": "1;2", "holding": 1, "n_seeds": 2, "verdict": "one"}]).to_csv(
        d / "findings.csv", index=False)
    html = build_report(results, validate_config({}), ["stats/rte/seeds/findings.csv"])
    section = html[html.index('<section id="seeds">'):]
    section = section[:section.index("</section>")]
    assert "Robust across seeds" in section and "disabling_gain" in section and "seeds/findings.csv" in section

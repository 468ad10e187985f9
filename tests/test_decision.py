"""Each head's share of the decision (bertology.claims.decision, docs/reference.md#decision): the per-head statistic
on decision.parquet tables whose answer is known by construction, and the claim that the heads which write most to
the decision cost most to remove, where it holds, where it does not, and where ALTI-Logit is not computed."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest

from bertology.claims.bootstrap import Boot, verdict
from bertology.claims.decision import COLUMNS, DECISION_COLUMNS, decision_share, share_against_cost

BOOT = Boot(resamples=300, confidence=0.95, seed=0)


def decision_frame(shares: dict[tuple[int, int], float], examples: int = 16, noise: float = 0.0,
                   contrast: float | None = 0.5) -> pd.DataFrame:
    """decision.parquet of a model whose head (layer, head) adds shares[(layer, head)] +- noise to the predicted
    class's logit (+ on even examples, - on odd ones: the mean over an even number of examples is the share, the
    std ddof 1 noise * sqrt(N / (N - 1))), contrast times that to its margin (None: no runner-up, NaN), and every
    other part a large value the statistic must not read."""
    rows = []
    for e in range(examples):
        sign = 1.0 if e % 2 == 0 else -1.0
        for (layer, head), share in shares.items():
            v = share + sign * noise
            rows.append((e, layer, "head", head, v, np.nan if contrast is None else contrast * v, 1, 0))
        for layer in {layer for layer, _ in shares}:
            rows.append((e, layer, "mlp", -1, 100.0, 50.0, 1, 0))
            rows.append((e, layer, "attention_bias", -1, -100.0, 7.0, 1, 0))
        rows.append((e, -1, "embedding", -1, 30.0, 3.0, 1, 0))
        rows.append((e, -1, "final_bias", -1, -9.0, 1.0, 1, 0))
    return pd.DataFrame(rows, columns=list(DECISION_COLUMNS))


SHARES = {(0, 0): 0.1, (0, 1): -2.0, (1, 0): 1.0, (1, 1): 0.0, (2, 0): 3.0, (2, 1): -0.5}


def test_the_share_is_each_heads_mean_over_the_examples():
    table = decision_share(decision_frame(SHARES, noise=0.3), resamples=200, confidence=0.9, seed=1)
    assert list(table.columns) == list(COLUMNS)
    assert list(table["measure"].unique()) == ["logit", "contrast"]
    for measure, scale in (("logit", 1.0), ("contrast", 0.5)):
        part = table[table["measure"] == measure]
        got = {(int(r.layer), int(r.head)): r for r in part.itertuples()}
        assert set(got) == set(SHARES)  # heads only: the other parts are not heads
        for key, share in SHARES.items():
            r = got[key]
            assert r.mean == pytest.approx(scale * share, abs=1e-12)
            assert r.std == pytest.approx(scale * 0.3 * math.sqrt(16 / 15), rel=1e-9)
            assert r.n == 16
            assert r.ci_low < r.mean < r.ci_high
        # the heads that write most come first
        assert [(int(l), int(h)) for l, h in zip(part["layer"], part["head"])] == \
            sorted(SHARES, key=lambda k: -abs(SHARES[k]))


def test_the_interval_is_a_bootstrap_over_the_examples():
    """No spread over the examples: no width; the width grows with the spread, about 2 x 1.96 standard errors of
    the mean; the same seed gives the same interval."""
    still = decision_share(decision_frame(SHARES, noise=0.0), resamples=200, confidence=0.95, seed=0)
    assert np.allclose(still["ci_low"], still["mean"], atol=1e-12)
    assert np.allclose(still["ci_high"], still["mean"], atol=1e-12)
    widths = []
    for noise in (0.1, 1.0):
        t = decision_share(decision_frame(SHARES, examples=40, noise=noise), resamples=400, confidence=0.95, seed=0)
        width = (t["ci_high"] - t["ci_low"]).to_numpy()
        se = t["std"].to_numpy() / math.sqrt(40)
        assert np.all(width > 2 * 1.96 * se * 0.5) and np.all(width < 2 * 1.96 * se * 1.5)
        widths.append(width.mean())
    assert widths[1] > 5 * widths[0]
    again = decision_share(decision_frame(SHARES, noise=0.3), resamples=200, confidence=0.9, seed=1)
    pd.testing.assert_frame_equal(again, decision_share(decision_frame(SHARES, noise=0.3), resamples=200,
                                                        confidence=0.9, seed=1))


def test_a_head_seen_once_has_no_interval_and_a_model_without_runner_up_no_contrast():
    frame = decision_frame(SHARES, contrast=None)
    once = pd.DataFrame([(0, 3, "head", 0, 2.0, np.nan, 1, 0)], columns=list(DECISION_COLUMNS))
    table = decision_share(pd.concat([frame, once], ignore_index=True), resamples=50, confidence=0.95, seed=0)
    assert list(table["measure"].unique()) == ["logit"]
    row = table[(table["layer"] == 3)].iloc[0]
    assert row["n"] == 1 and row["mean"] == 2.0 and math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    assert math.isnan(row["std"])


def test_no_head_rows_is_an_empty_table_said_in_one_line(caplog):
    frame = decision_frame(SHARES)
    with caplog.at_level(logging.INFO, logger="bertology.claims.decision"):
        for empty in (frame.iloc[:0], frame[frame["part"] != "head"]):
            table = decision_share(empty, resamples=50, confidence=0.95, seed=0)
            assert table.empty and list(table.columns) == list(COLUMNS)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("not computed" in m and "ALTI-Logit" in m for m in lines)


def test_a_bad_decision_table_is_one_clear_error():
    frame = decision_frame(SHARES)
    with pytest.raises(ValueError, match="lacks the columns contrast"):
        decision_share(frame.drop(columns="contrast"), resamples=50, confidence=0.95, seed=0)
    with pytest.raises(ValueError, match="repeated"):
        decision_share(pd.concat([frame, frame.iloc[:1]]), resamples=50, confidence=0.95, seed=0)


# ------------------------------------------------------------------------------------------------ the claim


def share_table(shares: dict[tuple[int, int], float]) -> pd.DataFrame:
    """decision_share.csv with the given logit shares (and a contrast of the opposite sign)."""
    keys = list(shares)
    base = pd.DataFrame({"layer": [k[0] for k in keys], "head": [k[1] for k in keys]})
    rows = [base.assign(measure=m, mean=[s * f for s in shares.values()]) for m, f in (("logit", 1.0), ("contrast", -1.0))]
    return pd.concat(rows, ignore_index=True).assign(std=0.1, n=16, ci_low=np.nan, ci_high=np.nan)[list(COLUMNS)]


def grid_shares(layers: int = 4, heads: int = 4) -> dict[tuple[int, int], float]:
    """Shares of both signs whose magnitudes all differ."""
    return {(l, h): (1.0 + l * heads + h) * (-1.0 if (l + h) % 2 else 1.0) for l in range(layers) for h in range(heads)}


def importance(cost: dict[tuple[int, int], float]) -> pd.DataFrame:
    keys = list(cost)
    return pd.DataFrame({"layer": [k[0] for k in keys], "head": [k[1] for k in keys],
                         "importance": 0.5, "raw": list(cost.values()), "n": 100, "split": "train"})


def heads_table(cost: dict[tuple[int, int], float]) -> pd.DataFrame:
    """The sweep's heads.csv: accuracy (rte's headline) drops by `cost`; f1 moves the other way."""
    keys = list(cost)
    base = pd.DataFrame({"layer": [k[0] for k in keys], "head": [k[1] for k in keys]})
    rows = [base.assign(metric=m, delta=[s * c for c in cost.values()]) for m, s in (("accuracy", -1.0), ("f1", 1.0))]
    return pd.concat(rows, ignore_index=True).assign(value=0.7, baseline=0.7, ci_low=-0.1, ci_high=0.1, p_value=0.5,
                                                    p_adj=1.0, significant=False, test="paired_bootstrap", n=100)


def _claim(tables, against):
    res = share_against_cost(tables, BOOT, side=">", null=0.0, against=against, task="rte")
    return res, verdict(res.ci_low, res.ci_high, side=">", null=0.0)


@pytest.mark.parametrize("against", ["importance", "disabling"])
def test_the_heads_that_write_most_cost_most_holds_and_is_contradicted(against):
    shares = grid_shares()
    noise = np.random.default_rng(3).uniform(-1.5, 1.5, len(shares))
    up = {k: abs(s) + e for (k, s), e in zip(shares.items(), noise)}      # cost rising with |share|
    down = {k: 20.0 - c for k, c in up.items()}
    cost = importance if against == "importance" else heads_table
    name = "importance" if against == "importance" else "heads"
    res, v = _claim([{"decision": share_table(shares), name: cost(up)}], against)
    assert v == "holds" and res.effect > 0.8 and res.n == 16 and res.p < 0.01
    # the heads the row outlines: the five that write most
    assert res.heads == tuple(sorted(sorted(shares, key=lambda k: -abs(shares[k]))[:5]))
    res, v = _claim([{"decision": share_table(shares), name: cost(down)}], against)
    assert v == "contradicted" and res.effect < -0.8
    small = {k: shares[k] for k in list(shares)[:2]}
    res, v = _claim([{"decision": share_table(small), name: cost({k: up[k] for k in small})}], against)
    assert v == "inconclusive" and math.isnan(res.ci_low)


def test_the_claim_ranks_the_absolute_share():
    """A head that pushes hard against the decision writes as much to it as one that pushes for it: with the cost
    equal to |share| the claim holds at rho 1, though the signed shares do not rank the cost at all."""
    shares = grid_shares()
    res, v = _claim([{"decision": share_table(shares), "importance": importance({k: abs(s) for k, s in
                                                                                 shares.items()})}], "importance")
    assert v == "holds" and res.effect == pytest.approx(1.0)
    from scipy.stats import spearmanr

    assert abs(spearmanr(list(shares.values()), [abs(s) for s in shares.values()]).statistic) < 0.2


def test_the_claim_pools_the_seeds():
    shares = grid_shares()
    seeds = []
    for s in range(3):
        noise = np.random.default_rng(s).uniform(-1.5, 1.5, len(shares))
        seeds.append({"decision": share_table(shares),
                      "importance": importance({k: abs(v) + e for (k, v), e in zip(shares.items(), noise)})})
    res, v = _claim(seeds, "importance")
    assert v == "holds" and res.n == 16


def test_no_decision_share_is_not_computed():
    empty = share_table(grid_shares()).iloc[:0]
    res = share_against_cost([{"decision": empty, "importance": importance({(0, 0): 1.0})}], BOOT, side=">",
                             null=0.0, against="importance", task="rte")
    assert not res.computed and "ALTI-Logit is not computed" in res.note


# ------------------------------------------------------------------------------- the statistic in the workflow


def _run(**kw):
    from bertology.registry import Run

    values = dict(tasks=("rte",), splits=("train", "validation"), stores=("pretrained", "finetuned"),
                  inits=("pretrained",), seedtags=("",), finetuned=("finetuned",))
    return Run(**{**values, **kw})


def test_the_registry_joins_it_like_every_per_head_statistic():
    """One declaration: the rule decision_share reads decision.parquet beside the token scores; its table is a
    target of every store with the norm analyses (none without), compared across seeds, a statistic of the
    explorer's grid with its mean and std over seeds, a section of the report; its claims are marked as ours."""
    from bertology.analyses import REGISTRY

    assert REGISTRY.inputs("decision_share") == {"decision": "results/stats/{task}/{variant}/decision.parquet"}
    assert REGISTRY.outputs("decision_share") == {"table": "results/stats/{task}/{variant}/decision_share.csv"}
    normed = REGISTRY.targets(_run(enabled=frozenset({"norms"})))
    assert {"results/stats/rte/pretrained/decision_share.csv", "results/stats/rte/finetuned/decision_share.csv"} \
        <= set(normed)
    assert not any("decision_share" in t for t in REGISTRY.targets(_run()))
    seeded = REGISTRY.targets(_run(seedtags=("", "-seed43"), finetuned=("finetuned", "finetuned-seed43"),
                                   enabled=frozenset({"norms", "seeds"})))
    assert {"results/stats/rte/finetuned-seed43/decision_share.csv", "results/stats/rte/seeds/decision_share.csv"} \
        <= set(seeded)
    assert REGISTRY.seed_inputs(["finetuned", "finetuned-seed43"], ["", "-seed43"])["decision_share"] == [
        "results/stats/{task}/finetuned/decision_share.csv", "results/stats/{task}/finetuned-seed43/decision_share.csv"]
    assert "decision_share" not in REGISTRY.seed_tables(enabled={"seeds"})
    ids = [s.id for s in REGISTRY.statistics()]
    assert {"decision_share", "seeds:decision_share", "seeds:decision_share:std"} <= set(ids)
    assert "decision" in [s.key for s in REGISTRY.report_sections()]
    claims = {c.id: c for c in REGISTRY.claims()}
    for against, table in (("importance", "ablation/{task}/importance{seedtag}.csv"),
                           ("disabling", "ablation/{task}/heads{seedtag}.csv")):
        c = claims[f"decision_share_{against}"]
        assert c.paper.startswith("ours") and "no paper" in c.paper and c.variant == "finetuned"
        assert [(n, t, g) for n, t, g in c.inputs] == [
            ("decision", "stats/{task}/{variant}/decision_share.csv", "analysis.norms.enabled"),
            (against if against == "importance" else "heads", table, "")]


def test_the_step_writes_the_table_with_the_configs_bootstrap(tmp_path, typed_config):
    """The rule's step (the one step of table functions) reads decision.parquet and writes decision_share.csv with
    analysis.flow's resamples and confidence, seeded by data.seed: the pure function's table."""
    from bertology.pipeline.config import validate_config
    from tests.builders.steps import run_step

    source, out = tmp_path / "decision.parquet", tmp_path / "decision_share.csv"
    frame = decision_frame(SHARES, noise=0.3)
    frame.to_parquet(source)
    config = validate_config({"analysis": {"flow": {"bootstrap": 123, "confidence": 0.8}}, "data": {"seed": 5}})
    assert run_step("decision_share", config, inputs={"decision": source}, outputs={"table": out}) == 0
    got = pd.read_csv(out)
    want = decision_share(frame, resamples=123, confidence=0.8, seed=5)
    assert list(got.columns) == list(COLUMNS)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12)
    other = decision_share(frame, resamples=123, confidence=0.95, seed=5)
    assert not np.allclose(got["ci_low"], other["ci_low"])


def test_the_explorer_shows_both_measures_on_the_grid(tmp_path):
    """The explorer's catalogue: decision share logit and contrast, per variant, each head's mean in its cell and
    its interval."""
    from bertology.explorer.catalogue import catalogue
    from bertology.explorer.inputs import Inputs

    for variant, scale in (("pretrained", 1.0), ("finetuned", 2.0)):
        d = tmp_path / "results" / "stats" / "rte" / variant
        d.mkdir(parents=True)
        shares = {k: scale * v for k, v in SHARES.items()}
        decision_share(decision_frame(shares, noise=0.3), resamples=50, confidence=0.9, seed=0).to_csv(
            d / "decision_share.csv", index=False)
    notes: list[str] = []
    metrics = {m["id"]: m for m in catalogue(Inputs.of(tmp_path / "results"), "rte", 3, 2, notes)}
    logit, contrast = metrics["decision_share:logit"], metrics["decision_share:contrast"]
    assert logit["scale"] == "div" and logit["label"] == "decision share logit"
    cell = 2 * 2 + 0  # layer 2, head 0
    assert logit["variants"]["pretrained"][cell] == pytest.approx(3.0)
    assert logit["variants"]["finetuned"][cell] == pytest.approx(6.0)
    assert contrast["variants"]["finetuned"][cell] == pytest.approx(3.0)
    assert logit["ci"]["low"][cell] < 6.0 < logit["ci"]["high"][cell]


def test_a_model_without_alti_logit_leaves_the_claims_not_computed(tmp_path):
    """An empty decision share (ALTI-Logit not computed for the model): both claims read `not computed`, saying
    why, and take no part in Holm's correction."""
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import build_ledger

    results = tmp_path / "results"
    (results / "stats" / "rte" / "finetuned").mkdir(parents=True)
    (results / "ablation" / "rte").mkdir(parents=True)
    pd.DataFrame(columns=list(COLUMNS)).to_csv(results / "stats/rte/finetuned/decision_share.csv", index=False)
    shares = grid_shares()
    cost = {k: abs(v) for k, v in shares.items()}
    importance(cost).to_csv(results / "ablation/rte/importance.csv", index=False)
    heads_table(cost).to_csv(results / "ablation/rte/heads.csv", index=False)
    claims = [c for c in REGISTRY.claims() if c.id.startswith("decision_share_")]
    ledger = build_ledger(results, claims, ["rte"], [42], BOOT).set_index("claim")
    for cid in ("decision_share_importance", "decision_share_disabling"):
        assert ledger.loc[cid, "verdict"] == "not computed"
        assert "ALTI-Logit is not computed" in ledger.loc[cid, "note"] and math.isnan(ledger.loc[cid, "p_holm"])
    share_table(shares).to_csv(results / "stats/rte/finetuned/decision_share.csv", index=False)
    ledger = build_ledger(results, claims, ["rte"], [42], BOOT).set_index("claim")
    assert (ledger["verdict"] == "holds").all()

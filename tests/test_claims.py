"""The claims ledger (bertology.claims): every registered claim on tables where it holds by construction, where it
is contradicted by construction and where n is too small to decide; the verdict rule, Holm, not computed, the
per-seed verdicts and the findings view. Adding a claim to the registry means adding its case to CASES."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertology.claims.ledger import (
    build_ledger,
    evaluate,
    findings_view,
    required_inputs,
    to_markdown,
)
from bertology.claims.bootstrap import Boot, bootstrap, verdict
from bertology.analyses import REGISTRY
from bertology.stats.moments import adjust_p

BOOT = Boot(resamples=300, confidence=0.95, seed=0)


def grid(layers: int, heads: int) -> pd.DataFrame:
    l, h = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    return pd.DataFrame({"layer": l.ravel(), "head": h.ravel()})


def jitter(n: int, scale: float = 0.01, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-scale, scale, n)


# ---------------------------------------------------------------------------------------------- table builders


def patterns(het: float, layers=4, heads=4):
    g = grid(layers, heads)
    f = het + jitter(len(g))
    rows = [g.assign(**{"class": "heterogeneous", "fraction": f}), g.assign(**{"class": "vertical", "fraction": 1 - f})]
    overall = pd.DataFrame({"layer": -1, "head": -1, "class": ["heterogeneous", "vertical"], "fraction": [0.5, 0.5]})
    return {"patterns": pd.concat(rows + [overall], ignore_index=True).assign(n=10)}  # the overall row is no head


def scores(task, fine, base, variant):
    """Score records without per-example predictions: metrics only."""
    one = lambda v, name: pd.DataFrame({"task": [task], "variant": [name], "metrics.accuracy": [v]})
    return {"score_finetuned": one(fine, "finetuned"), f"score_{variant}": one(base, variant)}


def table1(diffs, variant="pretrained"):
    """Table 1 from score records without per-example predictions: one seed per difference."""
    fine = [0.6 + d for d in diffs]
    t1 = pd.DataFrame({"task": "rte", "variant": ["finetuned", variant], "metric": "accuracy",
                       "value": [float(np.mean(fine)), 0.6], "n": 100})
    return [{"table1": t1, **scores("rte", f, 0.6, variant)} for f in fine]


def score_record(task, variant, labels, preds, seed=42, idx=None) -> dict:
    """A score record as the score step writes it: the task's metrics of the predictions and the predictions."""
    from bertology.models.metrics import compute_metrics
    from bertology.models.training import prediction_record

    idx = np.arange(len(labels)) if idx is None else idx
    return {"task": task, "variant": variant, "seed": seed, "metrics": compute_metrics(task, preds, labels),
            "n": len(labels), "predictions": prediction_record(idx, labels, preds)}


def paired_table1(fine, base, labels, variant="pretrained", task="rte", idx=None):
    """One mapping per seed (fine[s], base[s]: that seed's two models' predictions of `labels`): table1.csv from
    the records by the table1 step's own code, and the two score records as the ledger reads them."""
    from bertology.models.table1 import aggregate_seeds, scores_frame

    records = [(score_record(task, "finetuned", labels, f, seed, idx),
                score_record(task, variant, labels, b, seed, idx))
               for seed, (f, b) in enumerate(zip(fine, base), start=42)]
    t1 = aggregate_seeds(scores_frame([r for pair in records for r in pair]))
    return [{"table1": t1, "score_finetuned": pd.json_normalize(f), f"score_{variant}": pd.json_normalize(b)}
            for f, b in records]


def right_on(labels, first: int, last: int | None = None):
    """Binary predictions right on examples [first, last) and wrong on the others."""
    preds = 1 - labels
    preds[first:last] = labels[first:last]
    return preds


BINARY = np.arange(200) % 2


def table1_examples(gain: bool, variant="pretrained", n=200):
    """One seed, n examples: the fine-tuned model right on 90% of them, the baseline on 50% (`gain`), or the reverse."""
    labels = BINARY[:n].copy()
    good, bad = right_on(labels, 0, int(0.9 * n)), right_on(labels, 0, n // 2)
    fine, base = (good, bad) if gain else (bad, good)
    return paired_table1([fine], [base], labels, variant)


def cosine(last_low: bool, layers=6, heads=4):
    g = grid(layers, heads)
    last = g["layer"] >= layers - 2
    mean = np.where(last == last_low, 0.3, 0.9) + jitter(len(g))
    return {"cosine": g.assign(mean=mean, std=0.1, n=10)}


def features(values: dict, layers=6, heads=4, trend=None):
    g = grid(layers, heads)
    rows = []
    for feature, v in values.items():
        m = v(g["layer"].to_numpy()) if callable(v) else np.full(len(g), v)
        rows.append(g.assign(feature=feature, mean=m + jitter(len(g), 0.001, seed=len(rows)), std=0.0, n=5))
    return {"features": pd.concat(rows, ignore_index=True)}


def cls_table(sep: float, other: float, heads=12, layer=5):
    g = grid(1, heads).assign(layer=layer)
    rows = [g.assign(feature=f, mean=v + jitter(len(g), 0.001, seed=i), std=0.0, n=5)
            for i, (f, v) in enumerate((("sep", sep), ("cls", other), ("noun", other / 2), ("punctuation", other)))]
    return {"cls": pd.concat(rows, ignore_index=True)}


def disabling(delta, low, high, table="heads"):
    g = grid(2, 2)
    t = g.assign(metric="accuracy", value=0.7, baseline=0.7, delta=[delta, delta - 0.05, delta - 0.1, delta - 0.2],
                 ci_low=[low, -0.2, -0.2, -0.3], ci_high=[high, 0.0, 0.0, -0.1], p_value=0.01, p_adj=0.04,
                 significant=False, test="paired_bootstrap", n=100)
    heads = t
    if table == "layers":
        t = t.groupby("layer", as_index=False).first().drop(columns="head")
    return {table: t, "heads": heads}


def sieve(roles_by_layer, layers=6, heads=4, means=None):
    """roles_by_layer(layer) -> set of assigned roles; means(role, layer, head) -> mean bias."""
    g = grid(layers, heads)
    rows = []
    for role in ("local", "prev_local", "next_local", "delimiter", "cls", "sep", "nsubj", "syntactic"):
        assigned = [role in roles_by_layer(l) for l in g["layer"]]
        mean = [means(role, l, h) if means else 1.0 for l, h in zip(g["layer"], g["head"])]
        rows.append(g.assign(role=role, n=10, mean=mean, std=1.0, t=0.0, p_value=0.5, assigned=assigned, tau=3.0))
    return pd.concat(rows, ignore_index=True)


def entropy(lower_broad: bool, layers=6, heads=4):
    g = grid(layers, heads)
    first = g["layer"] < 2
    rel_ = np.where(first == lower_broad, 0.95, 0.4) + jitter(len(g))
    rows = [g.assign(feature="all", mean=2.0 * rel_), g.assign(feature="uniform", mean=2.0)]
    return {"entropy": pd.concat(rows, ignore_index=True).assign(std=0.1, n=10)}


def parser(acc, n, relation="nsubj"):
    g = grid(2, 2)
    t = g.assign(relation=relation, direction="dep_to_head", accuracy=[acc, acc / 2, acc / 3, acc / 4], n=n,
                 baseline_offset=1, baseline_accuracy=0.4)
    return {"parser": t}


def pruning(diff: float, fractions=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)):
    rows = []
    for f in fractions:
        base = 0.8 - 0.3 * f
        rows.append({"order": "importance", "seed": np.nan, "fraction": f, "metric": "accuracy",
                     "value": base + (diff if 0 < f < 1 else 0.0) + jitter(1, 0.001, seed=int(f * 10))[0]})
        for s in (1, 2):
            rows.append({"order": "random", "seed": s, "fraction": f, "metric": "accuracy", "value": base})
    return {"pruning": pd.DataFrame(rows).assign(n_pruned=0, mode="zero")}


def pruning_share(keep_until: float):
    rows = [{"order": "importance", "seed": np.nan, "fraction": f, "metric": "accuracy",
             "value": 0.8 if f <= keep_until + 1e-9 else 0.5} for f in np.round(np.arange(0, 1.01, 0.1), 1)]
    return {"pruning": pd.DataFrame(rows).assign(n_pruned=0, mode="zero")}


def norms(gap: float, layers=4, heads=4):
    g = grid(layers, heads)
    rows = []
    for cat in ("cls", "sep", "other"):
        w = 0.3 + (gap if cat != "other" else -2 * gap) / 2
        rows.append(g.assign(category=cat, measure="weight_share", mean=w + jitter(len(g), 0.005)))
        rows.append(g.assign(category=cat, measure="norm_share", mean=np.full(len(g), 0.3)))
    return {"norms": pd.concat(rows, ignore_index=True).assign(std=0.1, n=10)}


def mixing(ratio: float, layers=6):
    return {"mixing": pd.DataFrame({"layer": np.arange(layers), "measure": "attnres_n",
                                    "mean": ratio + jitter(layers), "std": 0.1, "n": 10})}


def faithfulness(gain: float, examples=30, view="rollout"):
    rng = np.random.default_rng(1)
    raw = rng.uniform(0.0, 0.3, examples)
    ex = pd.concat([pd.DataFrame({"example_idx": np.arange(examples), "view": "raw", "importance": "ablation", "rho": raw}),
                    pd.DataFrame({"example_idx": np.arange(examples), "view": view, "importance": "ablation",
                                  "rho": raw + gain + rng.uniform(-0.02, 0.02, examples)})])
    summary = ex.groupby(["view", "importance"], as_index=False)["rho"].mean().rename(columns={"rho": "mean"})
    return {"faithfulness": summary, "faithfulness_examples": ex}


def newer_views(gain: float, examples=30):
    """faithfulness_examples.csv with rollout and the four newer views, the newer ones `gain` above rollout."""
    rng = np.random.default_rng(2)
    roll = rng.uniform(0.0, 0.3, examples)
    parts = [pd.DataFrame({"example_idx": np.arange(examples), "view": "rollout", "importance": "ablation", "rho": roll})]
    for view in ("alti", "globenc", "decompx", "value_zeroing"):
        parts.append(pd.DataFrame({"example_idx": np.arange(examples), "view": view, "importance": "ablation",
                                   "rho": roll + gain + rng.uniform(-0.02, 0.02, examples)}))
    return {"faithfulness_examples": pd.concat(parts, ignore_index=True)}


def decision(cost_rises: bool, layers=4, heads=4, against="importance"):
    """decision_share.csv with logit shares of both signs and the cost of removing each head (importance.csv raw,
    or heads.csv's drop of accuracy) rising (`cost_rises`) or falling with |share|."""
    g = grid(layers, heads)
    share = (1.0 + np.arange(len(g))) * np.where((g["layer"] + g["head"]) % 2, -1.0, 1.0)
    share_t = pd.concat([g.assign(measure=m, mean=f * share) for m, f in (("logit", 1.0), ("contrast", 0.5))],
                        ignore_index=True).assign(std=0.1, n=16, ci_low=np.nan, ci_high=np.nan)
    cost = np.abs(share) + jitter(len(g), 1.5, seed=4)
    cost = cost if cost_rises else 30.0 - cost
    if against == "importance":
        return {"decision": share_t, "importance": g.assign(importance=0.5, raw=cost, n=100, split="train")}
    return {"decision": share_t, "heads": g.assign(metric="accuracy", value=0.7, baseline=0.7, delta=-cost / 100,
                                                   ci_low=-0.1, ci_high=0.1, p_value=0.5, p_adj=1.0,
                                                   significant=False, test="paired_bootstrap", n=100)}


MID = lambda l: l in (2, 3)
two = lambda roles: lambda l: roles


def _sieve_cases():
    multi = lambda cond: lambda l: {"local", "nsubj"} if cond(l) else set()
    delim = lambda cond: lambda l: {"delimiter"} if cond(l) else set()
    loc = lambda sign: (lambda role, l, h: (l * 4 + h) * (sign if role == "syntactic" else 1.0)
                        + (0.5 * ((l * 7 + h * 3) % 5) if role == "syntactic" else 0.0))
    pre = sieve(lambda l: set(), means=lambda r, l, h: 5.0)
    fin = lambda final_lower: sieve(lambda l: set(), means=lambda r, l, h: (2.0 if (l >= 4) == final_lower else 5.0)
                                    + 0.01 * h)
    return {
        "pande_local_syntactic": ([{"sieve": sieve(two(set()), means=loc(1.0))}],
                                  [{"sieve": sieve(two(set()), means=loc(-1.0))}],
                                  [{"sieve": sieve(two(set()), layers=1, heads=2, means=loc(1.0))}]),
        "pande_multiskilled_middle": ([{"sieve": sieve(multi(MID))}], [{"sieve": sieve(multi(lambda l: not MID(l)))}],
                                      [{"sieve": sieve(multi(MID), layers=3, heads=1)}]),
        "pande_delimiter_last": ([{"sieve": sieve(delim(lambda l: l >= 4))}], [{"sieve": sieve(delim(lambda l: l < 2))}],
                                 [{"sieve": sieve(delim(lambda l: l >= 4), layers=3, heads=1)}]),
        "pande_delimiter_delta_final": ([{"sieve": fin(True), "sieve_pretrained": pre}],
                                        [{"sieve": fin(False), "sieve_pretrained": pre}],
                                        [{"sieve": sieve(two(set()), layers=3, heads=1), "sieve_pretrained":
                                          sieve(two(set()), layers=3, heads=1)}]),
    }


WORDS = {"noun": 0.05, "verb": 0.04, "pronoun": 0.03, "subject": 0.02, "object": 0.02, "negation": 0.01}

#: claim id -> (tables where it holds, where it is contradicted, where n is too small); one mapping per seed
def decoder_sink(share: float, examples: int = 12, heads: int = 10, finetuned: float | None = None):
    """decoder_sink.csv of the pretrained and fine-tuned models: per example, `share` of the heads above 0.3
    (`finetuned`: the fine-tuned model's share, else the same)."""
    shares = {"pretrained": share, "finetuned": share if finetuned is None else finetuned}
    rows = [(v, e, 0, h, 0.9 if h < round(shares[v] * heads) + (e % 2) else 0.1, 64)
            for v in ("pretrained", "finetuned") for e in range(examples) for h in range(heads)]
    return {"sink": pd.DataFrame(rows, columns=["variant", "example", "layer", "head", "alpha_0", "n"])}


def decoder_induction(trained: float, random: float, sequences: int = 10, finetuned: float | None = None):
    """decoder_induction.csv: head (1, 2) of the trained models scores `trained` (the fine-tuned one `finetuned`
    where given), the random init's best `random`."""
    rows = []
    for v, best in (("pretrained", trained), ("finetuned", trained if finetuned is None else finetuned),
                    ("random-init", random)):
        for s in range(sequences):
            rows += [(v, s, 1, 2, 0.0, best + 0.01 * (s % 3), 0.0, 0.0), (v, s, 0, 0, 0.0, 0.005, 0.0, 0.0)]
    return {"induction": pd.DataFrame(rows, columns=["variant", "sequence", "layer", "head", "induction_stripe",
                                                     "induction", "previous_token", "duplicate_token"])}


CASES = {
    "kovaleva_patterns_repeat": ([patterns(0.1)], [patterns(0.9)], [patterns(0.1, layers=1, heads=2)]),
    "kovaleva_table1_pretrained": (table1_examples(True), table1_examples(False), table1_examples(True, n=2)),
    "kovaleva_table1_random": (table1_examples(True, "random-finetuned"), table1_examples(False, "random-finetuned"),
                               table1_examples(True, "random-finetuned", n=2)),
    "kovaleva_cosine_last_layers": ([cosine(True)], [cosine(False)], [cosine(True, layers=2, heads=1)]),
    "kovaleva_special_tokens": ([features({"cls": 0.5, "sep": 0.6, **WORDS})],
                                [features({"cls": 0.01, "sep": 0.01, **{k: 0.3 for k in WORDS}})],
                                [features({"cls": 0.5, "sep": 0.6, **WORDS}, layers=1, heads=2)]),
    "kovaleva_cls_early_sep_late": ([features({"cls": lambda l: 0.6 - 0.1 * l, "sep": lambda l: 0.1 * l})],
                                    [features({"cls": lambda l: 0.1 * l, "sep": lambda l: 0.6 - 0.1 * l})],
                                    [features({"cls": lambda l: 0.6 - 0.1 * l, "sep": lambda l: 0.1 * l}, layers=2, heads=1)]),
    "clark_sep_middle": ([features({"sep": lambda l: np.where(MID(l) if np.ndim(l) == 0 else np.isin(l, [2, 3]), 0.5, 0.1)})],
                         [features({"sep": lambda l: np.where(np.isin(l, [2, 3]), 0.1, 0.5)})],
                         [features({"sep": lambda l: np.where(np.isin(l, [1]), 0.5, 0.1)}, layers=3, heads=1)]),
    "kovaleva_cls_to_sep": ([cls_table(0.6, 0.1)], [cls_table(0.1, 0.6)], [cls_table(0.6, 0.1, heads=2)]),
    "clark_broad_lower": ([entropy(True)], [entropy(False)], [entropy(True, layers=3, heads=1)]),
    "clark_parser_nsubj": ([parser(0.9, 200)], [parser(0.1, 200)], [parser(0.9, 5)]),
    "clark_parser_obj": ([parser(0.9, 200, "obj")], [parser(0.1, 200, "obj")], [parser(0.9, 5, "obj")]),
    "clark_parser_det": ([parser(0.9, 200, "det")], [parser(0.1, 200, "det")], [parser(0.9, 5, "det")]),
    "kovaleva_disable_head": ([disabling(0.03, 0.01, 0.05)], [disabling(-0.05, -0.08, -0.02)],
                              [disabling(0.01, -0.02, 0.04)]),
    "kovaleva_disable_layer": ([disabling(0.03, 0.01, 0.05, "layers")], [disabling(-0.05, -0.08, -0.02, "layers")],
                               [disabling(0.01, -0.02, 0.04, "layers")]),
    "michel_importance_order": ([pruning(0.1)], [pruning(-0.1)], [pruning(0.1, fractions=(0.0, 0.5, 1.0))]),
    "michel_prunable_share": ([pruning_share(0.3), pruning_share(0.4), pruning_share(0.3)],
                              [pruning_share(0.0)] * 3, [pruning_share(0.3)]),
    "kobayashi_specials_norm": ([norms(0.2)], [norms(-0.2)], [norms(0.2, layers=1, heads=2)]),
    "kobayashi_mixing_residual": ([mixing(0.2)], [mixing(0.8)], [mixing(0.2, layers=2)]),
    "abnar_rollout_raw": ([faithfulness(0.3)], [faithfulness(-0.3)], [faithfulness(0.3, examples=2)]),
    "abnar_flow_raw": ([faithfulness(0.3, view="flow")], [faithfulness(-0.3, view="flow")],
                       [faithfulness(0.3, examples=2, view="flow")]),
    "newer_beat_rollout": ([newer_views(0.3)], [newer_views(-0.3)], [newer_views(0.3, examples=2)]),
    **_sieve_cases(),
    "gu_sink_first_token": ([decoder_sink(0.8)], [decoder_sink(0.1)], [decoder_sink(0.8, examples=2)]),
    "gu_sink_first_token_finetuned": ([decoder_sink(0.8)], [decoder_sink(0.1)], [decoder_sink(0.8, examples=2)]),
    "olsson_induction": ([decoder_induction(0.8, 0.02)], [decoder_induction(0.02, 0.5)],
                         [decoder_induction(0.8, 0.02, sequences=2)]),
    "gu_sink_kept_finetuned": ([decoder_sink(0.8, finetuned=0.8)], [decoder_sink(0.8, finetuned=0.3)],
                               [decoder_sink(0.8, examples=2)]),
    "olsson_induction_kept_finetuned": ([decoder_induction(0.8, 0.02)], [decoder_induction(0.8, 0.02, finetuned=0.4)],
                                        [decoder_induction(0.8, 0.02, sequences=2)]),
    "olsson_induction_finetuned": ([decoder_induction(0.8, 0.02)], [decoder_induction(0.02, 0.5)],
                                   [decoder_induction(0.8, 0.02, sequences=2)]),
    **{f"decision_share_{a}": ([decision(True, against=a)], [decision(False, against=a)],
                               [decision(True, layers=1, heads=2, against=a)]) for a in ("importance", "disabling")},
}

CLAIMS = {c.id: c for c in REGISTRY.claims()}


def test_every_registered_claim_has_its_case():
    assert set(CLAIMS) == set(CASES), "add the new claim's tables to CASES (holds, contradicted, n too small)"
    assert len(CLAIMS) == len(REGISTRY.claims()), "claim ids must be unique"


@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_claim_holds_contradicted_and_too_small(claim_id):
    claim = CLAIMS[claim_id]
    holds, contradicted, small = CASES[claim_id]
    seeds = lambda t: list(range(1, len(t) + 1))
    got = [evaluate(claim, "rte", t, BOOT, seeds(t)) for t in (holds, contradicted, small)]
    assert [g["verdict"] for g in got] == ["holds", "contradicted", "inconclusive"], got
    for g in got[:2]:
        assert math.isfinite(g["effect"]) and g["test"] and g["n"] > 0
        assert g["ci_low"] <= g["ci_high"]
    # the side of the effect follows the verdict
    sign = 1 if claim.side == ">" else -1
    assert sign * (got[0]["effect"] - claim.null) > 0 > sign * (got[1]["effect"] - claim.null)
    if math.isfinite(got[0]["p"]):
        assert got[0]["p"] < 0.5 and got[0]["p"] < got[1]["p"] or not math.isfinite(got[1]["p"])


# ------------------------------------------------------------------------ Table 1: the examples behind the scores


def _table1_claim(tables, variant="pretrained", task="rte", seeds=None):
    claim = CLAIMS["kovaleva_table1_pretrained" if variant == "pretrained" else "kovaleva_table1_random"]
    return evaluate(claim, task, tables, BOOT, seeds or list(range(1, len(tables) + 1)))


def _t1_difference(tables, metric, variant="pretrained", task="rte"):
    v = tables[0]["table1"].query("task == @task and metric == @metric").set_index("variant")["value"]
    return v["finetuned"] - v[variant]


def test_table1_interval_and_test_over_the_examples():
    """One seed: the paired bootstrap over the examples and the paired permutation test; the effect is table1.csv's
    difference exactly, n the examples."""
    tables = table1_examples(True)
    row = _table1_claim(tables)
    assert row["effect"] == _t1_difference(tables, "accuracy") and row["effect"] == pytest.approx(0.4)
    assert row["verdict"] == "holds" and 0 < row["ci_low"] < 0.4 < row["ci_high"] < 0.5
    assert row["test"] == "scipy.stats.permutation_test" and row["p"] == pytest.approx(1 / (BOOT.resamples + 1))
    assert row["n"] == 200 and row["n_seeds"] == 1 and row["note"] == ""
    worse = _table1_claim(table1_examples(False))
    assert worse["verdict"] == "contradicted" and worse["ci_high"] < 0 and worse["p"] == 1.0
    small = _table1_claim(table1_examples(True, n=2))
    assert small["verdict"] == "inconclusive" and math.isnan(small["ci_low"]) and math.isnan(small["p"])
    assert small["n"] == 2 and "fewer than 3 validation examples" in small["note"]


def test_table1_regression_resamples_pearson():
    """STS-B: Pearson recomputed on each resample (it is no mean over examples); the predictions are floats."""
    labels = np.linspace(0.0, 5.0, 120)
    close = labels + np.where(np.arange(120) % 2, 0.2, -0.2)
    scrambled = np.random.default_rng(0).permutation(labels)       # |r| near 0
    tables = paired_table1([close], [scrambled], labels, task="stsb")
    row = _table1_claim(tables, task="stsb")
    assert row["effect"] == _t1_difference(tables, "pearson", task="stsb") and row["effect"] > 0.8
    assert row["verdict"] == "holds" and row["ci_low"] > 0.5 and row["n"] == 120
    assert row["p"] == pytest.approx(1 / (BOOT.resamples + 1))
    back = _table1_claim(paired_table1([scrambled], [close], labels, task="stsb"), task="stsb")
    assert back["verdict"] == "contradicted" and back["ci_high"] < -0.5


def test_table1_multibootstrap_resamples_the_seeds_with_the_examples():
    """Three seeds, the middle one reversed: the effect is the mean over seeds, and the Multi-Bootstrap's interval
    spans the seeds (a replicate drawing the reversed seed twice is below zero), so the pooled verdict is
    inconclusive while each seed alone is decided; three seeds that agree hold."""
    labels = BINARY.copy()
    good, bad = right_on(labels, 0, 180), right_on(labels, 0, 100)      # 0.9 and 0.5 accuracy
    tables = paired_table1([good, bad, good], [bad, good, bad], labels)
    row = _table1_claim(tables)
    assert row["effect"] == pytest.approx(_t1_difference(tables, "accuracy"), abs=1e-12)
    assert row["effect"] == pytest.approx(0.4 / 3)
    assert row["ci_low"] < -0.1 and row["ci_high"] > 0.3 and row["verdict"] == "inconclusive"
    assert row["seed_verdicts"] == "holds;contradicted;holds" and row["n"] == 200 and row["n_seeds"] == 3
    # three seeds that agree, each wrong on other examples
    agree = paired_table1([right_on(labels, 0, 180), right_on(labels, 10, 190), right_on(labels, 20, 200)],
                          [bad, bad, bad], labels)
    row = _table1_claim(agree)
    assert row["verdict"] == "holds" and row["seeds_agree"] == 3 and 0.3 < row["ci_low"] < 0.4 < row["ci_high"]
    assert row["test"] == "scipy.stats.permutation_test" and row["p"] < 0.01


def test_table1_score_records_without_predictions_keep_the_seed_bootstrap():
    """Score records without per-example predictions: the bootstrap over seeds (none with one seed), with a note
    to re-run the score jobs; records on other examples likewise."""
    three = _table1_claim(table1([0.2, 0.25, 0.3]))
    assert three["verdict"] == "holds" and three["test"] == "scipy.stats.ttest_1samp" and three["n"] == 100
    assert "re-run the score jobs" in three["note"] and "over the seeds" in three["note"]
    one = _table1_claim(table1([0.2]))
    assert one["verdict"] == "inconclusive" and math.isnan(one["ci_low"]) and math.isnan(one["p"])
    assert "no per-example predictions" in one["note"] and "fewer than 3 seeds" in one["note"]
    assert one["effect"] == pytest.approx(0.2)
    # a seed with predictions and one without, or records over other examples: no pairing
    mixed = table1_examples(True) + table1([0.2])
    assert "no per-example predictions" in _table1_claim(mixed)["note"]
    labels = BINARY.copy()
    other = paired_table1([right_on(labels, 0, 180)], [labels], labels, idx=np.arange(200) + 1)
    other[0]["score_finetuned"] = table1_examples(True)[0]["score_finetuned"]
    assert "not on the same examples" in _table1_claim(other)["note"]


def test_table1_declared_task_headline_is_its_first_metric():
    """A declared task (not one of GLUE's): its headline is the first metric of its rows in table1.csv (macro_f1
    here, after another task's accuracy), recomputed on each resample."""
    from bertology.models.metrics import batched_metric

    labels = np.arange(90) % 3
    fine = labels.copy()
    fine[:9] = (labels[:9] + 1) % 3                                      # right on 90%
    base = np.zeros(90, dtype=int)                                      # one class for everything
    value = lambda preds, metric: float(batched_metric(metric, labels, preds[None])[0])
    t1 = pd.DataFrame({"task": ["rte", "rte", "mine", "mine", "mine", "mine"],
                       "variant": ["finetuned", "pretrained", "finetuned", "finetuned", "pretrained", "pretrained"],
                       "metric": ["accuracy", "accuracy", "macro_f1", "accuracy", "macro_f1", "accuracy"],
                       "value": [0.7, 0.5, value(fine, "macro_f1"), value(fine, "accuracy"), value(base, "macro_f1"),
                                 value(base, "accuracy")], "n": 90})
    rec = lambda preds, variant: pd.json_normalize({"task": "mine", "variant": variant, "predictions": {
        "idx": list(range(90)), "label": labels.tolist(), "prediction": preds.tolist()}})
    tables = [{"table1": t1, "score_finetuned": rec(fine, "finetuned"), "score_pretrained": rec(base, "pretrained")}]
    row = _table1_claim(tables, task="mine")
    assert row["effect"] == value(fine, "macro_f1") - value(base, "macro_f1") and row["verdict"] == "holds"


@pytest.mark.parametrize("metric", ["accuracy", "f1", "macro_f1", "mcc", "pearson", "spearman"])
def test_resampled_differences_are_the_metric_of_the_drawn_rows(metric):
    """Each replicate's difference (classification: from draw-weighted confusion counts) equals the project's metric
    of the drawn rows themselves, bit for bit (whole-number counts)."""
    from bertology.claims.paired import resampled_differences, swapped_differences
    from bertology.models.metrics import batched_metric

    rng = np.random.default_rng(4)
    n = 40
    if metric in ("pearson", "spearman"):
        labels = np.round(rng.uniform(0, 5, n), 1)
        fine, base = labels + rng.normal(0, 1, (2, n)), rng.normal(0, 1, (2, n))
    else:
        k = 2 if metric == "f1" else 3
        labels = rng.integers(0, k, n)
        fine, base = rng.integers(0, k, (2, n)), rng.integers(0, k, (2, n))
    draws = rng.integers(0, n, (25, n))
    got = resampled_differences(metric, labels, fine, base, draws)
    m = lambda p, idx: batched_metric(metric, labels[idx], p[idx][None])[0]
    want = np.array([[m(fine[s], d) - m(base[s], d) for s in range(2)] for d in draws])
    np.testing.assert_array_equal(got, want)
    swaps = rng.random((6, n)) < 0.5
    swaps[0] = False
    got = swapped_differences(metric, labels, fine, base, swaps)
    side = lambda s, w, a, b: batched_metric(metric, labels, np.where(w, b[s], a[s])[None])[0]
    want = [np.mean([side(s, w, fine, base) - side(s, w, base, fine) for s in range(2)]) for w in swaps]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_paired_permutation_test_is_exact_on_few_examples():
    """Four examples, the fine-tuned model right on all, the baseline on none: 2**4 = 16 swap patterns (fewer than
    the resamples: exact), only no swap reaches the observed difference, p = 1/16 (1 on the other side)."""
    from bertology.claims.paired import paired_permutation_p

    labels = np.array([0, 1, 0, 1])
    assert paired_permutation_p("accuracy", labels, labels[None], 1 - labels[None], BOOT, side=">") == 1 / 16
    assert paired_permutation_p("accuracy", labels, labels[None], 1 - labels[None], BOOT, side="<") == 1.0


def test_verdict_rule():
    assert verdict(0.1, 0.3, side=">", null=0.0) == "holds"
    assert verdict(-0.3, -0.1, side=">", null=0.0) == "contradicted"
    assert verdict(-0.1, 0.3, side=">", null=0.0) == "inconclusive"
    assert verdict(0.0, 0.3, side=">", null=0.0) == "inconclusive"  # touching the null decides nothing
    assert verdict(-0.3, -0.1, side="<", null=0.0) == "holds"
    assert verdict(0.6, 0.7, side="<", null=0.5) == "contradicted"
    assert verdict(float("nan"), float("nan"), side=">", null=0.0) == "inconclusive"
    with pytest.raises(ValueError):
        verdict(0, 1, side="=", null=0)


def test_adjust_p_holm_matches_statsmodels_and_keeps_nan():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, np.nan, 0.04, 0.03, 0.5])
    got = adjust_p(p, "holm")
    ok = np.isfinite(p)
    assert np.isnan(got[1])
    np.testing.assert_allclose(got[ok], multipletests(p[ok], method="holm")[1])
    np.testing.assert_allclose(got[ok], [0.04, 0.09, 0.09, 0.5])


def test_bootstrap_one_seed_and_multibootstrap():
    units = [pd.DataFrame({"x": np.arange(10, dtype=float)})]
    est, low, high, n = bootstrap(units, lambda t: t["x"].mean(), BOOT)
    assert est == 4.5 and n == 10 and low < est < high
    # two seeds: the estimate pools them; the interval is wider than one seed's when the seeds disagree
    seeds = [pd.DataFrame({"x": np.arange(10.0)}), pd.DataFrame({"x": np.arange(10.0) + 5})]
    est2, low2, high2, _ = bootstrap(seeds, lambda t: t["x"].mean(), BOOT)
    assert est2 == 7.0 and (high2 - low2) > (high - low)
    # n too small: no interval
    assert all(math.isnan(v) for v in bootstrap([units[0].head(2)], lambda t: t["x"].mean(), BOOT)[1:3])


@pytest.mark.parametrize("n_seeds", [1, 3])
def test_batched_statistics_are_the_replicates_of_the_one_at_a_time_statistics(n_seeds):
    """bootstrap(batched=...) evaluates the same replicates as the statistic applied to each resampled table: the
    mean (NaN left out), the stratified group difference and Spearman's rho (ties, a constant replicate: NaN),
    one seed and the Multi-Bootstrap."""
    from scipy import stats as sst

    from bertology.claims.bootstrap import batched_group_difference, batched_mean, batched_spearman

    rng = np.random.default_rng(0)
    units = []
    for _ in range(n_seeds):
        x = rng.normal(size=15)
        x[[2, 7]] = np.nan
        units.append(pd.DataFrame({"x": x, "g": np.r_[np.zeros(9, int), np.ones(6, int)],
                                   "r": np.round(rng.normal(size=15), 1), "s": rng.integers(0, 3, 15).astype(float)}))
    boot = Boot(400, 0.9, 3)

    def group(t):
        return float(np.nanmean(t.loc[t["g"] == 1, "x"]) - np.nanmean(t.loc[t["g"] == 0, "x"]))

    def rho(t):
        return float("nan") if t["r"].nunique() < 2 or t["s"].nunique() < 2 else float(sst.spearmanr(t["r"], t["s"])[0])

    cases = [(lambda t: float(np.nanmean(t["x"].to_numpy(float))), batched_mean("x"), None),
             (group, batched_group_difference("x", "g"), "g"),
             (rho, batched_spearman("r", "s"), None)]
    for one, batched, strata in cases:
        slow = bootstrap(units, one, boot, strata=strata)
        fast = bootstrap(units, one, boot, strata=strata, batched=batched)
        assert fast[0] == slow[0] and fast[3] == slow[3]
        np.testing.assert_allclose(fast[1:3], slow[1:3], rtol=1e-12, atol=1e-12)
    # a constant column: every replicate NaN, as spearmanr's one at a time
    flat = [u.assign(s=1.0) for u in units]
    assert all(math.isnan(v) for v in bootstrap(flat, rho, boot, batched=batched_spearman("r", "s"))[1:3])


def test_per_seed_verdicts_and_findings_view():
    claim = CLAIMS["kovaleva_cosine_last_layers"]
    tables = [cosine(True), cosine(True), cosine(False)]
    row = evaluate(claim, "rte", tables, BOOT, [1, 2, 3])
    assert row["seed_verdicts"] == "holds;holds;contradicted" and row["seeds"] == "1;2;3" and row["n_seeds"] == 3
    assert row["seeds_agree"] == sum(v == row["verdict"] for v in row["seed_verdicts"].split(";"))
    view = findings_view(pd.DataFrame([row]), "rte")
    assert view.loc[0, "holds"] == "1;1;0" and view.loc[0, "verdict"] == "most" and view.loc[0, "holding"] == 2


def _write(results, rel, frame):
    path = results / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def test_ledger_not_computed_names_the_key_and_holm_spans_the_run(tmp_path):
    results = tmp_path / "results"
    _write(results, "stats/rte/cosine.csv", cosine(True)["cosine"])
    _write(results, "stats/rte/finetuned/patterns.csv", patterns(0.1)["patterns"])
    _write(results, "stats/rte/pretrained/mixing.csv", mixing(0.2)["mixing"])
    ledger = build_ledger(results, REGISTRY.claims(), ["rte"], [42], BOOT, off={"analysis.norms.enabled"},
                          order=[s.key for s in REGISTRY.report_sections()])
    assert len(ledger) == len(REGISTRY.claims())
    rows = ledger.set_index("claim")
    assert rows.loc["kovaleva_cosine_last_layers", "verdict"] == "holds"
    assert rows.loc["kovaleva_patterns_repeat", "verdict"] == "holds"
    mixing_row = rows.loc["kobayashi_mixing_residual"]  # on disk, but its key is off in this run
    assert mixing_row["verdict"] == "not computed" and "analysis.norms.enabled" in mixing_row["note"]
    assert "ablation" in rows.loc["kovaleva_disable_head", "note"]
    p = ledger["p"].to_numpy(float)
    np.testing.assert_allclose(ledger["p_holm"].to_numpy(float), adjust_p(p, "holm"), equal_nan=True)
    assert ledger["claim"].iloc[0].startswith("kovaleva_table1")  # the report's order: Table 1 first
    md = to_markdown(ledger, 0.95)
    assert "| kovaleva_cosine_last_layers | rte | finetuned | holds |" in md


def test_ledger_reads_the_predictions_of_the_score_files(tmp_path):
    """build_ledger on score JSON files as the score step writes them: Table 1 decided over the examples; a score
    file without per-example predictions falls back with its note."""
    import json

    from bertology.models.table1 import aggregate_seeds, scores_frame
    from tests.builders.claims import check_table1_rows

    results = tmp_path / "results"
    labels = BINARY.copy()
    records = [score_record("rte", "finetuned", labels, right_on(labels, 0, 180)),
               score_record("rte", "pretrained", labels, right_on(labels, 0, 100)),
               score_record("rte", "random-finetuned", labels, right_on(labels, 0, 110))]
    del records[2]["predictions"]
    for r in records:
        path = results / "scores" / "rte" / f"{r['variant']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r, indent=2))
    _write(results, "tables/table1.csv", aggregate_seeds(scores_frame(records)))
    ledger = build_ledger(results, REGISTRY.claims(), ["rte"], [42], BOOT)
    rows = ledger.set_index("claim")
    assert rows.loc["kovaleva_table1_pretrained", "verdict"] == "holds"
    assert rows.loc["kovaleva_table1_pretrained", "effect"] == pytest.approx(0.4)
    random = rows.loc["kovaleva_table1_random"]
    assert random["verdict"] == "inconclusive" and random["test"] == "scipy.stats.ttest_1samp"
    assert "re-run the score jobs" in random["note"]
    check_table1_rows(results, ledger[ledger.claim == "kovaleva_table1_pretrained"])


def test_required_inputs_per_seed_and_gates():
    paths = required_inputs(REGISTRY.claims(), ["rte"], ["", "-seed43"], off={"analysis.norms.enabled"})
    assert "stats/rte/cosine.csv" in paths and "stats/rte/cosine-seed43.csv" in paths
    assert "stats/rte/finetuned-seed43/patterns.csv" in paths
    assert "stats/rte/pretrained/entropy.csv" in paths and "stats/rte/pretrained-seed43/entropy.csv" not in paths
    assert not any(p.endswith(("norms.csv", "faithfulness.csv")) for p in paths)
    assert "scores/rte/random-finetuned-seed43.json" in paths and "tables/table1.csv" in paths


def test_report_opens_with_the_ledger(tmp_path):
    from bertology.pipeline.config import validate_config
    from bertology.report.page import build_report

    results = tmp_path / "results"
    _write(results, "stats/rte/cosine.csv", cosine(True)["cosine"])
    _write(results, "stats/rte/finetuned/patterns.csv", patterns(0.9)["patterns"])
    ledger = build_ledger(results, REGISTRY.claims(), ["rte"], [42], BOOT, order=[s.key for s in REGISTRY.report_sections()])
    _write(results, "claims.csv", ledger)
    fig = results / "figures" / "cosine-rte.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"\x89PNG\r\n\x1a\n")
    page = build_report(results, validate_config({}), ["claims.csv", "figures/cosine-rte.png"])
    claims_at, table1_at = page.index('<section id="claims">'), page.index('<section id="table1">')
    assert claims_at < table1_at and page.index('href="#claims"') < page.index('href="#table1"')
    section = page[claims_at:table1_at]
    assert 'class="v v-holds">holds<' in section and 'class="v v-contradicted">contradicted<' in section
    assert 'class="v v-not-computed">not computed' in section and "analysis.norms.enabled" in section
    row = section[section.index('id="claim-kovaleva_cosine_last_layers-rte"'):]
    row = row[:row.index("</tr>")]
    assert 'href="#cosine"' in row and 'href="#fig-cosine-rte"' in row and 'id="fig-cosine-rte"' in page
    r = ledger.set_index("claim").loc["kovaleva_cosine_last_layers"]
    assert f"{r['effect']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]" in row
    assert "last two layers on every task but QQP" in row  # the paper's figure beside ours


def test_every_claim_is_documented_with_its_sentence(repo):
    text = (repo / "docs" / "reference.md").read_text()
    block = text[text.index("<!-- claims:begin -->"):text.index("<!-- claims:end -->")]
    for c in REGISTRY.claims():
        line = next((l for l in block.splitlines() if l.startswith(f"| `{c.id}` |")), None)
        assert line is not None, f"docs/reference.md#claims lacks {c.id}"
        assert c.sentence and c.sentence.replace("|", "\\|") in line and c.statistic in line


def test_claims_step_writes_the_ledger_and_logs_it_to_the_parent_run(tmp_path, monkeypatch):
    """`bertology claims`: claims.csv and claims.md from the declared tables; the parent MLflow run of the invocation
    gets claims.{claim}.{task} = effect, tag claim.{claim}.{task} = verdict and the ledger as artifacts."""
    import mlflow

    from bertology import tracking
    from bertology.workflow.cli import STEPS, main
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.setenv(tracking.INVOCATION_ENV, "inv-claims")
    tracking.init_store()
    tracking.parent_run_id("inv-claims")
    results = tmp_path / "results"
    _write(results, "stats/rte/cosine.csv", cosine(True)["cosine"])
    _write(results, "stats/rte/finetuned/patterns.csv", patterns(0.9)["patterns"])
    config = validate_config({"tasks": ["rte"], "analysis": {"claims": {"bootstrap": 50}}})
    argv = ["claims", "--config", sections_json(config, STEPS["claims"].config),
            "--input", f"tables={results}/stats/rte/cosine.csv", "--input", f"tables={results}/stats/rte/finetuned/patterns.csv",
            "--output", f"ledger={results}/claims.csv", "--output", f"markdown={results}/claims.md"]
    assert main(argv) == 0
    ledger = pd.read_csv(results / "claims.csv").set_index("claim")
    assert ledger.loc["kovaleva_cosine_last_layers", "verdict"] == "holds"
    assert ledger.loc["kovaleva_patterns_repeat", "verdict"] == "contradicted"
    assert ledger.loc["kovaleva_table1_pretrained", "verdict"] == "not computed"
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("t")
    (parent,) = client.search_runs([exp.experiment_id], filter_string="tags.`bertology.kind` = 'workflow'")
    assert parent.data.metrics["claims.kovaleva_cosine_last_layers.rte"] == pytest.approx(
        ledger.loc["kovaleva_cosine_last_layers", "effect"], rel=1e-12)
    assert parent.data.tags["claim.kovaleva_patterns_repeat.rte"] == "contradicted"
    assert parent.data.tags["claim.kovaleva_table1_pretrained.rte"] == "not computed"
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"claims.csv", "claims.md"}


def test_the_obj_claim_reads_spacy_englishs_dobj_arcs():
    """spaCy's English pipelines label UD's obj `dobj`: the claim on a run parsed by them is computed, not empty."""
    from bertology.claims import clark

    got = clark.parser_beats_baseline([parser(0.9, 200, "dobj")], BOOT, side=">", null=0.0, relation="obj")
    assert got.n == 200 and got.ci_low > 0


# ------------------------------------------------------------------------ task-free claims, what an interval rests on


def test_the_registry_decides_task_free_claims_from_their_inputs():
    """A claim is task-free when the first alternative of each table it reads (its gate on) has no {task}: the
    gold-tree parsers with the gold trees, none of them without (their fallback is the task's parser.csv)."""
    from bertology.registry import Claim

    assert {c.id for c in REGISTRY.claims() if c.task_free()} == {"clark_parser_nsubj", "clark_parser_obj",
                                                                   "clark_parser_det"}
    assert not any(c.task_free({"analysis.syntax.conllu"}) for c in REGISTRY.claims())
    fn = CLAIMS["clark_parser_det"].compute
    syntax = Claim("x", "p", "1", "s", "t", fn, (("parser", "stats/syntax/pretrained.csv", ""),))
    per_task = Claim("y", "p", "1", "s", "t", fn, (("parser", "stats/{task}/pretrained/parser.csv", ""),))
    mixed = Claim("z", "p", "1", "s", "t", fn, (("parser", "stats/syntax/pretrained.csv", ""),
                                               ("other", "stats/{task}/cosine.csv", "")))
    assert syntax.task_free() and not per_task.task_free() and not mixed.task_free()


def _parser_run(results, tasks):
    gold = pd.concat([parser(0.9, 200, r)["parser"] for r in ("nsubj", "obj", "det")], ignore_index=True)
    _write(results, "stats/syntax/pretrained.csv", gold)
    for i, task in enumerate(tasks):
        _write(results, f"stats/{task}/cosine.csv", cosine(i % 2 == 0)["cosine"])
        spacy = pd.concat([parser(0.5 + 0.1 * i, 200, r)["parser"] for r in ("nsubj", "obj", "det")],
                          ignore_index=True)
        _write(results, f"stats/{task}/pretrained/parser.csv", spacy)


def test_a_task_free_claim_is_one_row_and_one_test_in_holm(tmp_path):
    """With the gold trees the three parser claims are one row each, task all (the gold table's numbers), counted
    once in Holm's correction; without them (analysis.syntax.conllu off) one row per task from each task's parse.
    The task-dependent rows are the same either way."""
    from bertology.claims.ledger import ALL
    from bertology.claims.render import holm_count

    results = tmp_path / "results"
    tasks = ["rte", "mrpc", "sst2"]
    _parser_run(results, tasks)
    order = [s.key for s in REGISTRY.report_sections()]
    once = build_ledger(results, REGISTRY.claims(), tasks, [42], BOOT, order=order)
    per_task = build_ledger(results, REGISTRY.claims(), tasks, [42], BOOT, order=order,
                            off={"analysis.syntax.conllu"})
    parsers = once[once.claim.str.startswith("clark_parser")]
    assert list(parsers.task) == [ALL] * 3 and (parsers.verdict == "holds").all()
    assert (parsers.figure == "parser-syntax").all()
    assert len(once) == len(per_task) - 3 * (len(tasks) - 1)
    n_tests = int(np.isfinite(once["p"].to_numpy(float)).sum())
    assert holm_count(once) == n_tests == holm_count(per_task) - 3 * (len(tasks) - 1)
    np.testing.assert_allclose(once["p_holm"].to_numpy(float), adjust_p(once["p"].to_numpy(float), "holm"),
                               equal_nan=True)
    gold = evaluate(CLAIMS["clark_parser_det"], ALL, [parser(0.9, 200, "det")], BOOT)
    row = parsers.set_index("claim").loc["clark_parser_det"]
    assert row["effect"] == pytest.approx(gold["effect"]) and row["p"] == pytest.approx(gold["p"])
    spacy = per_task[per_task.claim == "clark_parser_det"]
    assert list(spacy.task) == tasks and spacy["effect"].nunique() == len(tasks)
    keep = ["claim", "task", "effect", "ci_low", "ci_high", "p", "n", "verdict"]
    dep_once = once[~once.claim.str.startswith("clark_parser")][keep].reset_index(drop=True)
    dep_per = per_task[~per_task.claim.str.startswith("clark_parser")][keep].reset_index(drop=True)
    pd.testing.assert_frame_equal(dep_once, dep_per)
    assert required_inputs(REGISTRY.claims(), tasks, [""]).count("stats/syntax/pretrained.csv") == 1
    assert not any(p.endswith("parser.csv") for p in required_inputs(REGISTRY.claims(), tasks, [""]))


def test_every_row_says_what_its_interval_rests_on():
    """rests_on: the n and unit (x seeds with several); a claim with no interval says why and what would give one:
    michel_prunable_share on one seed names train.seeds and the per-example predictions pruning.csv lacks."""
    one = evaluate(CLAIMS["michel_prunable_share"], "rte", [pruning_share(0.3)], BOOT, [42])
    assert one["verdict"] == "inconclusive" and one["rests_on"].startswith("no interval: n = 1 seeds;")
    assert "train.seeds" in one["rests_on"] and "per-example predictions" in one["rests_on"]
    three = evaluate(CLAIMS["michel_prunable_share"], "rte", [pruning_share(0.3)] * 3, BOOT, [1, 2, 3])
    assert three["rests_on"] == "n = 3 seeds"
    heads = evaluate(CLAIMS["kovaleva_cosine_last_layers"], "rte", [cosine(True), cosine(True)], BOOT, [1, 2])
    assert heads["rests_on"] == f"n = {heads['n']} heads x 2 seeds"

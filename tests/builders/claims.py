"""Checks of a finished run's claims ledger against its own tables (used by the end-to-end tests)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bertology.claims.bootstrap import verdict
from bertology.pipeline.tasks import TASKS


def _pooled(results: Path, pattern: str) -> pd.DataFrame | None:
    """Every seed's table of a path pattern ({tag}: '' for the first seed, -seedN), concatenated."""
    tags = [""] + sorted({p.name.split("-seed")[1].split("/")[0].split(".")[0] for p in
                          (results / "stats").rglob("*-seed*")})
    frames = [pd.read_csv(results / pattern.format(tag=f"-seed{t}" if t else "")).assign(_seed=i)
              for i, t in enumerate(tags) if (results / pattern.format(tag=f"-seed{t}" if t else "")).exists()]
    return pd.concat(frames, ignore_index=True) if frames else None


def headline(t1: pd.DataFrame, task: str) -> str:
    """A GLUE task's first metric; a declared task's is the first of its rows in table1.csv (in its metrics' order)."""
    return TASKS[task].metrics[0] if task in TASKS else str(t1.loc[t1.task == task, "metric"].iloc[0])


def recomputed_effects(results: Path, task: str) -> dict[str, float]:
    """The claims' effects, recomputed from the run's tables with plain pandas (every seed's tables pooled:
    the Multi-Bootstrap's point estimate)."""
    out = {}
    t1 = pd.read_csv(results / "tables/table1.csv")
    metric = headline(t1, task)
    v = t1[(t1.task == task) & (t1.metric == metric)].set_index("variant")["value"]
    out["kovaleva_table1_pretrained"] = v["finetuned"] - v["pretrained"]
    if "random-finetuned" in v:
        out["kovaleva_table1_random"] = v["finetuned"] - v["random-finetuned"]
    cos = _pooled(results, f"stats/{task}/cosine{{tag}}.csv")
    last = cos.layer >= cos.layer.max() - 1
    out["kovaleva_cosine_last_layers"] = cos.loc[last, "mean"].mean() - cos.loc[~last, "mean"].mean()
    n = _pooled(results, f"stats/{task}/finetuned{{tag}}/norms.csv")
    if n is not None:
        n = n[n.category.isin(["cls", "sep"]) & n["head"].notna()]
        per_head = n.groupby(["_seed", "layer", "head", "measure"])["mean"].sum().unstack()
        out["kobayashi_specials_norm"] = per_head["weight_share"].mean() - per_head["norm_share"].mean()
    f = _pooled(results, f"stats/{task}/finetuned{{tag}}/faithfulness.csv")
    if f is not None:
        f = f[f.importance == "ablation"].groupby("view")["mean"].mean()
        out["abnar_rollout_raw"] = f["rollout"] - f["raw"]
        out["abnar_flow_raw"] = f["flow"] - f["raw"]
    return out


def check_table1_rows(results: Path, ledger: pd.DataFrame) -> None:
    """The Table 1 claims of a run whose score records hold per-example predictions: the interval and the paired
    permutation test over the validation examples, n = table1.csv's n of the headline metric."""
    t1 = pd.read_csv(results / "tables/table1.csv")
    rows = ledger[ledger.claim.str.startswith("kovaleva_table1") & (ledger.verdict != "not computed")]
    assert len(rows), "no Table 1 claim computed"
    for r in rows.itertuples():
        cell = t1[(t1.task == r.task) & (t1.variant == "finetuned") & (t1.metric == headline(t1, r.task))]
        assert r.test == "scipy.stats.permutation_test" and r.n == int(cell["n"].iloc[0]), r
        assert r.unit == "examples" and math.isfinite(r.ci_low) and math.isfinite(r.p), r


def check_ledger(results: Path, tasks: list[str], off: frozenset[str] = frozenset(), kind: str = "encoder") -> pd.DataFrame:
    """claims.csv's fixed effects equal their recomputation (1e-9), every verdict follows the rule, p_holm is Holm's
    over the ledger (a task-free claim one test), every claim of the registry has one row per task (a task-free one,
    Claim.task_free with the config keys `off` off, one row: task all; the claims about models of the run's `kind`),
    every row says what its interval rests on,
    and the Table 1 claims are decided over the validation examples (:func:`check_table1_rows`)."""
    from statsmodels.stats.multitest import multipletests

    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import ALL

    ledger = pd.read_csv(results / "claims.csv")
    expected = sorted((c.id, t) for c in REGISTRY.claims(kind) for t in ([ALL] if c.task_free(off) else tasks))
    assert sorted(zip(ledger.claim, ledger.task)) == expected
    assert ledger["rests_on"].map(lambda x: isinstance(x, str) and x.startswith(("n = ", "no interval: n = ",
                                                                                  "nothing: "))).all()
    for task in tasks:
        rows = ledger[ledger.task == task].set_index("claim")
        for claim, value in recomputed_effects(results, task).items():
            got = rows.loc[claim, "effect"]
            assert abs(got - value) <= 1e-9 or (math.isnan(got) and math.isnan(value)), (claim, task, got, value)
    for r in ledger.itertuples():
        if r.verdict == "not computed":
            assert isinstance(r.note, str) and r.note
            continue
        assert r.verdict == verdict(r.ci_low, r.ci_high, side=r.side, null=r.null), r
        if math.isfinite(r.ci_low):
            assert r.ci_low <= r.ci_high
    check_table1_rows(results, ledger)
    p = ledger["p"].to_numpy(float)
    ok = np.isfinite(p)
    np.testing.assert_allclose(ledger["p_holm"].to_numpy(float)[ok], multipletests(p[ok], method="holm")[1])
    return ledger


def synthetic_ledger(tasks: list[str], *, seeds: int = 1, extra: bool = False, model: str = "tiny") -> pd.DataFrame:
    """A ledger of every registered claim on `tasks`, with known verdicts: claim i on task j holds when (i + j) % 4 is
    0 or 1, is contradicted when 2, inconclusive (no interval, n = 1) when 3; the task-free claims (Claim.task_free
    with the gold trees on) are one row, task all, that holds; michel_prunable_share is not computed on the first
    task. seeds >= 2: each row's seed verdicts (the first seed disagrees). extra: an unknown column (another helper's
    flag) the consumers must ignore. model: every row's model."""
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import ALL, COLUMNS
    from bertology.stats.moments import adjust_p

    rows = []
    for i, c in enumerate(REGISTRY.claims()):
        for j, task in enumerate([ALL] if c.task_free() else tasks):
            kind = 0 if task == ALL else (i + j) % 4
            sign = 1.0 if c.side == ">" else -1.0
            base = {"claim": c.id, "paper": c.paper, "section": c.section, "statement": c.statement,
                    "paper_value": c.paper_value, "statistic": c.statistic, "task": task, "variant": c.variant,
                    "null": c.null, "side": c.side, "unit": c.unit, "anchor": c.anchor,
                    "figure": (c.figure_all or c.figure) if task == ALL else c.figure, "heads": "0-1;1-2",
                    "test": "scipy.stats.wilcoxon", "n_seeds": seeds, "note": ""}
            if c.id == "michel_prunable_share" and j == 0:
                rows.append({**base, "effect": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p": np.nan, "n": 0,
                             "test": "", "verdict": "not computed", "note": "needs ablation.pruning: x not in this run",
                             "rests_on": "nothing: needs ablation.pruning", "n_seeds": 0})
                continue
            effect = c.null + sign * (0.1 + 0.01 * i) * (1 if kind in (0, 1, 3) else -1)
            half = 0.05 if kind != 3 else np.nan
            v = {0: "holds", 1: "holds", 2: "contradicted", 3: "inconclusive"}[kind]
            n = 144 if kind != 3 else 1
            rows.append({**base, "effect": effect, "ci_low": effect - half, "ci_high": effect + half,
                         "p": 0.001 * (i + 1) if kind != 3 else np.nan, "n": n, "verdict": v,
                         "rests_on": f"n = {n} {c.unit}" if kind != 3 else f"no interval: n = 1 {c.unit}; reason",
                         "seed_verdicts": ";".join(["inconclusive"] + [v] * (seeds - 1)) if seeds > 1 else "",
                         "seeds": ";".join(str(42 + s) for s in range(seeds)) if seeds > 1 else "",
                         "seeds_agree": seeds - 1 if seeds > 1 else pd.NA})
    ledger = pd.DataFrame(rows)
    ledger["p_holm"] = adjust_p(ledger["p"].to_numpy(float), "holm")
    ledger["model"] = model
    ledger = ledger.reindex(columns=list(COLUMNS))
    if extra:
        ledger["chance_flag"] = True
    return ledger

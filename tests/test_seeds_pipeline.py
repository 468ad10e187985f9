"""End to end with two fine-tuning seeds: every fine-tuned analysis runs per seed, the pretrained
store once, and results/stats/{task}/seeds/*.csv compare the seeds (tiny random BERT, demo data)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.slow

TASK = "rte"
SEEDS = [3, 4]


@pytest.fixture(scope="module")
def seeds_run(tmp_path_factory, tiny_model_dir, config_file, snakemake_run):
    work = tmp_path_factory.mktemp("seeds")
    config_file(work, model=str(tiny_model_dir), tasks=[TASK],
                train={"inits": ["pretrained"], "seeds": SEEDS, "epochs": 1, "batch_size": 8, "learning_rate": 1e-3},
                analysis={"seeds": {"bootstrap": 200}})
    proc = snakemake_run(work, "--cores", "2")
    return work, proc


def test_every_fine_tuned_analysis_runs_per_seed_and_pretrained_once(seeds_run):
    work, _ = seeds_run
    r = work / "results"
    per_seed = []
    for variant, tag in (("finetuned", ""), ("finetuned-seed4", "-seed4")):
        per_seed += [f"attention/{TASK}/{variant}.zarr", f"stats/{TASK}/cosine{tag}.csv",
                     f"stats/{TASK}/cosine_examples{tag}.npz", f"ablation/{TASK}/heads{tag}.csv",
                     f"ablation/{TASK}/examples{tag}.npz", f"ablation/{TASK}/importance{tag}.csv",
                     f"ablation/{TASK}/pruning{tag}.csv", f"stats/{TASK}/{variant}/faithfulness.csv",
                     f"attention/syntax/{TASK}-{variant}.zarr", f"stats/syntax/{TASK}-{variant}.csv",
                     f"stats/sieve_delta{tag}.csv"]
        per_seed += [f"stats/{TASK}/{variant}/{name}.csv"
                     for name in ("patterns", "features", "cls", "relations", "sieve", "entropy", "parser", "norms")]
    missing = [p for p in per_seed if not (r / p).exists()]
    assert not missing, missing
    # one pretrained store, extracted once; the first seed kept its plain paths
    assert not list((r / "attention" / TASK).glob("pretrained-*"))
    logs = sorted(p.name for p in (r / "logs" / "extract_attention" / TASK).glob("*.log"))
    assert logs == ["finetuned-seed4.log", "finetuned.log", "pretrained.log"]
    import xarray as xr

    attrs = xr.open_zarr(r / "attention" / TASK / "finetuned-seed4.zarr").attrs
    assert attrs["variant"] == "finetuned-seed4"
    # the two seeds' models differ, so do their per-head statistics
    a = pd.read_csv(r / "stats" / TASK / "cosine.csv")["mean"].to_numpy()
    b = pd.read_csv(r / "stats" / TASK / "cosine-seed4.csv")["mean"].to_numpy()
    assert not np.allclose(a, b)


def test_seed_tables(seeds_run):
    from bertology.analyses import REGISTRY

    work, _ = seeds_run
    d = work / "results" / "stats" / TASK / "seeds"
    cosine = pd.read_csv(d / "cosine.csv")
    first = pd.read_csv(work / "results" / "stats" / TASK / "cosine.csv")
    second = pd.read_csv(work / "results" / "stats" / TASK / "cosine-seed4.csv")
    assert list(cosine.columns) == ["layer", "head", "mean", "std", "n", "seed3", "seed4"]
    np.testing.assert_allclose(cosine["seed3"], first["mean"])
    np.testing.assert_allclose(cosine["mean"], (first["mean"] + second["mean"]) / 2)
    np.testing.assert_allclose(cosine["std"], np.abs(first["mean"] - second["mean"]) / np.sqrt(2))
    assert (cosine["n"] == 2).all()
    assert {"features", "cls", "entropy", "parser", "relations", "sieve", "disabling", "importance", "norms",
            "syntax"} <= set(REGISTRY.seed_tables())
    for name in REGISTRY.seed_tables():  # every table the registry compares across seeds (the run has them all)
        t = pd.read_csv(d / f"{name}.csv")
        assert len(t) and {"mean", "std", "n", "seed3", "seed4"} <= set(t.columns), name
    roles = pd.read_csv(d / "roles.csv")
    assert roles["assigned"].between(0, 2).all() and (roles["n_seeds"] == 2).all()
    agreement = pd.read_csv(d / "role_agreement.csv")
    assert {"role", "layer", "fleiss_kappa", "jaccard"} <= set(agreement.columns)
    mb = pd.read_csv(d / "multibootstrap.csv")
    faithfulness = {q for q in mb["quantity"] if q.startswith("faithfulness.")}  # the token views (norms)
    assert set(mb["quantity"]) - faithfulness == {"cosine", "sieve_bias", "disabling_delta"}
    assert "faithfulness.newer_minus_rollout" in faithfulness
    ok = mb.dropna(subset=["ci_low", "ci_high"])
    assert len(ok) and (ok["ci_low"] <= ok["mean"] + 1e-9).all() and (ok["mean"] <= ok["ci_high"] + 1e-9).all()
    assert (mb["n_seeds"] == 2).all()
    found = pd.read_csv(d / "findings.csv")
    assert set(found["verdict"]) <= {"every", "most", "some", "one", "none", "not computed"}
    assert {"kovaleva_cosine_last_layers", "kovaleva_disable_head", "michel_importance_order"} <= set(found["finding"])
    assert ((found["n_seeds"] == 2) | (found["verdict"] == "not computed")).all()
    html = (work / "results" / "report.html").read_text()
    assert "Robust across seeds" in html
    assert "2 seeds pooled" in html and 'class="sd v-' in html  # the claims matrix: each seed's verdict in a cell
    assert (work / "results" / "figures" / f"seeds-stability-{TASK}.png").exists()
    assert (work / "results" / "figures" / f"seeds-roles-{TASK}.png").exists()


def test_explorer_shows_the_seed_statistics_from_its_declared_inputs(seeds_run):
    """The page offers every registry statistic over seeds, each seed's values with it, and every statistic
    of the run's tables: the rule declares all that the explorer reads (it reads nothing else)."""
    from bertology.analyses import REGISTRY
    from bertology.registry import OVER_SEEDS

    work, _ = seeds_run
    text = (work / "results" / "explorer.html").read_text(encoding="utf-8")
    blob = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S).group(1)
    (task,) = json.loads(blob)["tasks"]
    ms = {m["id"]: m for m in task["metrics"]}
    declared = {st.id.split(":")[1] for st in REGISTRY.statistics() if st.group == OVER_SEEDS}
    assert {"cosine", "disabling", "importance", "entropy", "sieve", "roles"} <= declared
    assert {i.split(":")[1] for i, m in ms.items() if m["group"] == OVER_SEEDS} == declared
    assert set(ms["seeds:cosine"]["seeds"]) == {str(s) for s in SEEDS}
    cosine = pd.read_csv(work / "results" / "stats" / TASK / "seeds" / "cosine.csv")
    row = cosine.iloc[0]
    i = int(row["layer"]) * task["heads"] + int(row["head"])
    assert ms["seeds:cosine"]["single"][i] == pytest.approx(row["mean"], rel=1e-5)
    assert ms["seeds:cosine"]["seeds"][str(SEEDS[1])][i] == pytest.approx(row[f"seed{SEEDS[1]}"], rel=1e-5)
    for prefix in ("entropy:", "parser:", "norms:", "importance", "ablation:"):
        assert any(i.startswith(prefix) for i in ms), prefix
    assert not any("not declared" in n or "absent" in n for n in task["notes"]), task["notes"]


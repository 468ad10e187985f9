"""End to end: the whole DAG on a tiny random BERT and tiny demo tasks, 4 parallel jobs.

Checks every output of docs/reference.md#layout, the MLflow parent/child structure (no run lost in parallel),
that a second run has nothing to do, and that changing an analysis parameter re-runs only that analysis.
"""

from __future__ import annotations

import re

import mlflow
import pandas as pd
import pytest
import xarray as xr
import yaml


pytestmark = pytest.mark.slow

TASKS = ["sst2", "rte"]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, tiny_model_dir, config_file, snakemake_run):
    work = tmp_path_factory.mktemp("pipeline")
    config_file(work, model=str(tiny_model_dir), tasks=TASKS,
                 train={"epochs": 1, "batch_size": 8, "learning_rate": 1e-3})
    proc = snakemake_run(work, "--cores", "4")
    return work, proc


def test_every_design_output_exists(pipeline):
    work, _ = pipeline
    r = work / "results"
    expected = ["tables/table1.csv", "tables/table1.md", "stats/sieve_delta.csv", "report.html", "mlflow.db"]
    for task in TASKS:
        expected += [f"data/{task}/train.parquet", f"data/{task}/validation.parquet",
                     f"models/{task}/pretrained/config.json", f"models/{task}/random/config.json",
                     f"scores/{task}/pretrained.json", f"scores/{task}/finetuned.json",
                     f"scores/{task}/random-finetuned.json", f"attention/{task}/pretrained.zarr",
                     f"attention/{task}/finetuned.zarr", f"stats/{task}/cosine.csv",
                     f"ablation/{task}/heads.csv", f"ablation/{task}/layers.csv",
                     f"ablation/{task}/importance.csv", f"ablation/{task}/pruning.csv"]
        for variant in ("pretrained", "finetuned"):
            expected += [f"stats/{task}/{variant}/{name}.csv"
                         for name in ("patterns", "features", "cls", "relations", "sieve", "entropy", "parser")]
        expected += [f"stats/syntax/{task}-finetuned.csv", f"figures/entropy-{task}.png", f"figures/parser-{task}.png"]
    # gold syntax: the demo's own trees (data.source demo), scored for the pretrained and every fine-tuned model
    expected += ["data/syntax/demo.conllu", "attention/syntax/pretrained.zarr", "stats/syntax/pretrained.csv",
                 "stats/syntax/best_heads.csv", "figures/parser-syntax.png"]
    missing = [p for p in expected if not (r / p).exists()]
    assert not missing, missing
    assert list((r / "models" / "rte" / "pretrained").glob("*.safetensors"))
    assert len(list((r / "figures").glob("*.png"))) >= 10
    html = (r / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(list((r / "figures").glob("*.png")))


def test_stores_match_design_schema(pipeline):
    work, _ = pipeline
    pre = xr.open_zarr(work / "results/attention/rte/pretrained.zarr")
    fin = xr.open_zarr(work / "results/attention/rte/finetuned.zarr")
    assert pre.attention.dims == ("example", "layer", "head", "query", "key")
    assert pre.attention.dtype == "float16"
    assert (pre.example_idx.values == fin.example_idx.values).all()
    assert pre.attrs["variant"] == "pretrained" and fin.attrs["variant"] == "finetuned"


def test_table1_long_format(pipeline):
    work, _ = pipeline
    t = pd.read_csv(work / "results/tables/table1.csv")
    assert list(t.columns[:5]) == ["task", "variant", "metric", "value", "n"]
    assert set(t.variant) == {"pretrained", "finetuned", "random-finetuned"}
    assert set(t.task) == set(TASKS)


def test_mlflow_one_parent_with_a_child_per_job(pipeline):
    work, proc = pipeline
    client = mlflow.MlflowClient(f"sqlite:///{work}/results/mlflow.db")
    exp = client.get_experiment_by_name("test")
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    parents = [r for r in runs if r.data.tags.get("bertology.kind") == "workflow"]
    children = [r for r in runs if r.data.tags.get("bertology.kind") == "job"]
    assert len(parents) == 1
    assert parents[0].info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    # one child per job that Snakemake ran (all but the `all` target rule)
    log = proc.stdout + proc.stderr
    jobs = re.search(r"^total\s+(\d+)", log, re.M)
    assert jobs, log[-2000:]
    assert len(children) == int(jobs.group(1)) - 1
    assert all(c.info.status == "FINISHED" for c in children)
    rules = {c.data.tags["rule"] for c in children}
    assert {"prepare_data", "train_model", "extract_attention", "report"} <= rules
    train = next(c for c in children if c.data.tags["rule"] == "train_model")
    assert train.data.params, "params are logged"
    assert any(len(client.get_metric_history(train.info.run_id, k)) > 1 for k in train.data.metrics)


def test_snakemake_native_report_holds_the_results(pipeline, snakemake_run, tmp_path):
    """`snakemake --report report.zip` after the run: the native report with the workflow's description and the
    flagged results (figures, table1.csv, claims.csv, the forest plot, report.html), categorised by paper."""
    import zipfile

    work, _ = pipeline
    out = tmp_path / "report.zip"
    snakemake_run(work, "--report", str(out))
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        text = "\n".join(z.read(n).decode("utf-8", "replace") for n in names if n.endswith((".js", ".html")))
    files = {n.rsplit("/", 1)[-1] for n in names}
    assert {"claims.csv", "table1.csv", "report.html", "claims.png", "parser-syntax.png"} <= files, sorted(files)
    assert {f"cosine-{t}.png" for t in TASKS} <= files
    for category in ("Claims", "Kovaleva et al. 2019", "Clark et al. 2019", "Michel et al. 2019", "Pande et al. 2021"):
        assert category in text, category
    assert "What it measures." in text and "bertology: self-attention heads" in text


def test_rerun_has_nothing_to_do_and_analysis_change_reruns_only_analysis(pipeline, snakemake_run):
    work, _ = pipeline
    again = snakemake_run(work, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    cfg.setdefault("analysis", {})["sieve"] = {"tau": 2.0}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    dry = snakemake_run(work, "-n")
    out = dry.stdout + dry.stderr
    table = out[out.rindex("Job stats:"):]
    scheduled = set(re.findall(r"^(\w+)\s+\d+$", table, re.M)) - {"total"}
    assert scheduled, out[-2000:]
    assert not scheduled & {"prepare_data", "train_model", "score", "extract_attention", "annotate_words",
                            "ablation_sweep", "ablation_pruning"}, scheduled
    assert any(s.startswith("sieve") for s in scheduled), scheduled


def test_claims_ledger_equals_a_recomputation_and_opens_the_report(pipeline):
    """results/claims.csv: the claims' effects equal (1e-9) a recomputation from the run's tables, every verdict
    follows the rule, Holm over the ledger; the report opens with it; the parent MLflow run has each effect and
    verdict."""
    from tests.builders.claims import check_ledger

    work, _ = pipeline
    results = work / "results"
    ledger = check_ledger(results, TASKS)
    table = [line for line in (results / "claims.md").read_text().splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(ledger)  # header, separator, a row per claim and task
    html = (results / "report.html").read_text()
    assert html.index('<section id="claims">') < html.index('<section id="table1">')
    client = mlflow.MlflowClient(f"sqlite:///{work}/results/mlflow.db")
    exp = client.get_experiment_by_name("test")
    (parent,) = client.search_runs([exp.experiment_id], filter_string="tags.`bertology.kind` = 'workflow'")
    for r in ledger.itertuples():
        assert parent.data.tags[f"claim.{r.claim}.{r.task}"] == r.verdict
        if pd.notna(r.effect):
            assert parent.data.metrics[f"claims.{r.claim}.{r.task}"] == pytest.approx(r.effect, rel=1e-12, abs=1e-12)
    assert any(a.path == "claims.csv" for a in client.list_artifacts(parent.info.run_id))

"""A run of several models (`models:`) on tiny random models of three families: a BERT encoder (fine-tuned), a Llama
decoder with grouped key/value heads and GPT-2 (both pretrained-only, `train.inits: []`), through to the run's ledger,
comparisons, report and explorer; what no model decides is computed once (rules/models.smk)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.builders.decoders import build_decoder
from tests.builders.encoders import build_encoder
from tests.conftest import write_config

pytestmark = pytest.mark.slow

MODELS = ["bert", "llama", "gpt2"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, snakemake_run):
    work = tmp_path_factory.mktemp("models-run")
    bert = build_encoder("bert", work / "tiny" / "bert")
    llama = build_decoder("llama", work / "tiny" / "llama", style="llama")
    gpt2 = build_decoder("gpt2", work / "tiny" / "gpt2")
    write_config(work, tasks=["rte"], train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8},
                 attention={"examples": 12, "batch_size": 4, "chunk_size": 4},
                 ablation={"examples": 12, "bootstrap": 20, "pruning": {"random_orders": 1}},
                 analysis={"norms": {"examples": 8}},
                 models=[{"name": "bert", "model": str(bert)},
                         {"name": "llama", "model": str(llama), "train": {"inits": []}, "data": {"max_length": 48}},
                         {"model": str(gpt2), "train": {"inits": []}}])
    dry = snakemake_run(work, "--cores", "2", "-n")
    proc = snakemake_run(work, "--cores", "2")
    return work / "results", proc, dry


def test_each_model_runs_under_its_own_root_and_the_data_once(run):
    results, _, dry = run
    jobs = dry.stdout
    for rule in ("prepare_data", "attention_sample", "annotate_words"):
        assert f"\n{rule} " in jobs                                     # the shared rules, by their own names
        assert not any(f"{m}__{rule}" in jobs for m in MODELS)           # never once per model
    for model in MODELS:
        root = results / "m" / model
        assert (root / "attention/rte/pretrained.zarr").is_dir() and (root / "claims.csv").is_file()
        assert (root / "report.html").is_file() and (root / "explorer.html").is_file()
        assert not (root / "data").exists()
    assert (results / "m/bert/models/rte/pretrained/config.json").is_file()       # fine-tuned
    assert not (results / "m/llama/models").exists() and not (results / "m/gpt2/models").exists()  # pretrained-only
    # one words table, cut as far as the farthest-seeing model sees each text
    assert (results / "data/rte/words.parquet").is_file()
    assert (results / "logs/prepare_data/rte/train.log").is_file()


def test_the_runs_ledger_holds_every_model(run):
    results, _, _ = run
    ledger = pd.read_csv(results / "claims.csv")
    assert list(pd.unique(ledger["model"])) == MODELS
    for model in MODELS:
        own = pd.read_csv(results / "m" / model / "claims.csv")
        assert (own["model"] == model).all()
        assert len(ledger[ledger["model"] == model]) == len(own)
    # a claim that needs a fine-tuned model is computed for the fine-tuned encoder only; the decoders say why not
    table1 = ledger[ledger["claim"] == "kovaleva_table1_pretrained"].set_index("model")
    assert table1.loc["bert", "verdict"] != "not computed"
    assert (table1.loc[["llama", "gpt2"], "verdict"] == "not computed").all()
    assert table1.loc["llama", "note"]


def test_the_comparisons_name_every_model(run):
    results, _, _ = run
    sinks = pd.read_csv(results / "compare/sinks.csv")
    assert set(MODELS) <= set(sinks["model"])
    kinds = sinks.drop_duplicates("model").set_index("model")["kind"]
    assert kinds["bert"] == "encoder" and kinds["llama"] == kinds["gpt2"] == "decoder"
    source = sinks.set_index("model")[["source", "sink_rate"]]
    assert source.loc["bert", "source"] == "sinks.csv alpha_0" and 0 <= source.loc["bert", "sink_rate"] <= 1
    assert (source.loc[["llama", "gpt2"], "source"] == "decoder_sink.csv alpha_0").all()
    assert (results / "m/gpt2/stats/rte/pretrained/sinks.csv").is_file()     # every store has its alpha_0
    induction = pd.read_csv(results / "compare/induction.csv")
    decoders = induction[induction["model"].isin(["llama", "gpt2"])]
    assert decoders["score"].notna().all()
    depth = pd.read_csv(results / "compare/depth.csv")
    assert depth["depth"].between(0, 1, inclusive="right").all() and set(depth["model"]) == set(MODELS)
    for figure in ("sinks", "depth", "patterns", "roles"):
        assert (results / f"compare/{figure}.png").stat().st_size > 5_000


def test_the_report_and_explorer_switch_between_models(run):
    results, _, _ = run
    report = (results / "report.html").read_text()
    for model in MODELS:
        assert model in report and f"m/{model}/report.html" in report
    explorer = (results / "explorer.html").read_text()
    assert all(f"m/{model}/explorer.html" in explorer for model in MODELS)


def test_every_job_is_tagged_with_its_model(run):
    import mlflow

    results, _, _ = run
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    exp = client.get_experiment_by_name("test")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.rule = 'extract_attention'")
    assert sorted(r.data.tags.get("model") for r in runs) == sorted(["bert", "bert", "llama", "gpt2"])
    assert all(r.data.params.get("model_name") == r.data.tags["model"] for r in runs)
    shared = client.search_runs([exp.experiment_id], filter_string="tags.rule = 'prepare_data'")
    assert shared and {r.data.tags.get("model") for r in shared} == {"shared"}

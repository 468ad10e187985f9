"""The ablation CLI end to end on a tiny fine-tuned-style model directory: tables, summary, figures."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory):
    """A save_pretrained sequence classifier (2 layers x 4 heads, random weights) with a real tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from bertology.models import resolve_model

    path = tmp_path_factory.mktemp("tiny-rte")
    tok = AutoTokenizer.from_pretrained(resolve_model("minilm-l6"), local_files_only=True)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, num_labels=2, initializer_range=0.3,
                     id2label={0: "entailment", 1: "not_entailment"},
                     label2id={"entailment": 0, "not_entailment": 1})
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def test_sweep_and_figures_cli(tiny_classifier_dir, tmp_path, monkeypatch):
    from bertology.ablation import figures_cmd, sweep_cmd

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    rng = np.random.default_rng(0)
    words = "the cat dog sat on a mat and ran far away quickly not never house tree".split()
    df = pd.DataFrame({
        "idx": np.arange(30),
        "text_a": [" ".join(rng.choice(words, rng.integers(3, 12))) for _ in range(30)],
        "text_b": [" ".join(rng.choice(words, rng.integers(2, 8))) for _ in range(30)],
        "label": rng.integers(0, 2, 30),
    })
    data = tmp_path / "validation.parquet"
    df.to_parquet(data, index=False)
    out = tmp_path / "ablation"
    params = json.dumps({"ablation": {"examples": 25, "batch_size": 8, "bootstrap": 40, "seed": 1,
                                      "config_batch": 3, "alpha": 0.05}, "max_length": 32})
    rc = sweep_cmd(["--task", "rte", "--model", str(tiny_classifier_dir), "--data", str(data), "--params", params,
                    "--heads", str(out / "heads.csv"), "--layers", str(out / "layers.csv"),
                    "--summary", str(out / "summary.csv"), "--threads", "1", "--device", "cpu", "--no-progress"])
    assert rc == 0
    heads, layers = pd.read_csv(out / "heads.csv"), pd.read_csv(out / "layers.csv")
    assert list(heads.columns) == ["layer", "head", "metric", "value", "baseline", "delta", "ci_low", "ci_high",
                                   "p_value", "p_adj", "significant", "test", "n"]
    assert len(heads) == 8 and len(layers) == 2 and "head" not in layers.columns
    assert (heads["n"] == 25).all() and (heads["test"] == "mcnemar_exact").all()
    np.testing.assert_allclose(heads["delta"], heads["value"] - heads["baseline"])
    summary = pd.read_csv(out / "summary.csv")
    assert "random_head" in set(summary["finding"])
    info = json.loads((out / "summary.json").read_text())
    assert info["n"] == 25 and "verdict" in info
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("bertology").experiment_id])
    history = client.get_metric_history(run.info.run_id, "head_delta_accuracy")
    assert sorted(m.step for m in history) == list(range(8))

    figs = tmp_path / "figures"
    rc = figures_cmd(["--task", "rte", "--heads", str(out / "heads.csv"), "--layers", str(out / "layers.csv"),
                      "--out-heads", str(figs / "ablation-heads-rte.png"),
                      "--out-layers", str(figs / "ablation-layers-rte.png")])
    assert rc == 0
    for name in ("ablation-heads-rte.png", "ablation-layers-rte.png"):
        assert (figs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wrong_label_count_is_a_clear_error(tiny_classifier_dir, tmp_path, monkeypatch):
    from bertology.ablation import sweep_cmd

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    df = pd.DataFrame({"idx": [0, 1], "text_a": ["a b", "c d"], "text_b": ["x", "y"], "label": [0, 2]})
    df.to_parquet(tmp_path / "v.parquet", index=False)
    with pytest.raises(ValueError, match="needs 3"):
        sweep_cmd(["--task", "mnli", "--model", str(tiny_classifier_dir), "--data", str(tmp_path / "v.parquet"),
                   "--params", "{}", "--heads", "h.csv", "--layers", "l.csv", "--summary", "s.csv"])


def test_snakemake_dag_has_the_ablation_rules(tmp_path):
    from tests.conftest import run_snakemake, write_config

    write_config(tmp_path, tasks=["rte"])
    proc = run_snakemake(tmp_path, "-n", "results/figures/ablation-heads-rte.png",
                         "results/figures/ablation-layers-rte.png", "results/ablation/rte/summary.csv")
    assert "rule ablation_sweep:" in proc.stdout and "rule ablation_figures:" in proc.stdout
    assert "--model results/models/rte/pretrained --data results/data/rte/validation.parquet" in proc.stdout

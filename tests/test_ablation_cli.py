"""The ablation steps end to end through the CLI (`bertology ablation-sweep|ablation-figures`) on a tiny
fine-tuned-style model directory: tables, summary, MLflow record, figures, user errors, the rules."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from bertology.workflow import cli
from bertology.pipeline.config import validate_config
from bertology.pipeline.configjson import sections_json
from tests.builders.steps import run_step

HEAD_COLUMNS = ["layer", "head", "metric", "value", "baseline", "delta", "ci_low", "ci_high", "p_value", "p_adj",
                "significant", "test", "n"]


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory):
    """A save_pretrained sequence classifier (2 layers x 4 heads, random weights) with a real tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from bertology.models.loading import resolve_model

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


@pytest.fixture()
def mlflow_store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    return uri


def _validation(path, n=30, seed=0):
    rng = np.random.default_rng(seed)
    words = "the cat dog sat on a mat and ran far away quickly not never house tree".split()
    pd.DataFrame({
        "idx": np.arange(n),
        "text_a": [" ".join(rng.choice(words, rng.integers(3, 12))) for _ in range(n)],
        "text_b": [" ".join(rng.choice(words, rng.integers(2, 8))) for _ in range(n)],
        "label": rng.integers(0, 2, n),
    }).to_parquet(path, index=False)
    return path


def _config(step, **ablation):
    cfg = validate_config({"ablation": {"examples": 25, "batch_size": 8, "bootstrap": 40, "seed": 1,
                                        "config_batch": 3, **ablation}, "data": {"max_length": 32}})
    return sections_json(cfg, cli.STEPS[step].config)


TRACKED = ("--threads", "1", "--device", "cpu", "--no-progress")  # recorded to MLflow (the mlflow_store fixture)


def _sweep(task, model, data, out, config, options=TRACKED) -> int:
    return run_step("ablation_sweep", config, {"task": task}, inputs={"model": model, "validation": data},
                    outputs={"heads": out / "heads.csv", "layers": out / "layers.csv",
                             "summary": out / "summary.csv", "info": out / "summary.json"}, options=options)


def test_sweep_and_figures_steps(tiny_classifier_dir, tmp_path, mlflow_store):
    data = _validation(tmp_path / "validation.parquet")
    out = tmp_path / "ablation"
    assert _sweep("rte", tiny_classifier_dir, data, out, _config("ablation_sweep")) == 0
    heads, layers = pd.read_csv(out / "heads.csv"), pd.read_csv(out / "layers.csv")
    assert list(heads.columns) == HEAD_COLUMNS
    assert len(heads) == 8 and len(layers) == 2 and "head" not in layers.columns
    assert (heads["n"] == 25).all() and (heads["test"] == "mcnemar_exact").all()
    np.testing.assert_allclose(heads["delta"], heads["value"] - heads["baseline"])
    summary = pd.read_csv(out / "summary.csv")
    assert "random_head" in set(summary["finding"])
    info = json.loads((out / "summary.json").read_text())
    assert info["n"] == 25 and info["verdict"].startswith("accuracy: disabling one head raised the score for ")
    assert set(info["columns"]) >= {"layer", "delta", "p_adj"}
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=mlflow_store)
    (run,) = client.search_runs([client.get_experiment_by_name("bertology").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["rule"] == "ablation_sweep"
    assert run.data.tags["task"] == "rte" and run.data.params["ablation.bootstrap"] == "40"
    history = client.get_metric_history(run.info.run_id, "head_delta_accuracy")
    assert sorted(m.step for m in history) == list(range(8))
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "layer_delta_accuracy")) == [0, 1]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"heads.csv", "layers.csv", "summary.csv",
                                                                        "summary.json"}

    # the naive sweep gives the same tables (up to float rounding of the logits)
    naive = tmp_path / "naive"
    assert _sweep("rte", tiny_classifier_dir, data, naive, _config("ablation_sweep", sweep="naive")) == 0
    pd.testing.assert_frame_equal(pd.read_csv(naive / "heads.csv"), heads, check_exact=False, atol=1e-9)

    figs = tmp_path / "figures"
    assert run_step("ablation_figures", "{}", {"task": "rte"},
                    inputs={"heads": out / "heads.csv", "layers": out / "layers.csv", "summary": out / "summary.csv"},
                    outputs={"heads": figs / "ablation-heads-rte.png", "layers": figs / "ablation-layers-rte.png"},
                    options=()) == 0
    for name in ("ablation-heads-rte.png", "ablation-layers-rte.png"):
        assert (figs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wrong_label_count_is_one_line(tiny_classifier_dir, tmp_path, capsys):
    data = _validation(tmp_path / "v.parquet", n=25)
    capsys.readouterr()
    assert _sweep("mnli", tiny_classifier_dir, data, tmp_path / "out", _config("ablation_sweep"),
                  options=(*TRACKED, "--no-mlflow")) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"bertology ablation-sweep: error: {tiny_classifier_dir} has 2 output(s) but mnli needs 3: "
                            f"give the model fine-tuned on mnli (results/models/mnli/pretrained)\n")
    assert not (tmp_path / "out").exists()


def test_missing_input_is_one_line(tmp_path, mlflow_store, capsys):
    assert run_step("ablation_sweep", _config("ablation_sweep"), {"task": "rte"}, inputs={"model": tmp_path},
                    options=("--no-mlflow",)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "bertology ablation-sweep: error: step ablation_sweep needs --input validation=PATH (has: model)\n"


def test_snakemake_dag_has_the_ablation_steps(tmp_path, config_file, snakemake_run):

    config_file(tmp_path, tasks=["rte"])
    proc = snakemake_run(tmp_path, "-n", "results/figures/ablation-heads-rte.png",
                         "results/figures/ablation-layers-rte.png", "results/ablation/rte/summary.json")
    assert "rule ablation_sweep:" in proc.stdout and "rule ablation_figures:" in proc.stdout
    assert ("bertology ablation_sweep --config '{\"ablation\": {\"alpha\": 0.05, \"batch_size\": 64, \"bootstrap\": 50, "
            "\"config_batch\": 8, \"examples\": 16, \"seed\": 42, \"sweep\": \"fast\"}, \"data\": {\"max_length\": 64, \"short_split\": \"error\"}}' "
            "-w task=rte -w seedtag= --input model=results/models/rte/pretrained "
            "--input validation=results/data/rte/validation.parquet --output heads=results/ablation/rte/heads.csv "
            "--output layers=results/ablation/rte/layers.csv --output summary=results/ablation/rte/summary.csv "
            "--output info=results/ablation/rte/summary.json --output examples=results/ablation/rte/examples.npz "
            "--threads ") in proc.stdout


def _pruning(model, validation, train, out, config) -> int:
    return run_step("ablation_pruning", config, {"task": "rte"},
                    inputs={"model": model, "validation": validation, "importance_data": train},
                    outputs={"importance": out / "importance.csv", "pruning": out / "pruning.csv"}, options=TRACKED)


def test_pruning_and_figures_steps(tiny_classifier_dir, tmp_path, mlflow_store):
    from bertology.ablation.pruning import pruning_fractions

    validation = _validation(tmp_path / "validation.parquet")
    train = _validation(tmp_path / "train.parquet", n=20, seed=3)
    out = tmp_path / "ablation"
    config = _config("ablation_pruning", pruning={"random_orders": 3, "step": 0.25, "importance_examples": 12})
    assert json.loads(config)["ablation"].keys() == {"examples", "batch_size", "seed", "config_batch", "sweep",
                                                     "pruning"}
    assert _pruning(tiny_classifier_dir, validation, train, out, config) == 0
    imp = pd.read_csv(out / "importance.csv")
    assert list(imp.columns) == ["layer", "head", "importance", "raw", "n", "split"] and len(imp) == 8
    assert (imp["n"] == 12).all() and (imp["split"] == "train").all()
    np.testing.assert_allclose(imp.groupby("layer")["importance"].apply(lambda v: np.sqrt((v ** 2).sum())), 1.0)
    pruning = pd.read_csv(out / "pruning.csv")
    assert list(pruning.columns) == ["order", "seed", "fraction", "n_pruned", "metric", "value", "mode"]
    assert len(pruning) == 4 * len(pruning_fractions(0.25)) and (pruning["mode"] == "zero").all()
    assert sorted(pruning["seed"].dropna().unique().tolist()) == [2, 3, 4]       # ablation.seed 1 + 1..3
    assert pruning.loc[pruning["fraction"] == 0, "value"].nunique() == 1            # every order starts unpruned
    assert pruning.loc[pruning["fraction"] == 1, "value"].nunique() == 1            # and ends with no head
    # 0% pruned is the disabling sweep's baseline on the same examples
    sweep_out = tmp_path / "sweep"
    assert _sweep("rte", tiny_classifier_dir, validation, sweep_out, _config("ablation_sweep")) == 0
    base = pd.read_csv(sweep_out / "heads.csv")["baseline"].iloc[0]
    assert pruning.loc[pruning["fraction"] == 0, "value"].iloc[0] == pytest.approx(base)
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=mlflow_store)
    runs = client.search_runs([client.get_experiment_by_name("bertology").experiment_id],
                              filter_string="tags.rule = 'ablation_pruning'")
    (run,) = runs
    assert run.data.tags["pruning_mode"] == "zero" and run.data.tags["importance_split"] == "train"
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "head_importance")) == list(range(8))
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "pruned_accuracy_random_mean")) == \
        [0, 25, 50, 75, 100]

    # uniform removal is recorded as such; the naive evaluation gives the same table
    uni, naive = tmp_path / "uniform", tmp_path / "naive"
    cfg_u = _config("ablation_pruning", pruning={"random_orders": 3, "step": 0.25, "importance_examples": 12,
                                                 "mode": "uniform"})
    cfg_n = _config("ablation_pruning", sweep="naive", pruning={"random_orders": 3, "step": 0.25,
                                                                "importance_examples": 12, "mode": "uniform"})
    assert _pruning(tiny_classifier_dir, validation, train, uni, cfg_u) == 0
    assert _pruning(tiny_classifier_dir, validation, train, naive, cfg_n) == 0
    fast_u, naive_u = pd.read_csv(uni / "pruning.csv"), pd.read_csv(naive / "pruning.csv")
    assert (fast_u["mode"] == "uniform").all()
    pd.testing.assert_frame_equal(fast_u, naive_u, check_exact=False, atol=1e-9)

    figs = tmp_path / "figures"
    assert run_step("pruning_figures", "{}", {"task": "rte"},
                    inputs={"importance": out / "importance.csv", "pruning": out / "pruning.csv"},
                    outputs={"importance": figs / "importance-rte.png", "pruning": figs / "pruning-rte.png"},
                    options=()) == 0
    for name in ("importance-rte.png", "pruning-rte.png"):
        assert (figs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_snakemake_dag_has_the_pruning_steps(tmp_path, config_file, snakemake_run):
    config_file(tmp_path, tasks=["rte"])
    proc = snakemake_run(tmp_path, "-n", "results/figures/pruning-rte.png", "results/figures/importance-rte.png")
    assert "rule ablation_pruning:" in proc.stdout and "rule pruning_figures:" in proc.stdout
    assert "--input importance_data=results/data/rte/train.parquet" in proc.stdout
    assert "\"pruning\": {\"importance_examples\": 2000, \"importance_split\": \"train\", \"mode\": \"zero\", " \
           "\"random_orders\": 2, \"step\": 0.1}" in proc.stdout
    config_file(tmp_path, tasks=["rte"], ablation={"examples": 16, "pruning": {"importance_split": "validation"}})
    proc = snakemake_run(tmp_path, "-n", "results/ablation/rte/importance.csv")
    assert "--input importance_data=results/data/rte/validation.parquet" in proc.stdout

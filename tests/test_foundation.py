"""The foundation: config validation (in Python and through Snakemake), tasks, model resolution and
loading, the CLI's error handling, and an end-to-end Snakemake run of the data rules."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from bertology.workflow import cli
from bertology.pipeline.config import ConfigError, config_hash, load_config, validate_config
from bertology.models.loading import ModelNotFoundError, load_classifier, load_tokenizer, resolve_model, weights_fingerprint
from bertology.pipeline.tasks import TASKS, UnknownTaskError, get_task


GLUE_NAMES = ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte"]


# ---- config -------------------------------------------------------------------------------------------


def test_defaults_are_filled():
    cfg = validate_config({})
    assert cfg["model"] == "minilm-l6"
    assert cfg["tasks"] == ["sst2", "mrpc", "rte"]
    assert cfg["data"]["source"] == "demo" and cfg["data"]["seed"] == 42 and cfg["data"]["max_length"] == 128
    assert cfg["data"]["max_train_examples"] is None
    assert cfg["train"]["inits"] == ["pretrained", "random"] and cfg["train"]["learning_rate"] == 2.0e-5
    assert cfg["attention"] == {**cfg["attention"], "split": "validation", "examples": 1000, "batch_size": 16}
    assert cfg["analysis"]["sieve"] == {"tau": 3.0, "alpha": 0.05, "window": 2, "correction": "none"}
    assert cfg["ablation"]["examples"] is None
    assert cfg["mlflow"] == {"tracking_uri": "sqlite:///results/mlflow.db", "experiment": "bertology",
                             "required": True, "live": False}


def test_given_values_are_kept_and_the_defaults_filled_in_place():
    """Snakemake's validate fills the defaults into the mapping it is given (the workflow's `config`)."""
    raw = {"tasks": ["cola"], "train": {"epochs": 1}}
    cfg = validate_config(raw)
    assert cfg["tasks"] == ["cola"] and cfg["train"]["epochs"] == 1 and cfg["train"]["batch_size"] == 32
    assert cfg is raw and raw["train"]["batch_size"] == 32


@pytest.mark.parametrize("path", ["config.yaml", "config/paper.yaml"])
def test_shipped_configs_are_valid(path, repo):
    cfg = load_config(repo / path)
    assert set(cfg["tasks"]) <= set(TASKS)


def test_unknown_task_is_named_with_the_glue_tasks():
    with pytest.raises(ConfigError) as err:
        validate_config({"tasks": ["sst2", "sst3"]})
    message = str(err.value)
    assert "'sst3'" in message and "tasks.1" in message
    assert all(name in message for name in GLUE_NAMES)


def test_unknown_top_level_key_is_named():
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) 'modle' at the top level.*model"):
        validate_config({"modle": "bert-base-uncased"})


def test_unknown_nested_key_is_named_with_its_section():
    with pytest.raises(ConfigError, match=r"'epoch' under 'train'.*epochs"):
        validate_config({"train": {"epoch": 2}})
    with pytest.raises(ConfigError, match=r"'taus' under 'analysis.sieve'"):
        validate_config({"analysis": {"sieve": {"taus": 2}}})


def test_wrong_type_and_range_are_named():
    with pytest.raises(ConfigError, match=r"'train.epochs' must be of type number, got 'three'"):
        validate_config({"train": {"epochs": "three"}})
    with pytest.raises(ConfigError, match=r"'tasks' must be of type array"):
        validate_config({"tasks": "sst2"})
    with pytest.raises(ConfigError, match=r"data.max_length"):
        validate_config({"data": {"max_length": 2}})
    with pytest.raises(ConfigError, match=r"analysis.sieve.correction.*none, fdr_bh"):
        validate_config({"analysis": {"sieve": {"correction": "bonferroni"}}})


def test_every_problem_is_listed_at_once():
    with pytest.raises(ConfigError) as err:
        validate_config({"tasks": ["sst3"], "train": {"epoch": 1}, "data": {"seed": "x"}})
    message = str(err.value)
    assert "'sst3'" in message and "'epoch'" in message and "data.seed" in message


def test_missing_data_directory_is_named(tmp_path):
    missing = tmp_path / "glue_data"
    with pytest.raises(ConfigError, match=rf"data.source.*{re.escape(str(missing))}.*demo.*hub"):
        validate_config({"data": {"source": str(missing)}})
    missing.mkdir()
    assert validate_config({"data": {"source": str(missing)}})["data"]["source"] == str(missing)


def test_config_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("- sst2\n- mrpc\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(path)


def test_config_hash_is_stable_and_order_independent():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    assert len(config_hash({})) == 16


@pytest.mark.parametrize("override, named", [
    ({"tasks": ["sst3"], "train": {"epoch": 2}}, ["'sst3'", "'epoch' under 'train'", "invalid configuration"]),
    ({"data": {"source": "no_such_glue_dir"}}, ["config key 'data.source'", "no_such_glue_dir"]),
])
def test_snakemake_refuses_a_bad_config_naming_the_key(tmp_path, override, named, config_file, snakemake_run):
    config_file(tmp_path, **override)
    proc = snakemake_run(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert all(text in output for text in named), output[-3000:]


# ---- tasks --------------------------------------------------------------------------------------------


def test_tasks_know_columns_labels_and_files():
    assert list(TASKS) == GLUE_NAMES
    assert get_task("stsb").is_regression and get_task("stsb").num_labels == 1
    assert get_task("mnli").label_names == ("entailment", "neutral", "contradiction")
    assert get_task("mnli").glue_files["validation"] == "dev_matched.tsv"
    assert get_task("mnli").hub_splits["validation"] == "validation_matched"
    assert not get_task("sst2").is_pair and get_task("rte").is_pair
    assert get_task("mrpc").metrics[0] == "f1" and get_task("cola").metrics[0] == "mcc"
    with pytest.raises(UnknownTaskError, match=r"unknown task 'sst3'; GLUE tasks are: cola, sst2"):
        get_task("sst3")


# ---- models -------------------------------------------------------------------------------------------


def test_embedded_model_resolves_to_a_safetensors_dir():
    path = Path(resolve_model("minilm-l6"))
    assert path.is_absolute() and (path / "config.json").is_file()
    assert list(path.glob("*.safetensors"))
    config = yaml.safe_load((path / "config.json").read_text())
    assert config["num_hidden_layers"] == 6 and config["num_attention_heads"] == 12


def test_local_directory_resolves(tiny_model_dir):
    assert resolve_model(str(tiny_model_dir)) == str(tiny_model_dir.resolve())
    assert len(weights_fingerprint(tiny_model_dir)) == 16


@pytest.mark.parametrize("name", ["./no/such/model", "/definitely/not/here", "nobody-xyz/no-such-model-42"])
def test_missing_model_fails_fast_with_a_suggestion(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model(name)
    assert time.monotonic() - start < 30
    if "/" in name and not name.startswith((".", "/")):
        assert "minilm-l6" in str(err.value) and "local" in str(err.value)
    else:
        assert name in str(err.value)


def test_directory_without_weights_or_config_is_refused(tmp_path, tiny_model_dir):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="config.json"):
        resolve_model(str(tmp_path / "empty"))
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    with pytest.raises(ModelNotFoundError, match="safetensors"):
        resolve_model(str(no_weights))


def _encoder_state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.base_model.state_dict().items()}


def test_random_init_differs_from_pretrained_and_is_seeded(tiny_model_dir):
    from safetensors.torch import load_file

    path = str(tiny_model_dir)
    pre = load_classifier(path, 2, init="pretrained", seed=0)
    saved = {k.removeprefix("bert."): v for f in tiny_model_dir.glob("*.safetensors") for k, v in load_file(f).items()}
    pre_state = _encoder_state(pre)
    word = "embeddings.word_embeddings.weight"
    assert torch.equal(pre_state[word], saved[word])  # the pretrained weights were loaded
    rand_a = _encoder_state(load_classifier(path, 2, init="random", seed=7))
    rand_b = _encoder_state(load_classifier(path, 2, init="random", seed=7))
    rand_c = _encoder_state(load_classifier(path, 2, init="random", seed=8))
    weights = [k for k in pre_state if k.endswith("weight") and "LayerNorm" not in k]
    assert all(torch.equal(rand_a[k], rand_b[k]) for k in weights)
    assert all(not torch.equal(rand_a[k], pre_state[k]) for k in weights)
    assert all(not torch.equal(rand_a[k], rand_c[k]) for k in weights)
    std = rand_a["encoder.layer.0.attention.self.query.weight"].std().item()
    assert abs(std - pre.config.initializer_range) < 0.3 * pre.config.initializer_range  # the model's initialiser


def test_classifier_config_and_bad_init(tiny_model_dir):
    model = load_classifier(str(tiny_model_dir), 3, seed=42, id2label={0: "entailment", 1: "neutral", 2: "contradiction"})
    assert model.config.num_labels == 3 and model.config.id2label[2] == "contradiction"
    assert model.config.label2id["neutral"] == 1
    reg = load_classifier(str(tiny_model_dir), 1, seed=42, regression=True)
    assert reg.config.problem_type == "regression"
    with pytest.raises(ValueError, match="pretrained.*random"):
        load_classifier(str(tiny_model_dir), 2, init="xavier", seed=42)


def test_eager_attention_rows_sum_to_one(tiny_model_dir):
    model = load_classifier(str(tiny_model_dir), 2, init="pretrained", seed=42).eval()
    assert model.config._attn_implementation == "eager"
    tok = load_tokenizer(str(tiny_model_dir))
    enc = tok(["The cat sat on the mat.", "Short one."], ["It was happy.", "Yes."], padding=True,
              return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    assert len(out.attentions) == 2
    n_tokens = enc["input_ids"].shape[1]
    for layer in out.attentions:  # (B, H, T, T)
        assert layer.shape == (2, 4, n_tokens, n_tokens)
        torch.testing.assert_close(layer.sum(-1), torch.ones(2, 4, n_tokens))
        pad = enc["attention_mask"][1] == 0
        assert pad.any() and torch.all(layer[1][:, :, pad] < 1e-6)  # no attention to padding


# ---- CLI ----------------------------------------------------------------------------------------------


def test_cli_reports_user_errors_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tasks": ["sst3"]}))
    assert cli.main(["validate-config", "--input", f"config={bad}"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("bertology validate-config: error: invalid configuration: config key 'tasks.0' has value "
                            "'sst3', which is not allowed; choose one of: cola, sst2, mrpc, stsb, qqp, mnli, qnli, "
                            "rte. See schemas/config.schema.yaml for every key, its meaning and default.\n")
    assert cli.main(["validate-config"]) == 1
    assert capsys.readouterr().err == ("bertology validate-config: error: step validate_config needs --input "
                                       "config=PATH (has: none)\n")
    missing = tmp_path / "nope.yaml"
    assert cli.main(["validate-config", "--input", f"config={missing}"]) == 1
    assert capsys.readouterr().err == (f"bertology validate-config: error: config file {missing} does not exist "
                                       f"(relative to {Path.cwd()})\n")
    assert cli.main(["no-such-command"]) == 2
    assert capsys.readouterr().err == (
        "bertology: unknown step 'no-such-command'; steps: " + ", ".join(s.replace("_", "-") for s in cli.STEPS) + "\n")


def test_validate_config_prints_the_resolved_config(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"tasks": ["rte"], "train": {"epochs": 1}}))
    assert cli.main(["validate-config", "--input", f"config={good}"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    resolved = json.loads(captured.out)
    assert resolved == validate_config({"tasks": ["rte"], "train": {"epochs": 1}})
    assert resolved["tasks"] == ["rte"] and resolved["train"]["epochs"] == 1 and resolved["train"]["batch_size"] == 32


def test_init_mlflow_creates_the_store_and_the_parent_run(tmp_path, monkeypatch, capsys):
    import mlflow

    from bertology import tracking
    from bertology.pipeline.configjson import sections_json

    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    monkeypatch.setenv(tracking.INVOCATION_ENV, "inv-42")
    config = sections_json(validate_config({"mlflow": {"tracking_uri": uri, "experiment": "e1"}}),
                           cli.STEPS["init_mlflow"].config)
    assert cli.main(["init-mlflow", "--config", config]) == 0
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("e1")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.tags[tracking.INVOCATION_TAG] == "inv-42" and run.data.tags["bertology.kind"] == "workflow"
    assert capsys.readouterr().out == f"experiment {exp.experiment_id}, parent run {run.info.run_id} (invocation inv-42)\n"
    assert cli.main(["init-mlflow", "--config", config]) == 0   # idempotent: the same parent run
    assert len(client.search_runs([exp.experiment_id])) == 1


# ---- end to end ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_snakemake_prepares_data_and_is_idempotent(tmp_path, config_file, snakemake_run):
    config_file(tmp_path)
    targets = ["results/data/sst2/train.parquet", "results/data/mrpc/validation.parquet"]
    snakemake_run(tmp_path, "--cores", "2", *targets)
    sst2 = pd.read_parquet(tmp_path / targets[0])
    mrpc = pd.read_parquet(tmp_path / targets[1])
    for df, n in ((sst2, 40), (mrpc, 24)):
        assert list(df.columns) == ["idx", "text_a", "text_b", "label"]
        assert len(df) == n and df["idx"].tolist() == list(range(n))
        assert str(df["idx"].dtype) == "int64" and str(df["label"].dtype) == "int64"
    assert sst2["text_b"].isna().all() and mrpc["text_b"].map(lambda t: isinstance(t, str)).all()
    assert (tmp_path / "results/logs/prepare_data/sst2/train.log").is_file()
    assert (tmp_path / "results/benchmarks/prepare_data/mrpc/validation.tsv").is_file()
    assert (tmp_path / "results/mlflow.db").is_file()  # created once by the workflow's onstart
    again = snakemake_run(tmp_path, "--cores", "2", *targets)
    assert "Nothing to be done" in again.stdout + again.stderr

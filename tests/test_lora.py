"""train.method lora (peft): only the adapters and the head are trained, the merged model is a plain save_pretrained
directory that gives the peft model's logits, a resumed run ends where an uninterrupted one ends, and a target
module the model lacks (or peft missing) is one line before any job.

Tiny random models built here: the BERT of tests/conftest.py (pairs with segment ids), a Llama of
tests/builders/decoders.py (a decoder with grouped key/value heads), DistilBERT and GPT-2 configs on the meta
device for the default target modules.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.test_training import _setup, keyword_frame, step_config, train_config

pytest.importorskip("peft", reason="train.method lora needs peft (in the test extra: pip install -e '.[test]')")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RANK = 4


@pytest.fixture(scope="module")
def tiny_llama_dir(tmp_path_factory) -> Path:
    from tests.builders.decoders import build_decoder

    return build_decoder("llama", tmp_path_factory.mktemp("tiny-llama") / "llama", style="llama")


def lora_config(**train):
    lora = {"rank": RANK, **train.pop("lora", {})}
    return train_config(method="lora", lora=lora, **train)


def _weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_only_the_adapters_and_the_head_are_trained(tiny_model_dir):
    """During training every weight outside the adapters and the head's trained copy is the one loaded; after it the
    adapters are merged into query and value (changed), the head is the trained copy (changed), the rest as loaded."""
    import torch

    from bertology.models.training import train

    spec, tok, model, train_enc, eval_enc = _setup(tiny_model_dir, task="rte", n_train=64)
    before = _weights(model)
    parameters = {name for name, _ in model.named_parameters()}
    checked = []

    def inspect(values, step):
        if step != 3 or "train_loss" not in values:
            return
        for name, p in model.named_parameters():  # the caller's model, with peft's layers in it while training
            if ".lora_" in name or ".modules_to_save." in name:
                assert p.requires_grad, name
                continue
            assert not p.requires_grad, name
            original = name.replace(".base_layer", "").replace(".original_module", "")
            assert torch.equal(p.detach(), before[original]), name
            checked.append(original)
        assert any(torch.count_nonzero(p) for n, p in model.named_parameters() if ".lora_B." in n)

    cfg = lora_config(epochs=2, batch_size=16, learning_rate=3e-3, seed=1)
    history = train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, progress=False, on_metrics=inspect)
    assert set(checked) == parameters  # the head's as its frozen original (peft trains a copy)
    assert history.steps == list(range(1, 9)) and all(np.isfinite(history.losses))
    after = _weights(model)
    assert set(after) == set(before)  # a plain BertForSequenceClassification again: no lora_*, base_layer
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {f"bert.encoder.layer.{i}.attention.self.{m}.weight" for i in (0, 1) for m in ("query", "value")} \
        | {"classifier.weight", "classifier.bias"}
    hidden, layers, labels = 32, 2, 2
    assert history.finetuning == {
        "method": "lora", "rank": RANK, "alpha": 16, "dropout": 0, "target_modules": ["query", "value"],
        "adapted_modules": 2 * layers, "head": ["classifier"],
        "trainable_parameters": 2 * layers * 2 * RANK * hidden + hidden * labels + labels,
        "parameters": sum(v.numel() for v in before.values())}


@pytest.mark.parametrize("which", ["bert", "llama"])
def test_the_merged_model_is_a_plain_directory_with_the_peft_models_logits(which, tiny_model_dir, tiny_llama_dir,
                                                                           tmp_path, monkeypatch):
    """The peft model's logits just before merging = the saved directory's, loaded by load_classifier and by
    load_encoder (tolerance: merging rounds); the directory is what full fine-tuning writes (no adapter files),
    and training.json records the method, rank, alpha, target modules and trained parameters."""
    from bertology.models import training
    from bertology.models.loading import load_classifier, load_encoder, load_tokenizer

    model_dir = tiny_model_dir if which == "bert" else tiny_llama_dir
    spec, tok, model, train_enc, eval_enc = _setup(model_dir, task="rte", n_train=48)
    unmerged = {}
    merge = training.merge_lora

    def merge_after_predicting(peft_model):
        unmerged["logits"] = training.predict(peft_model, tok, eval_enc, batch_size=16, device=peft_model.device)
        unmerged["type"] = type(peft_model).__name__
        return merge(peft_model)

    monkeypatch.setattr(training, "merge_lora", merge_after_predicting)
    cfg = lora_config(epochs=1, batch_size=16, learning_rate=1e-2, seed=2, lora={"alpha": 32})
    history = training.train(model, tok, train_enc, spec, cfg, progress=False)
    assert unmerged["type"] == "PeftModelForSequenceClassification"
    out = training.save_model(model, tok, tmp_path / "model", history, extra={"task": "rte", "train": cfg})

    names = {p.name for p in out.iterdir()}
    assert "model.safetensors" in names and not names & {"adapter_config.json", "adapter_model.safetensors"}
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [type(model).__name__] and type(model).__name__.endswith(
        "ForSequenceClassification")
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        assert not [k for k in f.keys() if "lora" in k or "base_layer" in k or "modules_to_save" in k]
    info = json.loads((out / "training.json").read_text())
    targets = ["query", "value"] if which == "bert" else ["q_proj", "v_proj"]
    record = info["finetuning"]
    assert {k: record[k] for k in ("method", "rank", "alpha", "target_modules")} == {
        "method": "lora", "rank": RANK, "alpha": 32, "target_modules": targets}
    assert 0 < record["trainable_parameters"] < record["parameters"] / 10
    assert info["train"]["method"] == "lora" and info["train"]["lora"]["rank"] == RANK  # the config as a mapping
    assert "finetuning" not in info["history"]

    tok2 = load_tokenizer(str(out))
    for loaded in (load_classifier(str(out), 2, seed=99, id2label=spec.id2label),
                   load_encoder(str(out), classifier=True)):
        logits = training.predict(loaded, tok2, eval_enc, batch_size=16, device=loaded.device)
        np.testing.assert_allclose(logits, unmerged["logits"], atol=1e-5, rtol=1e-4)
        assert not np.allclose(logits, 0)


def test_the_last_evaluation_is_the_saved_models_bit_for_bit(tiny_model_dir, tmp_path):
    """The last evaluation is made with the adapters merged: a score job that reuses it reports exactly what
    evaluating the saved model gives."""
    from bertology.models.loading import load_classifier
    from bertology.models.training import predict, save_model, train

    spec, tok, model, train_enc, eval_enc = _setup(tiny_model_dir, task="stsb", n_train=48)
    history = train(model, tok, train_enc, spec, lora_config(epochs=1, batch_size=16, learning_rate=1e-2, seed=2),
                    eval_enc=eval_enc, progress=False)
    out = save_model(model, tok, tmp_path / "model", history)
    again = load_classifier(str(out), 1, seed=5, regression=True)
    logits = predict(again, tok, eval_enc, batch_size=64, device=again.device)
    assert history.evals[-1]["predictions"] == logits[:, 0].astype(np.float64).tolist()


def test_an_interrupted_lora_run_resumes_to_the_same_weights(dropout_model_dir, tmp_path):
    """Stop in step 3 (checkpoint at 2), re-run: it resumes at 2 from a state that holds only the adapters and the
    head, and ends with the weights of an uninterrupted run (model and LoRA dropout both replayed)."""
    import torch

    from bertology.models.checkpoint import STATE_FILE
    from bertology.models.training import train

    cfg = lora_config(epochs=2, batch_size=16, learning_rate=1e-2, seed=5, checkpoint_steps=2,
                      lora={"dropout": 0.05})
    spec, tok, model, train_enc, eval_enc = _setup(dropout_model_dir, n_train=80)
    full = train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, progress=False)
    reference = _weights(model)

    class Interrupt(Exception):
        pass

    def stop_at_3(values, step):
        if step == 3 and "train_loss" in values:
            raise Interrupt

    ckpt = tmp_path / "ckpt"
    spec, tok, model, train_enc, eval_enc = _setup(dropout_model_dir, n_train=80)
    with pytest.raises(Interrupt):
        train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, checkpoint_dir=ckpt, resume_key="k",
              progress=False, on_metrics=stop_at_3)
    state = torch.load(ckpt / STATE_FILE, weights_only=True)
    assert state["step"] == 2 and state["model"]
    assert all(".lora_" in k or ".modules_to_save." in k for k in state["model"]), list(state["model"])
    assert len(state["optimizer"]["state"]) == len(state["model"])  # AdamW moments of exactly those

    spec, tok, model, train_enc, eval_enc = _setup(dropout_model_dir, n_train=80)  # a fresh process's model
    resumed = train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, checkpoint_dir=ckpt, resume_key="k",
                    progress=False)
    assert resumed.resumed_from == [2] and resumed.steps == full.steps
    np.testing.assert_allclose(resumed.losses, full.losses, rtol=1e-5)
    assert [e["epoch"] for e in resumed.evals] == [1, 2]
    assert set(_weights(model)) == set(reference)
    for name, value in reference.items():
        assert np.allclose(model.state_dict()[name].numpy(), value.numpy(), atol=1e-6), name


def test_the_resume_key_holds_the_method_and_the_lora_settings():
    from bertology.models.checkpoint import resume_key

    df = keyword_frame(8, 0)

    def key(**train):
        return resume_key(train_config(**train), model="m", init="pretrained", task="sst2", max_length=32, train_df=df)

    full = key()
    assert key(lora={"rank": 4}) == full  # full fine-tuning ignores train.lora (and keeps its checkpoints)
    lora = key(method="lora")
    assert lora != full
    assert len({lora, key(method="lora", lora={"rank": 4}), key(method="lora", lora={"alpha": 8}),
                key(method="lora", lora={"dropout": 0.1}), key(method="lora", lora={"target_modules": ["query"]})}) == 5


def test_default_target_modules_per_architecture(tiny_model_dir, tiny_llama_dir):
    """null: peft's default where it has one (BERT, Llama, GPT-2), else query and value found by name (DistilBERT,
    which peft has no default for); the head is every module outside the base model."""
    import torch
    from transformers import AutoModelForSequenceClassification, DistilBertConfig, GPT2Config

    from bertology.models.loading import meta_classifier
    from bertology.models.lora import head_modules, lora_targets

    def meta(config):
        with torch.device("meta"):
            return AutoModelForSequenceClassification.from_config(config)

    cases = [(meta_classifier(str(tiny_model_dir)), ["query", "value"], ["classifier"]),
             (meta_classifier(str(tiny_llama_dir)), ["q_proj", "v_proj"], ["score"]),
             (meta(GPT2Config(n_layer=1, n_embd=32, n_head=4)), ["c_attn"], ["score"]),
             (meta(DistilBertConfig(n_layers=1, dim=32, hidden_dim=64, n_heads=4)), ["q_lin", "v_lin"],
              ["pre_classifier", "classifier"])]
    for model, targets, head in cases:
        assert lora_targets(model, None) == targets, model.config.model_type
        assert head_modules(model) == head, model.config.model_type
        assert lora_targets(model, ["attention.self.query"] if targets == ["query", "value"] else targets[:1])


def test_target_modules_the_model_lacks_are_one_line_before_any_job(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from bertology.workflow import snakefile as workflow
    from bertology.pipeline.config import ConfigError, validate_config
    from bertology.models.loading import meta_classifier
    from bertology.models.lora import check_lora, lora_targets

    expected = ("train.lora.target_modules: the model (bert) has no linear module named q_proj, v_proj; its linear "
                "modules are: dense, key, query, value. Name some of those, or set train.lora.target_modules: null "
                "for its attention's query and value projections")
    with pytest.raises(ConfigError) as err:
        lora_targets(meta_classifier(str(tiny_model_dir)), ["query", "q_proj", "v_proj"])
    assert str(err.value) == expected
    with pytest.raises(ConfigError, match="no linear module named classifier;"):  # the head is trained whole
        check_lora(str(tiny_model_dir), {"target_modules": ["classifier"]})
    check_lora(str(tiny_model_dir), {"target_modules": None})
    check_lora(str(tmp_path / "absent"), {"target_modules": ["anything"]})  # not built: the training job checks

    monkeypatch.chdir(tmp_path)
    config = validate_config({"model": str(tiny_model_dir),
                              "train": {"method": "lora", "lora": {"target_modules": ["query", "q_proj", "v_proj"]}}})
    with pytest.raises(SystemExit):
        workflow.on_start("inv-lora", config)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bertology: error: model: {expected}"]


def test_lora_without_peft_says_how_to_install_it(tiny_model_dir, monkeypatch):
    import importlib.util

    from bertology.models.lora import LoraUnavailableError, check_lora
    from bertology.models.training import train
    from bertology.pipeline.errors import UserError

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else find_spec(name, *a))
    with pytest.raises(LoraUnavailableError) as err:
        check_lora(str(tiny_model_dir), {"target_modules": None})
    assert isinstance(err.value, UserError) and "\n" not in str(err.value)
    assert str(err.value) == ("train.method: lora needs the optional package peft, which is not installed: pip install "
                              "-c constraints.txt -e '.[decoders]' (or: make install-decoders)")
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=16)
    with pytest.raises(LoraUnavailableError):
        train(model, tok, train_enc, spec, lora_config(epochs=1, batch_size=16), progress=False)


def test_the_train_step_with_lora_and_the_score_that_reuses_its_evaluation(tiny_model_dir, tmp_path, monkeypatch):
    """train_model with train.method lora writes the plain model and its record; the score job reuses the last
    evaluation, which equals evaluating the saved model again."""
    from bertology.pipeline.outputcache import record_digest
    from bertology.models.training import HISTORY_FILE
    from tests.builders.steps import run_step

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    keyword_frame(48, 0, pair=True).to_parquet(data / "train.parquet")
    keyword_frame(20, 1, pair=True).to_parquet(data / "validation.parquet")
    settings = dict(model=str(tiny_model_dir), data={"max_length": 32},
                    train={"epochs": 1, "batch_size": 16, "learning_rate": 1e-2, "seed": 1, "method": "lora",
                           "lora": {"rank": RANK, "target_modules": ["query", "key", "value"]}})
    assert run_step("train_model", step_config("train_model", **settings), {"task": "rte", "init": "pretrained"},
                    inputs={"train": data / "train.parquet", "validation": data / "validation.parquet"},
                    outputs={"model": "model"}) == 0
    info = json.loads(Path("model", HISTORY_FILE).read_text())
    assert info["finetuning"]["target_modules"] == ["query", "key", "value"]
    assert info["finetuning"]["adapted_modules"] == 6
    assert info["train"]["lora"] == {"rank": RANK, "alpha": 16, "dropout": 0,
                                     "target_modules": ["query", "key", "value"]}
    assert not Path("results/checkpoints/rte/pretrained").exists()

    def score(name: str, model: str) -> dict:
        assert run_step("score", step_config("score", **settings), {"task": "rte", "variant": "finetuned"},
                        inputs={"validation": data / "validation.parquet", "model": model},
                        outputs={"score": name}) == 0
        record = json.loads(Path(name).read_text())
        record.pop("seconds")
        return record

    reused = score("reused.json", "model")
    assert reused["predictions"]["prediction"] == info["history"]["evals"][-1]["predictions"]
    import shutil

    shutil.copytree("model", "plain")
    del info["evaluation"]
    Path("plain", HISTORY_FILE).write_text(json.dumps(info))
    record_digest("plain")
    assert {**score("evaluated.json", "plain"), "model_path": "model"} == reused

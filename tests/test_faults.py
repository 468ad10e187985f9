"""Bad models and user errors, as a careful new user meets them: an encoder-decoder is refused up front in one
line (by the loader and at workflow start), as is a decoder whose tokenizer cannot pad a batch; a broken model
directory names its file, and a user error is one line on stderr (the traceback only with --debug)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bertology.models.loading import UnsupportedModelError, check_model, load_encoder


def _save(model, path: Path) -> Path:
    model.save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    from tests.builders.decoders import build_decoder

    return build_decoder("gpt2", tmp_path_factory.mktemp("gpt2"))


def test_a_decoder_is_read_as_one(gpt2_dir):
    assert check_model(str(gpt2_dir)) == "decoder"
    assert load_encoder(str(gpt2_dir)).config.model_type == "gpt2"


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_encoder_decoder_is_refused(tmp_path, kind):
    if kind == "t5":
        from transformers import T5Config, T5Model

        model = T5Model(T5Config(vocab_size=100, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2))
    else:
        from transformers import BartConfig, BartModel

        model = BartModel(BartConfig(vocab_size=100, d_model=16, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                     decoder_ffn_dim=32, max_position_embeddings=32))
    path = _save(model, tmp_path / kind)
    with pytest.raises(UnsupportedModelError, match=rf"is an encoder-decoder \({kind}\), neither a bidirectional encoder nor a decoder"):
        check_model(str(path))


def test_a_bert_configured_as_decoder_is_refused(tiny_model_dir, tmp_path):
    path = shutil.copytree(tiny_model_dir, tmp_path / "bert")
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "is_decoder": True}))
    with pytest.raises(UnsupportedModelError, match=r"configured as a decoder \(bert, is_decoder: true\)"):
        check_model(str(path))


def test_encoder_passes(tiny_model_dir):
    check_model(str(tiny_model_dir))
    assert load_encoder(str(tiny_model_dir)).config.model_type == "bert"


def test_broken_config_json_names_the_file(tiny_model_dir, tmp_path):
    path = shutil.copytree(tiny_model_dir, tmp_path / "bert")
    (path / "config.json").write_text('{"model_type": "bert", "hidden_size": ')
    with pytest.raises(UnsupportedModelError) as err:
        load_encoder(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}/config.json cannot be read as a transformers model config") and "\n" not in message


def test_truncated_weights_name_the_file(tiny_model_dir, tmp_path):
    path = shutil.copytree(tiny_model_dir, tmp_path / "bert")
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(UnsupportedModelError, match=f"^{weights} cannot be read as safetensors weights"):
        load_encoder(str(path))


def _bertology(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([sys.executable, "-m", "bertology", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def test_user_error_is_one_line_and_the_traceback_only_with_debug(tmp_path):
    glue = tmp_path / "glue" / "RTE"
    glue.mkdir(parents=True)
    (glue / "dev.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\tA caf\xe9.\tB.\tentailment\n")
    config = json.dumps({"data": {"source": str(tmp_path / "glue"), "max_train_examples": None,
                                  "max_eval_examples": None, "max_length": 32, "seed": 1, "short_split": "error", "bad_rows": "error",
                                  "demo": {"train": 10, "validation": 10}}})
    args = ["prepare-data", "--config", config, "-w", "task=rte", "-w", "split=validation",
            "--output", f"table={tmp_path / 'out.parquet'}", "--no-mlflow"]
    proc = _bertology(*args, cwd=tmp_path)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"bertology prepare-data: error: {glue / 'dev.tsv'}:2:8: byte "
                                                   f"0xe9 is not UTF-8"), proc.stderr
    debug = _bertology(*args, "--debug", cwd=tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "DataError" in debug.stderr
    assert not (tmp_path / "out.parquet").exists()


def test_workflow_refuses_a_decoder_that_cannot_pad_at_start(tmp_path, config_file, snakemake_run):
    """A decoder tokenizer with neither a pad nor an eos token: refused before any job (onstart), in one line."""
    from tests.builders.decoders import build_decoder

    model = build_decoder("gpt2", tmp_path / "gpt2", eos=False)
    config_file(tmp_path, model=str(model), tasks=["rte"])
    proc = snakemake_run(tmp_path, "--cores", "1", "results/data/rte/validation.parquet", check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert errors == [f"bertology: error: model: the tokenizer of {model} has neither a pad token nor an eos token: "
                      f"a batch of examples cannot be padded; save it with one (tokenizer.pad_token = '...'; "
                      f"tokenizer.save_pretrained(dir))"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "results/data").exists()


def test_bad_config_key_is_one_line(tmp_path, config_file, snakemake_run):
    config_file(tmp_path, attention={"examples": 8, "batie": 3})
    proc = snakemake_run(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    assert [line for line in proc.stderr.splitlines() if "error" in line.lower()] == [
        "bertology: error: invalid configuration: unknown config key(s) 'batie' under 'attention'; allowed keys are: "
        "batch_size, chunk_size, examples, keepbits, spacy_model, split, word_models. See schemas/config.schema.yaml for "
        "every key, its meaning and default."]
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr

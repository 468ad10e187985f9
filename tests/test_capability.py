"""bertology.analyses.capability: what the model allows is decided once per model and remembered; reading it back
imports neither torch nor transformers, and a new config.json decides again."""

from __future__ import annotations

import json
import subprocess
import sys

from bertology.analyses import capability


def _model_dir(tmp_path, layers=2):
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(hidden_size=32, num_hidden_layers=layers, num_attention_heads=2, intermediate_size=64,
                     vocab_size=120)
    path = tmp_path / "bert"
    BertForSequenceClassification(cfg).save_pretrained(path)
    return path


def test_decided_once_and_read_back_until_the_config_changes(tmp_path, monkeypatch):
    model = _model_dir(tmp_path)
    calls = []
    real = capability.decide_capabilities
    monkeypatch.setattr(capability, "decide_capabilities", lambda name: calls.append(name) or real(name))
    cache = tmp_path / "cache"
    first = capability.model_capabilities(str(model), cache)
    assert first == {"norms": None, "disabling": None, "kind": "encoder"}
    assert capability.model_capabilities(str(model), cache) == first
    assert len(calls) == 1 and len(list(cache.glob("*.json"))) == 1
    config = json.loads((model / "config.json").read_text())
    config["num_hidden_layers"] = 3  # another architecture: another key, decided again
    (model / "config.json").write_text(json.dumps(config))
    capability.model_capabilities(str(model), cache)
    assert len(calls) == 2 and len(list(cache.glob("*.json"))) == 2


def test_a_broken_cache_file_is_decided_again(tmp_path, monkeypatch):
    model = _model_dir(tmp_path)
    cache = tmp_path / "cache"
    capability.model_capabilities(str(model), cache)
    (kept,) = cache.glob("*.json")
    kept.write_text("{not json")
    assert capability.model_capabilities(str(model), cache) == {"norms": None, "disabling": None, "kind": "encoder"}
    assert json.loads(kept.read_text())["norms"] is None


def test_reading_a_remembered_decision_imports_neither_torch_nor_transformers(tmp_path):
    model = _model_dir(tmp_path)
    cache = tmp_path / "cache"
    capability.model_capabilities(str(model), cache)
    code = ("import sys; from bertology.analyses.capability import model_capabilities; "
            f"print(model_capabilities({str(model)!r}, {str(cache)!r})); "
            "print(sorted(m for m in ('torch', 'transformers', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["{'norms': None, 'disabling': None, 'kind': 'encoder'}", "[]"]

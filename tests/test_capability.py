"""bertology.analyses.capability: what the model allows is decided once per model and remembered in the user's
cache, where every working directory finds it; reading it back imports neither torch nor transformers, and a new
config.json decides again. Reading the Snakefile's own imports loads none of torch, transformers, scipy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from bertology.analyses import capability

REPO = Path(__file__).resolve().parents[1]


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


def test_a_second_working_directory_reads_the_decision_from_the_user_cache(tmp_path, monkeypatch):
    """Decided in one working directory, read back in a fresh one (another process, another cwd) from
    $BERTOLOGY_CACHE/capability/ without importing torch or transformers."""
    model = _model_dir(tmp_path)
    user_cache = tmp_path / "user-cache"
    monkeypatch.setenv("BERTOLOGY_CACHE", str(user_cache))
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    decided = capability.model_capabilities(str(model))
    assert capability.capability_cache_dir() == user_cache / "capability"
    assert len(list((user_cache / "capability").glob("*.json"))) == 1 and not (first / ".bertology").exists()
    code = ("import sys; from bertology.analyses.capability import model_capabilities; "
            f"print(model_capabilities({str(model)!r})); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=second,
                         env=dict(os.environ, BERTOLOGY_CACHE=str(user_cache))).stdout
    assert out.splitlines() == [str(decided), "[]"]
    assert list(second.iterdir()) == []


def snakefile_imports() -> list[str]:
    """The bertology modules the workflow's files (Snakefile, rules/*.smk) import at their top level."""
    modules = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        for line in path.read_text().splitlines():
            found = re.match(r"(?:from|import) (bertology[\w.]*)", line)
            if found:
                modules.add(found.group(1))
    return sorted(modules)


def test_reading_the_snakefiles_imports_loads_no_torch_transformers_or_scipy():
    """The modules the Snakefile imports (the registry, the CLI's step table, the config, ...), imported in a fresh
    interpreter, load none of torch, transformers, scipy: a kernel imports them inside the function that needs
    them."""
    modules = snakefile_imports()
    assert "bertology.analyses" in modules and "bertology.workflow.cli" in modules
    heavy = ("torch", "transformers", "scipy")
    code = (f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

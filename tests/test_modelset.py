"""Several models in one run: the `models:` entries, their short names and configs, the paths each model's module
moves, and the rules the run shares (bertology.pipeline.modelset, bertology.pipeline.layout, rules/models.smk)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bertology.analyses import REGISTRY
from bertology.pipeline import layout
from bertology.pipeline.config import validate_config
from bertology.pipeline.errors import UserError
from bertology.pipeline.modelset import ModelEntry, model_config, model_entries, model_name, rule_prefix
from bertology.workflow.models import shared_rules, word_models

REPO = Path(__file__).resolve().parents[1]


def test_entries_name_each_model_by_its_mapping_its_shortcut_or_its_folder():
    entries = model_entries({"models": ["minilm-l6", "org/tiny-bert", "/data/runs/llama/",
                                        {"name": "gpt", "model": "/x/gpt2", "train": {"epochs": 1},
                                         "data": {"max_length": 64}}]})
    assert [e.name for e in entries] == ["minilm-l6", "tiny-bert", "llama", "gpt"]
    assert entries[3] == ModelEntry("gpt", "/x/gpt2", {"epochs": 1}, {"max_length": 64})
    # no list: the one model, named by model_name or its last component
    assert model_entries({"model": "/a/b/my-model", "models": []}) == [ModelEntry("my-model", "/a/b/my-model")]
    assert model_name({"model": "/a/b/my-model", "model_name": "mine"}) == "mine"


@pytest.mark.parametrize("models, message", [
    (["minilm-l6", "/x/minilm-l6"], "both named 'minilm-l6'"),
    ([{"model": "a", "data": {"seed": 1}}], "data.seed"),
    ([{"name": "bad name", "model": "a"}], "not a folder name"),
    ([{"name": "a"}], "has no `model:`"),
])
def test_bad_entries_are_refused_in_one_line_naming_the_fix(models, message):
    with pytest.raises(UserError, match=re.escape(message)) as err:
        model_entries({"models": models})
    assert "\n" not in str(err.value)


def test_a_model_config_is_the_runs_with_its_overrides_and_validates():
    run = {"models": ["minilm-l6", {"name": "b", "model": "minilm-l6", "train": {"learning_rate": 1e-3, "inits": []},
                                    "data": {"max_length": 32}}], "train": {"epochs": 2}}
    validate_config(run)
    first, second = (model_config(run, e) for e in model_entries(run))
    for c in (first, second):
        assert "models" not in c
        validate_config(c)                                  # a whole config, as one model's module reads it
    assert (first["model_name"], second["model_name"]) == ("minilm-l6", "b")
    assert second["train"]["learning_rate"] == 1e-3 and second["train"]["inits"] == [] and second["train"]["epochs"] == 2
    assert first["train"]["learning_rate"] != 1e-3 and first["train"]["inits"] == ["pretrained", "random"]
    assert (first["data"]["max_length"], second["data"]["max_length"]) == (128, 32)
    assert word_models([first, second]) == [{"model": "minilm-l6", "max_length": 128},
                                            {"model": "minilm-l6", "max_length": 32}]
    assert rule_prefix("minilm-l6") == "minilm_l6__"


def test_each_models_paths_move_under_its_root_but_the_shared_data():
    prefixes = layout.model_prefixes("bert")
    for key in layout.TEMPLATES:
        path = layout.path(key)
        moved = [p for p in prefixes if path.startswith(p)]
        if layout.shared(key):
            assert not moved, key
        else:
            assert len(moved) == 1, key                         # replace_prefix: one prefix per path, never two
            assert (prefixes[moved[0]] + path[len(moved[0]):]).startswith("results/m/bert/")
    # a reader under a model's root finds the shared files at the run's root
    root = layout.model_root("bert")
    assert layout.path("sample", root=root, task="rte") == "results/data/rte/sample.parquet"
    assert layout.path("store", root=root, task="rte", variant="pretrained") == "results/m/bert/attention/rte/pretrained.zarr"
    assert layout.model_of(layout.path("claims", root=root)) == "bert"


def test_the_rules_the_run_shares_are_those_models_smk_names():
    text = (REPO / "rules" / "models.smk").read_text()
    named = re.search(r'^SHARED_RULES = \[(.*)\]$', text, re.M).group(1)
    listed = [n.strip().strip('"') for n in named.split(",")]
    assert sorted(listed) == sorted(shared_rules(REGISTRY))
    # the `use rule` lines name the same rules
    for line in re.findall(r"^\s*use rule .*$", text, re.M):
        names = re.sub(r"^\s*use rule (\* from \w+ exclude )?|( from \w+| as \w+\*)$", "", line).replace(" from bertology_shared", "")
        assert sorted(n.strip() for n in re.sub(r" as .*$", "", names).split(",")) == sorted(listed), line

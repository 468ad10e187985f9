"""The config boundary: the schema is the only home of defaults, typed sections match it exactly, a step
sees only what it declares, and a user error is exactly one line."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest
import yaml

from bertology.workflow import cli
from bertology.pipeline.config import Config, ConfigError, Undeclared, load_schema, validate_config
from bertology.pipeline.configjson import sections_from_json, sections_json, select_sections


def _schema_tree(schema: dict) -> dict:
    # an object with declared properties is a section; a free mapping (spacy_pipelines) is one value
    return {k: _schema_tree(v) if v.get("type") == "object" and "properties" in v else None
            for k, v in schema["properties"].items()}


def _class_tree(cls) -> dict:
    hints = typing.get_type_hints(cls)
    return {f.name: _class_tree(hints[f.name]) if dataclasses.is_dataclass(hints[f.name]) else None
            for f in dataclasses.fields(cls)}


def test_dataclasses_mirror_the_schema_key_for_key():
    assert _class_tree(Config) == _schema_tree(load_schema())


def test_no_dataclass_restates_a_default():
    def walk(cls):
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f"{cls.__name__}.{f.name}"
            tp = typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp)

    walk(Config)


def _schema_defaults(schema: dict) -> dict:
    out = {}
    for key, sub in schema["properties"].items():
        if sub.get("type") == "object" and "properties" in sub:
            out[key] = _schema_defaults(sub)
        else:
            out[key] = sub["default"]
    return out


def test_validate_fills_every_default_from_the_schema():
    cfg = validate_config({})
    assert cfg == _schema_defaults(load_schema())
    typed = sections_from_json(json.dumps(cfg))
    assert typed.analysis.sieve.tau == cfg["analysis"]["sieve"]["tau"]
    assert typed.train.inits == tuple(cfg["train"]["inits"])


def test_validate_keeps_given_values():
    cfg = validate_config({"tasks": ["rte"], "analysis": {"sieve": {"tau": 2.5}}})
    assert cfg["tasks"] == ["rte"]
    assert cfg["analysis"]["sieve"] == {"tau": 2.5, "alpha": 0.05, "window": 2, "correction": "none"}


def test_bad_values_are_all_named_in_one_line():
    with pytest.raises(ConfigError) as err:
        validate_config({"tasks": ["sst3"], "trian": {}})
    assert str(err.value) == (
        "invalid configuration: unknown config key(s) 'trian' at the top level; allowed keys are: ablation, "
        "analysis, attention, data, mlflow, model, model_name, models, spacy_pipelines, tasks, train; config key 'tasks.0' has value 'sst3', which is "
        "not allowed; choose one of: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte. See schemas/config.schema.yaml "
        "for every key, its meaning and default.")


def test_a_step_sees_only_its_sections():
    cfg = validate_config({})
    typed = sections_from_json(sections_json(cfg, cli.STEPS["sieve_figures"].config))
    assert typed.analysis.sieve.window == 2
    assert isinstance(typed.analysis.patterns, Undeclared)
    with pytest.raises(RuntimeError, match="'analysis.patterns' was not handed to this step"):
        typed.analysis.patterns.classifier  # noqa: B018
    with pytest.raises(RuntimeError, match="'train' was not handed"):
        typed.train.epochs  # noqa: B018


def test_leaf_sections_select_only_that_key():
    cfg = validate_config({})
    assert select_sections(cfg, ["data.seed", "attention.examples"]) == {
        "data": {"seed": 42}, "attention": {"examples": cfg["attention"]["examples"]}}
    typed = sections_from_json(sections_json(cfg, ["data.seed"]))
    assert typed.data.seed == 42 and isinstance(typed.data.max_length, Undeclared)


def test_every_step_declares_sections_that_exist_and_a_target_that_imports():
    import importlib

    cfg = validate_config({})
    for name, spec in cli.STEPS.items():
        select_sections(cfg, spec.config)  # raises for a section that does not exist
        module, func = cli.step_function(spec).split(":")
        assert callable(getattr(importlib.import_module(module), func)), name
        assert spec.function is None or callable(spec.function), name


def test_user_error_is_exactly_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"data": {"max_length": 4}}))
    code = cli.main(["validate-config", "--input", f"config={bad}", "--no-mlflow"])
    out = capsys.readouterr()
    assert code == 1
    assert out.out == ""
    assert out.err == ("bertology validate-config: error: invalid configuration: config key 'data.max_length': 4 is "
                       "less than the minimum of 8 (Tokens per input (specials included); longer inputs are "
                       "truncated; at most the model's own position limit, checked at start.). See schemas/config.schema.yaml for every key, its meaning and default.\n")


def test_debug_gives_the_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"data": {"max_length": 4}}))
    with pytest.raises(ConfigError):
        cli.main(["validate-config", "--input", f"config={bad}", "--debug"])


def test_unknown_step_and_missing_input(capsys):
    assert cli.main(["sieeve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertology: unknown step 'sieeve'; steps: prepare-data, train-model, score,")
    assert cli.main(["validate-config", "--no-mlflow"]) == 1
    assert capsys.readouterr().err == ("bertology validate-config: error: step validate_config needs --input "
                                       "config=PATH (has: none)\n")


def test_step_args_quote_paths():
    args = cli.step_args({"task": "rte"}, {"store": "a b.zarr", "stats": ["x.csv", "y.csv"]}, {"out": "o.csv"})
    assert args == "-w task=rte --input 'store=a b.zarr' --input stats=x.csv --input stats=y.csv --output out=o.csv"


def test_the_schema_beside_the_workflow_is_the_packages():
    # schemas/config.schema.yaml is a link to the schema inside the package (the one Snakemake's validate and the
    # steps read): an in-place edit that turned it into a copy once let the two disagree on a default
    from pathlib import Path

    import bertology

    beside = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
    packaged = Path(bertology.__file__).resolve().parent / "config.schema.yaml"
    assert beside.is_symlink() and beside.resolve() == packaged.resolve()

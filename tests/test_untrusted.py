"""Untrusted input (issue 27): a model directory, a data file or a text must never run code, blank a page or
train on nothing. A model directory's own code never runs (no prompt on a terminal either), a directory without
a usable tokenizer is refused at start, malformed data rows are named by file and line and dropped only when
the config says so, hostile texts show as text in the explorer and the report, a full disk is named with what
the store needs, and a locked tracking store costs one line."""

from __future__ import annotations

import ast
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bertology.models import (CustomCodeError, TokenizerError, check_encoder, check_no_custom_code, check_tokenizer,
                              load_tokenizer)

REPO = Path(__file__).resolve().parents[1]


# ---- 1. a model directory without a usable tokenizer -----------------------------------------------------------

def _weights_only(tiny_model_dir: Path, dst: Path) -> Path:
    dst.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / name, dst / name)
    return dst


def test_a_directory_without_tokenizer_files_is_refused(tiny_model_dir, tmp_path):
    path = _weights_only(tiny_model_dir, tmp_path / "bare")
    check_encoder(str(path))  # the weights and config are fine: only the tokenizer is missing
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
        check_encoder(str(path))
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
    typing y ran the directory's Python before), one line naming config.json, nothing written by that code."""
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
    assert skipped.to_dict("records") == [{"file": str(source), "line": 6, "fields": 2, "expected": 4}]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id],
                              filter_string="tags.rule = 'prepare_data'")
    finished = [r for r in runs if r.info.status == "FINISHED"]
    assert len(finished) == 1 and finished[0].data.metrics["rows_skipped"] == 1
    assert finished[0].data.metrics["rows"] == 12
    artifacts = [a.path for a in client.list_artifacts(finished[0].info.run_id)]
    assert artifacts == ["validation.skipped.csv"]


# ---- 2. hostile texts show as text in the explorer and the report -------------------------------------------

HOSTILE = [
    "<!--<script> the row that blanked the explorer",
    "<!--",
    "<script>document.body.dataset.pwned = 'script'</script>",
    "</script><script>document.body.dataset.pwned = 'end'</script>",
    "</SCRIPT ><img src=x onerror=\"document.body.dataset.pwned='img'\">",
    "]]> <![CDATA[ x ]]>",
    "line\u2028separator and paragraph\u2029separator",
    "&amp; &lt;b&gt; & &#x3c; {{DATA}} {{JS}} ${x} `tick` \"quote\" 'apostrophe' \\u003c",
    "x" * 3000,  # a very long token
    "<style>body{display:none}</style> -->",
]


def _prepared_hostile_rows(root: Path, typed_config):
    """The hostile corpus through data preparation: a GLUE RTE dev.tsv -> the data rule's frame."""
    from bertology.data import load_split

    path = root / "RTE" / "dev.tsv"
    path.parent.mkdir(parents=True)
    rows = ["index\tsentence1\tsentence2\tlabel"]
    rows += [f"{i}\t{HOSTILE[i % len(HOSTILE)]}\t{HOSTILE[(i + 3) % len(HOSTILE)]}\tentailment" for i in range(10)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    df = load_split("rte", "validation", typed_config({"data": {"source": str(root)}}).data)
    assert df["text_a"].tolist() == [HOSTILE[i % len(HOSTILE)] for i in range(10)]  # every string intact
    return df


def test_script_json_escapes_every_markup_character():
    from bertology.explorer import script_json

    text = script_json({"t": HOSTILE})
    assert not any(c in text for c in "<>&\u2028\u2029")
    assert json.loads(text) == {"t": HOSTILE}


@pytest.fixture(scope="module")
def hostile_results(tmp_path_factory):
    """test_explorer's results/ (real stores) with the hostile corpus as the RTE texts, words and token labels."""
    import pandas as pd

    from bertology.config import sections_from_json, validate_config
    from tests.test_explorer import build_results

    root = tmp_path_factory.mktemp("hostile")
    typed = lambda o: sections_from_json(json.dumps(validate_config(dict(o))))  # noqa: E731
    prepared = _prepared_hostile_rows(root / "glue", typed)
    results = build_results(root / "run")
    data_path = results / "data" / "rte" / "validation.parquet"
    data = pd.read_parquet(data_path)
    data["text_a"] = prepared["text_a"].to_numpy()[: len(data)]
    data["text_b"] = prepared["text_b"].to_numpy()[: len(data)]
    data.to_parquet(data_path)
    words_path = results / "attention" / "rte" / "words.parquet"
    words = pd.read_parquet(words_path)
    words["text"] = [HOSTILE[i % len(HOSTILE)] for i in range(len(words))]
    words.to_parquet(words_path)
    (results / "models" / "rte" / "pretrained" / "tokenizer.json").unlink()  # token labels from the words
    return results


from tests.test_explorer import _open, _wait, browser  # noqa: E402,F401 - the browser fixture and helpers


@pytest.mark.browser
def test_hostile_texts_show_as_text_in_the_explorer(browser, hostile_results):  # noqa: F811
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
def test_hostile_texts_show_as_text_in_the_report(browser, hostile_results):  # noqa: F811
    import pandas as pd

    from bertology.report import build_report

    pd.DataFrame({"task": HOSTILE, "value": range(len(HOSTILE))}).to_csv(
        hostile_results / "stats" / "sieve_summary.csv", index=False)
    out = hostile_results / "report.html"
    out.write_text(build_report(hostile_results, {"model": HOSTILE[0], "tasks": ["rte"],
                                                  "data": {"source": HOSTILE[3]}}), encoding="utf-8")
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

"""Every command a message suggests runs as printed: each message is made by the code that raises it, the commands
between its backticks are run in the experiment's working directory (`rm` as printed; `snakemake` as printed with
`--dry-run` put first, plus this repo's Snakefile and the test's config; `bertology` and `make` as printed), and
the run does what the message says: the jobs of the output it names, not the whole workflow. The eviction advice
of a cached model runs for real in tests/test_hostile_cache.py (test_cached_entries_are_shared_safely), the label
sheet's `bertology patterns-train` in tests/test_kovaleva_cli.py (test_export_then_train_round_trip)."""

from __future__ import annotations

import io
import logging
import os
import re
import shlex
import subprocess
import sys
import tokenize
from pathlib import Path

import pandas as pd
import pytest

from bertology.pipeline.errors import UserError

REPO = Path(__file__).resolve().parents[1]
MODEL = "results/models/rte/pretrained"
STORE = "results/attention/rte/finetuned.zarr"
WORDS = "results/data/rte/words.parquet"
PATTERNS = "results/stats/rte/pretrained/patterns.csv"
DATA = "results/data/rte/train.parquet"

#: what a string literal (not a docstring) holds when its message suggests a command; the code that builds a
#: Snakemake command for a message (bertology.pipeline.errors.snakemake_command)
SUGGESTS = re.compile(r"`(snakemake|bertology |make |rm )|\bsnakemake --|\bmake [a-z]")
BUILDS = re.compile(r"\bsnakemake_command\(")

#: every file whose messages suggest a command, and where a test runs what it prints (the same command printed in
#: several places is run once: `bertology tracking-replay`, `snakemake --forcerun annotate_words`)
COVERED = {
    "src/bertology/pipeline/outputcache.py": "test_a_damaged_output_is_made_again_as_printed, test_hostile_cache.py",
    "src/bertology/pipeline/cachestore.py": "test_a_refused_cache_entry_is_made_again_as_printed",
    "src/bertology/store/schema.py": "test_a_damaged_output_is_made_again_as_printed (store-refix, store-cached)",
    "src/bertology/store/words.py": "test_a_damaged_output_is_made_again_as_printed (words-*)",
    "src/bertology/store/reader.py": "test_a_damaged_output_is_made_again_as_printed (store-*)",
    "src/bertology/steps/tables.py": "test_a_damaged_output_is_made_again_as_printed (table-missing)",
    "src/bertology/sieve/scores_io.py": "test_a_damaged_output_is_made_again_as_printed (sieve-scores)",
    "src/bertology/data/__init__.py": "test_a_damaged_output_is_made_again_as_printed (data-columns)",
    "src/bertology/steps/train.py": "test_the_score_step_names_the_model_to_train_as_printed",
    "src/bertology/attention/annotate.py": "test_a_damaged_output_is_made_again_as_printed (words-spans)",
    "src/bertology/attention/extract.py": "the same command as annotate.py's (words-spans)",
    "src/bertology/kovaleva/patterns.py": "test_every_bertology_command_names_a_step; test_kovaleva_cli.py",
    "src/bertology/steps/kovaleva.py": "test_kovaleva_cli.py::test_export_then_train_round_trip",
    "src/bertology/tracking/uri.py": "test_the_store_creation_advice_creates_the_store",
    "src/bertology/tracking/tracker.py": "test_the_replay_advice_sends_what_was_kept (the same command)",
    "src/bertology/tracking/invocation.py": "test_the_replay_advice_sends_what_was_kept",
    "src/bertology/workflow/snakefile.py": "test_the_replay_advice_sends_what_was_kept (the same command)",
    "src/bertology/steps/admin.py": "test_the_replay_advice_sends_what_was_kept (the same command)",
    "src/bertology/models/gguf.py": "test_the_install_advice_names_a_make_target",
    "src/bertology/models/lora.py": "test_the_install_advice_names_a_make_target",
    "src/bertology/models/shipped.py": "test_the_install_advice_names_a_make_target",
    "src/bertology/claims/kovaleva.py": "not run: a note of the ledger (claims.csv), not an error message",
}


def _sources() -> list[Path]:
    return sorted([*(REPO / "src").rglob("*.py"), *(REPO / "rules").glob("*.smk"), REPO / "Snakefile"])


def _literals(path: Path) -> list[str]:
    """The string literals of a source file, docstrings (a string alone on its line after a block opener or at the
    start) left out, each f-string whole."""
    out, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING and not (tok.string.lstrip("rRbBfFuU").startswith(('"""', "'''"))
                                                and previous in (None, tokenize.INDENT, tokenize.NEWLINE)):
            out.append(tok.string)
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok.type
    return out


def _suggesting() -> dict[str, list[str]]:
    """{file: its literals that suggest a command (or the calls that build one)}."""
    out = {}
    for path in _sources():
        rel = str(path.relative_to(REPO))
        found = [s for s in _literals(path) if SUGGESTS.search(s)]
        if rel != "src/bertology/pipeline/errors.py" and BUILDS.search(path.read_text()):
            found.append("snakemake_command(...)")
        if found:
            out[rel] = found
    return out


def test_every_message_that_suggests_a_command_has_its_test():
    """A new message that suggests a command fails here until a test runs what it prints (COVERED)."""
    assert sorted(_suggesting()) == sorted(COVERED)


def test_no_message_spells_out_a_snakemake_command():
    """A message's Snakemake command is built by snakemake_command (--cores, which local runs need and a dry run
    does not check; `--` after the list options --cache and --forcerun, which would otherwise take the targets)."""
    spelt = {f: [s for s in lits if re.search(r"`snakemake|\(snakemake |snakemake --", s)]
             for f, lits in _suggesting().items()}
    spelt = {f: lits for f, lits in spelt.items() if lits and f != "src/bertology/claims/kovaleva.py"}
    assert spelt == {}


def test_every_bertology_command_names_a_step():
    from bertology.workflow.cli import STEPS

    names = {name.replace("_", "-") for name in STEPS}
    for path in _sources():
        for lit in _literals(path):
            for step in re.findall(r"`bertology ([a-z-]+)", lit):
                assert step in names, (path, step)


def test_the_helper_puts_cores_and_ends_list_options():
    from bertology.pipeline.errors import snakemake_command

    assert snakemake_command("results/a b") == "snakemake --cores 2 'results/a b'"
    assert snakemake_command("x", cache=True) == "snakemake --cores 2 --cache -- x"
    assert snakemake_command("x", force=True) == "snakemake --cores 2 --force x"
    assert snakemake_command(forcerun=("annotate_words",)) == "snakemake --cores 2 --forcerun annotate_words"


# ---- running what a message prints ------------------------------------------------------------------------------

def _commands(message: str) -> list[str]:
    """The commands between backticks in `message`, in order."""
    return [c for c in re.findall(r"`([^`]+)`", message) if c.split()[0] in ("snakemake", "rm", "bertology")]


def _job_stats(text: str) -> dict[str, int]:
    """{rule: jobs} of the "Job stats" table Snakemake prints."""
    block = text.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.MULTILINE)}


def run_printed(workdir: Path, message: str, *, dry: bool = True, run_snakemake=None, env=None) -> dict[str, int]:
    """Run every command of `message` in `workdir` as printed (a Snakemake one with --dry-run first when `dry`);
    the jobs of the (last) Snakemake command. Asserts one line and at least one Snakemake command."""
    from tests.conftest import run_snakemake as default_run

    assert "\n" not in message, message
    jobs = None
    for command in _commands(message):
        argv = shlex.split(command)
        if argv[0] == "rm":
            subprocess.run(argv, cwd=workdir, check=True)
            continue
        assert argv[0] == "snakemake", command
        assert "--cores" in argv, f"local execution needs --cores: {command}"
        proc = (run_snakemake or default_run)(workdir, *(["--dry-run"] if dry else []), *argv[1:])
        jobs = _job_stats(proc.stdout + proc.stderr)
    assert jobs is not None, f"no snakemake command in: {message}"
    return jobs


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    from tests.conftest import write_config

    d = tmp_path_factory.mktemp("advice")
    write_config(d, tasks=["rte"], data={"demo": {"train": 24, "validation": 16}},
                 train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8},
                 attention={"examples": 8, "batch_size": 8, "chunk_size": 8})
    return d


def _message(fn, error: type[Exception] = UserError) -> str:
    with pytest.raises(error) as err:
        fn()
    return str(err.value)


def _synthetic_store(path: Path, **attrs) -> None:
    from tests.test_store_layout import synthetic, write

    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, synthetic())
    if attrs:
        import warnings

        import zarr

        from bertology.pipeline.outputcache import record_digest

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the digest is no zarr node; consolidated metadata is an extension
            group = zarr.open_group(str(path), mode="r+")
            group.attrs.update(attrs)
            zarr.consolidate_metadata(str(path))
        record_digest(path, store=True)


def _bad_frame(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"example_idx": [1]}).to_parquet(path)


def _cached_link(cache: Path, output: str, name: str) -> Path:
    """An entry of the cache and the experiment's link to it, as Snakemake's store leaves them."""
    entry = cache / name
    (entry / "attention").mkdir(parents=True)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(entry, output)
    return entry


def _cases():
    from bertology import store as st
    from bertology.attention.annotate import WordSpans
    from bertology.data import read_prepared
    from bertology.pipeline.outputcache import eviction
    from bertology.sieve.scores_io import read_scores
    from bertology.steps.tables import read_table
    from bertology.store.words import read_words
    from bertology.store.schema import refix

    def mismatch():
        _synthetic_store(Path(STORE))
        return _message(lambda: st.open_store(STORE, expect={"task": "no-such-task"}))

    def cached_store():
        entry = _cached_link(Path(os.environ["SNAKEMAKE_OUTPUT_CACHE"]), STORE, "9b1e07.zarr")
        message = refix(STORE)
        assert f"`rm -rf {entry} {STORE}`" in message
        return message

    def bad_words():
        _bad_frame(WORDS)
        return _message(lambda: read_words(WORDS))

    def bad_data():
        _bad_frame(DATA)
        return _message(lambda: read_prepared(DATA))

    # id: (make the message in the experiment's directory, the rule whose job the command must plan, whole DAG?)
    return {
        "model-eviction": (lambda: eviction(MODEL), "train_model", False),
        "store-refix": (lambda: refix(STORE), "extract_attention", False),
        "store-cached": (cached_store, "extract_attention", False),
        "store-missing": (lambda: _message(lambda: st.open_store(STORE)), "extract_attention", False),
        "store-incomplete": (lambda: (_synthetic_store(Path(STORE), complete=False),
                                      _message(lambda: st.open_store(STORE)))[1], "extract_attention", False),
        "store-mismatch": (mismatch, "extract_attention", False),
        "words-missing": (lambda: _message(lambda: read_words(WORDS)), "annotate_words", False),
        "words-columns": (bad_words, "annotate_words", False),
        "words-spans": (lambda: _message(lambda: WordSpans(pd.DataFrame({"example_idx": [1]}))), "annotate_words",
                        True),
        "table-missing": (lambda: _message(lambda: read_table(Path(PATTERNS))), "store_stats", False),
        "sieve-scores": (lambda: _message(lambda: read_scores("results/stats/rte/finetuned/sieve_scores.npz")),
                         "store_stats", False),
        "data-columns": (bad_data, "prepare_data", False),
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_cases()))
def test_a_damaged_output_is_made_again_as_printed(case, experiment, tmp_path, monkeypatch):
    """The fix a reading error prints, run as printed (a dry run): it plans the job that makes the output it names
    (and what that job needs), not the workflow's every target, and parses as Snakemake 9 reads it."""
    make, rule, whole = _cases()[case]
    workdir = tmp_path / "exp"
    workdir.mkdir()
    (workdir / "config.yaml").write_text((experiment / "config.yaml").read_text())
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    monkeypatch.chdir(workdir)
    message = make()
    jobs = run_printed(workdir, message)
    assert jobs.get(rule, 0) >= 1, (message, jobs)
    assert ("all" in jobs) == whole, (message, jobs)


@pytest.mark.slow
def test_a_refused_cache_entry_is_made_again_as_printed(experiment, tmp_path, monkeypatch):
    """A fetch that refuses an entry holding a file its digest does not list names the command that removes it and
    the one that computes the output afresh under --cache."""
    from bertology.pipeline.cachestore import check_entry
    from bertology.pipeline.outputcache import record_digest

    workdir = tmp_path / "exp"
    workdir.mkdir()
    (workdir / "config.yaml").write_text((experiment / "config.yaml").read_text())
    cache = tmp_path / "cache"
    entry = cache / "3f2a9c"
    entry.mkdir(parents=True)
    (entry / "config.json").write_text("{}")
    record_digest(entry)
    (entry / "3f2a9c").mkdir()
    (entry / "3f2a9c" / "config.json").write_text("{}")
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    message = _message(lambda: check_entry(entry, Path(MODEL)))
    assert _commands(message) == [f"rm -rf {entry}", f"snakemake --cores 2 --cache -- {MODEL}"]
    jobs = run_printed(workdir, message)
    assert not entry.exists() and jobs.get("train_model") == 1 and "all" not in jobs


@pytest.mark.slow
def test_the_score_step_names_the_model_to_train_as_printed(experiment, tiny_model_dir, tmp_path, capsys,
                                                            monkeypatch):
    from tests.builders.steps import run_step
    from tests.test_training import keyword_frame, step_config

    workdir = tmp_path / "exp"
    workdir.mkdir()
    (workdir / "config.yaml").write_text((experiment / "config.yaml").read_text())
    monkeypatch.chdir(workdir)
    keyword_frame(8, 0).to_parquet(tmp_path / "v.parquet")
    capsys.readouterr()
    rc = run_step("score", step_config("score", model=str(tiny_model_dir), data={"max_length": 32}),
                  {"task": "rte", "variant": "finetuned"},
                  inputs={"validation": tmp_path / "v.parquet", "model": tmp_path / "nope"},
                  outputs={"score": tmp_path / "score.json"}, options=("--no-mlflow", "--no-progress"))
    assert rc == 1
    message = capsys.readouterr().err.strip().split("error: ", 1)[1]
    jobs = run_printed(workdir, message)
    assert jobs.get("train_model") == 1 and "all" not in jobs and "score" not in jobs


# ---- bertology and make -----------------------------------------------------------------------------------------

def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@pytest.mark.slow
def test_the_replay_advice_sends_what_was_kept(tmp_path, monkeypatch, caplog):
    """A workflow that starts while its tracking store cannot be reached (mlflow.required false) keeps its parent
    run and says how to send it; once the store can be reached, the printed `bertology tracking-replay` sends it."""
    from bertology import tracking

    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "mlflow"
    blocker.write_text("")  # a file where the database's folder should be: the store cannot be created
    uri = f"sqlite:///{tmp_path}/mlflow/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "advice")
    with caplog.at_level(logging.WARNING):
        tracking.start_invocation("inv-advice", params={"k": 1}, required=False)
    (message,) = [r.getMessage() for r in caplog.records if "tracking-replay" in r.getMessage()]
    commands = _commands(message)
    assert commands == ["bertology tracking-replay"], message
    assert len(tracking.pending_records()) == 1
    blocker.unlink()
    proc = subprocess.run([_bin("bertology"), *shlex.split(commands[0])[1:]], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sent 1 of 1" in proc.stdout and tracking.pending_records() == []


@pytest.mark.slow
def test_the_store_creation_advice_creates_the_store(tmp_path, monkeypatch):
    """A tracking store whose creation keeps racing another process's names the command that creates it first;
    run as printed (a shell line), it creates that store with that experiment."""
    import mlflow

    from bertology import tracking
    from bertology.tracking import uri as uri_module

    monkeypatch.chdir(tmp_path)
    uri = "sqlite:///results/mlflow.db"

    def race(*_args):
        raise RuntimeError("duplicate column name: step")

    monkeypatch.setattr(uri_module, "_init_store", race)
    monkeypatch.setattr(uri_module.time, "sleep", lambda _s: None)
    message = _message(lambda: tracking.init_store(uri, "advice-exp"), tracking.StoreCreationError)
    (command,) = [c for c in _commands(message) if c.startswith("bertology")]
    assert command.startswith("bertology init-mlflow --config "), command
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/results/mlflow.db")
    assert client.get_experiment_by_name("advice-exp") is not None


def test_the_install_advice_names_a_make_target():
    """`make install`, `make install-decoders` and `make install-models`, which the decoders', LoRA's and the shortcuts'
    missing-package messages suggest, are targets of the Makefile (checked with make -n: installing needs the
    network); install-models runs the installer of bertology.models.shipped."""
    from bertology.models import gguf, lora, shipped

    texts = [s for mod in (gguf, lora, shipped) for s in _literals(Path(mod.__file__)) if "make install" in s]
    targets = {m for s in texts for m in re.findall(r"make ([a-z-]+)", s)}
    assert targets == {"install", "install-decoders", "install-models"}
    proc = subprocess.run(["make", "-n", *sorted(targets)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0 and "pip install" in proc.stdout, proc.stderr
    assert "-m bertology.models.shipped mpnet-base" in proc.stdout, proc.stdout

"""Shared fixtures: offline mode, tiny random-weight BERT models, tiny configs for Snakemake runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


# The files that take longest, longest first (measured with --durations: whole-DAG runs, Snakemake dry runs,
# subprocesses, the 49-encoder matrix); the order within `make test` and within `make test-slow` is what
# counts. Only the order in which pytest-xdist hands out whole files depends on it, never what a test
# checks; a file not named here runs after these, in its usual order.
LONG_FILES = (
    "test_pipeline.py", "test_declared_pipeline.py", "test_encoders.py", "test_output_cache.py", "test_training.py",
    "test_seeds_pipeline.py", "test_ablation_cli.py", "test_hostile.py",
    "test_cluster.py", "test_matrix.py", "test_matrix_decoders.py", "test_untrusted.py", "test_tracking_server.py", "test_faults.py",
    "test_tracking.py", "test_reference.py", "test_foundation.py", "test_data.py", "test_kovaleva_cli.py",
    "test_sieve_pipeline.py", "test_store_faults.py", "test_store.py",
)


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: the order of the tests that run
def pytest_collection_modifyitems(session, config, items):
    """Files with end-to-end tests (marked ``slow``) first, then the longest files (:data:`LONG_FILES`), each
    file's tests in their order: under pytest-xdist (``make test``: ``--dist loadfile --no-loadscope-reorder``)
    the longest files start at once and the short ones fill the gaps, so the workers finish together."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: (item.path not in slow_files, rank.get(item.path.name, len(rank))))  # stable


# Parametrised end-to-end tests without module fixtures: under `--dist loadfile` each of their cases is a
# work unit of its own, so the cases run on several workers at once instead of one after the other.
OWN_UNITS = ("tests/test_encoders.py::test_whole_dag_reaches_the_report",)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: pytest without xdist (-p no:xdist) runs too
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the cases of :data:`OWN_UNITS` split off (see there); other modes as xdist has them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.split("[", 1)[0] in OWN_UNITS else super()._split_scope(nodeid)

    return Scheduling(config, log)


def pytest_configure(config):
    """Under pytest-xdist each worker gets its share of the cores for torch (not every core each)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def build_tiny_bert(path: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0) -> Path:
    """Save a random-weight BERT (real uncased WordPiece tokenizer of the embedded model) to `path`."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bertology.models.loading import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm-l6"), local_files_only=True)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=128,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny BERT: 2 layers x 4 heads, hidden 32, random weights, the embedded model's tokenizer."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def dropout_model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny BERT with dropout 0.1, so that resumption must restore the RNG to reproduce a run."""
    import shutil

    path = tmp_path_factory.mktemp("tiny-dropout")
    for f in tiny_model_dir.iterdir():
        shutil.copy(f, path / f.name)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    (path / "config.json").write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for the module (tiny models run fastest so; several threads on a shared CPU mostly
    wait); use it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def browser():
    """A headless system Chromium driven by Playwright (tests.builders.browser); skips without one."""
    from tests.builders.browser import launch

    yield from launch()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the checkout (real GLUE and FrameNet files; tests using it skip without it)."""
    return SHARED_DATA


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def typed_config():
    """typed_config(overrides) -> the validated bertology.pipeline.config.Config (defaults from the schema)."""
    import json

    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_from_json

    return lambda overrides=None: sections_from_json(json.dumps(validate_config(dict(overrides or {}))))


@pytest.fixture(scope="session")
def config_file():
    """config_file(directory, **overrides) -> a tiny config.yaml for an end-to-end run in `directory`."""
    return write_config


@pytest.fixture(scope="session")
def snakemake_run():
    """snakemake_run(workdir, *args, check=True) -> this repo's Snakefile run in `workdir`."""
    return run_snakemake


def write_config(directory: Path, **overrides) -> Path:
    """A tiny config for end-to-end runs in `directory`; nested overrides merge into sections."""
    cfg = {
        "model": "minilm-l6",
        "tasks": ["sst2", "mrpc"],
        "data": {"source": "demo", "seed": 1, "max_length": 64, "demo": {"train": 40, "validation": 24}},
        "train": {"inits": ["pretrained", "random"], "epochs": 1, "batch_size": 8},
        "attention": {"examples": 16, "batch_size": 8, "chunk_size": 8},
        "ablation": {"examples": 16, "bootstrap": 50, "pruning": {"random_orders": 2}},
        "mlflow": {"tracking_uri": "sqlite:///results/mlflow.db", "experiment": "test"},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run this repo's Snakefile in `workdir` (results/ go there) with the current interpreter's snakemake."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), *args]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


@pytest.fixture(scope="module")
def hostile_results(tmp_path_factory) -> Path:
    """A small results/ directory (tests.builders.explorer) whose texts, words and token labels are hostile strings."""
    from tests.builders.explorer import build_hostile_results

    return build_hostile_results(tmp_path_factory.mktemp("hostile"))

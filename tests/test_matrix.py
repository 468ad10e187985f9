"""The compatibility matrix (tests/builders/matrix.py): every encoder type of the installed transformers'
sequence-classification mapping on a tiny random model, and the encoder table of docs/encoders.md generated from it.

``BERTOLOGY_WRITE_MATRIX=1 pytest tests/test_matrix.py`` rewrites the table in docs/encoders.md; otherwise a table
that differs from what the code does fails the last test.
"""

from __future__ import annotations

import os

import pytest

from bertology.models.kinds import encoder_model_types
from tests.builders.matrix import Row, check_architecture, frames, encoder_doc_table, matrix_table

TYPES = encoder_model_types()
DOC = "docs/encoders.md"
ROWS: dict[str, Row] = {}


@pytest.fixture(scope="module")
def texts():
    return frames()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("matrix")


@pytest.mark.parametrize("model_type", TYPES)
def test_architecture(model_type, workdir, texts):
    ROWS[model_type] = check_architecture(model_type, workdir, texts)


def test_every_encoder_is_supported_or_named():
    """The mapping's encoders are all in the matrix; the ones that cannot be analysed say why."""
    assert {"bert", "albert", "mpnet", "deberta", "xlm-roberta", "fnet", "funnel"} <= set(TYPES)
    assert not {"t5", "bart", "gpt2", "llama"} & set(TYPES)        # decoders and encoder-decoders are refused


def test_encoder_table_is_the_matrix(repo, workdir, texts):
    for model_type in TYPES:                      # rows of the parametrised tests not run in this session
        if model_type not in ROWS:
            ROWS[model_type] = check_architecture(model_type, workdir, texts)
    table = matrix_table(list(ROWS.values()))
    doc = (repo / DOC).read_text()
    if os.environ.get("BERTOLOGY_WRITE_MATRIX") == "1":
        current = encoder_doc_table(doc)
        assert current, f"{DOC} has no encoder-matrix markers to write between"
        (repo / DOC).write_text(doc.replace(current, table))
        return
    assert encoder_doc_table(doc) == table, (f"{DOC}'s encoder table differs from what the code does; regenerate "
                                             "it: BERTOLOGY_WRITE_MATRIX=1 pytest tests/test_matrix.py")


def test_the_readme_links_the_encoder_table(repo):
    """The table lives in docs/encoders.md alone; the README points to it."""
    readme = (repo / "README.md").read_text()
    assert "encoder-matrix:start" not in readme
    assert "(docs/encoders.md)" in readme

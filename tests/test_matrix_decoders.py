"""The decoder compatibility matrix (tests/builders/matrix.py, its decoder part): every decoder type of the installed
transformers' sequence-classification mapping (:func:`bertology.models.kinds.decoder_model_types`) on a tiny random
model (tests/builders/decoders.py), and the table of docs/matrix-decoders.md generated from it.

``BERTOLOGY_WRITE_MATRIX=1 pytest tests/test_matrix_decoders.py`` rewrites the table in docs/matrix-decoders.md;
otherwise a table that differs from what the code does fails the last test. Torch runs on one thread here: the
models are tiny, and threads only contend with each other (and with the tests beside these).
"""

from __future__ import annotations

import os

import pytest

from bertology.models.kinds import decoder_model_types, encoder_model_types
from tests.builders.matrix import (DECODER_NOT_FULL, DECODER_NOT_HOOKED, Row, check_decoder_architecture,
                                   decoder_doc_table, decoder_table, frames)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TYPES = decoder_model_types()
ROWS: dict[str, Row] = {}
DOC = "docs/matrix-decoders.md"




@pytest.fixture(scope="module")
def texts():
    return frames()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("decoder-matrix")


@pytest.mark.parametrize("model_type", TYPES)
def test_decoder_architecture(model_type, workdir, texts):
    ROWS[model_type] = check_decoder_architecture(model_type, workdir, texts)


def test_every_decoder_is_supported_or_named():
    """The mapping's decoders are all in the matrix, none of them an encoder; the named reasons are of types the
    mapping has (a reason left behind by a transformers that dropped the type fails here)."""
    assert {"gpt2", "llama", "mistral", "qwen2", "gemma", "phi3", "opt"} <= set(TYPES)
    assert not set(TYPES) & set(encoder_model_types())
    assert not {"bert", "t5", "bart"} & set(TYPES)
    assert set(DECODER_NOT_FULL) | set(DECODER_NOT_HOOKED) <= set(TYPES)


def test_decoder_table_is_the_matrix(repo, workdir, texts):
    for model_type in TYPES:                      # rows of the parametrised tests not run in this session
        if model_type not in ROWS:
            ROWS[model_type] = check_decoder_architecture(model_type, workdir, texts)
    table = decoder_table(list(ROWS.values()))
    doc = (repo / DOC).read_text()
    if os.environ.get("BERTOLOGY_WRITE_MATRIX") == "1":
        current = decoder_doc_table(doc)
        assert current, f"{DOC} has no decoder-matrix markers to write between"
        (repo / DOC).write_text(doc.replace(current, table))
        return
    assert decoder_doc_table(doc) == table, (f"{DOC}'s table differs from what the code does; regenerate it: "
                                             f"BERTOLOGY_WRITE_MATRIX=1 pytest tests/test_matrix_decoders.py")

"""Attention to the previous and next token (Clark et al. 2019, section 3.1; bertology.clark.offsets), on stores
whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.clark.offsets import FEATURES, PreviousKernel, offset_attention
from bertology.attention.onepass import reduce_store
from tests.builders import kovaleva as kb

SYNC = {"scheduler": "synchronous"}


def next_token(n: int) -> np.ndarray:
    """(n, n): row i attends to i+1 (the last row to itself)."""
    a = np.zeros((n, n))
    a[np.arange(0, n - 1), np.arange(1, n)] = 1.0
    a[n - 1, n - 1] = 1.0
    return a


def maps(ex: kb.Example) -> np.ndarray:
    """(1, 4, n, n): previous token, next token, uniform, [CLS] stripe."""
    n = ex.n
    return np.stack([np.stack([kb.previous_token(n), next_token(n), kb.uniform(n), kb.on_columns(n, [0])])])


def test_offset_attention_of_one_map():
    """Previous: rows 1..n-1 of A[i, i-1]; next: rows 0..n-2 of A[i, i+1]; the rows without one are left out."""
    n = 5
    a = np.stack([kb.previous_token(n), next_token(n), kb.uniform(n), kb.on_columns(n, [0])])[None]
    got = offset_attention(a.astype(np.float32))
    assert got.shape == (1, 4, 2) and got.dtype == np.float64
    np.testing.assert_allclose(got[0, 0], [1.0, 0.0])  # previous-token head (row 0 attends to itself: left out)
    np.testing.assert_allclose(got[0, 1], [0.0, 1.0])  # next-token head
    np.testing.assert_allclose(got[0, 2], [1 / n, 1 / n])
    np.testing.assert_allclose(got[0, 3], [1 / (n - 1), 0.0])  # only row 1's previous token is [CLS]
    with pytest.raises(ValueError, match="length 1"):
        offset_attention(np.ones((1, 1, 1, 1), np.float32))


def test_previous_table_from_a_store(tmp_path):
    """Through the one read of a store: the real lengths of the examples (padding never counts), mean over
    examples, n = examples; an example of length 1 is left out."""
    examples = [kb.pair_example(), kb.single_example(), kb.long_example(5, 4)]
    short = kb.Example([-1], [0], [])  # a lone [CLS]: no previous or next token
    store = kb.write_store(kb.build_store(examples + [short], maps), tmp_path / "s.zarr", chunk=2)
    kernel = PreviousKernel()
    result = reduce_store(store, [kernel], None, compute_kwargs=SYNC)[kernel.name]
    table = kernel.outputs(result, None).tables["previous"]
    assert list(table.columns) == ["layer", "head", "feature", "mean", "std", "n"]
    assert list(table["feature"].unique()) == list(FEATURES)
    got = table.set_index(["layer", "head", "feature"])
    assert (table["n"] == len(examples)).all()
    assert got.loc[(0, 0, "previous"), "mean"] == pytest.approx(1.0) and got.loc[(0, 0, "next"), "mean"] == 0
    assert got.loc[(0, 1, "next"), "mean"] == pytest.approx(1.0) and got.loc[(0, 1, "previous"), "mean"] == 0
    uniform = np.mean([1 / ex.n for ex in examples])  # float16 in the store: 1/n to 3 digits
    assert got.loc[(0, 2, "previous"), "mean"] == pytest.approx(uniform, rel=1e-3)
    assert got.loc[(0, 2, "next"), "mean"] == pytest.approx(uniform, rel=1e-3)
    assert got.loc[(0, 3, "previous"), "mean"] == pytest.approx(np.mean([1 / (ex.n - 1) for ex in examples]))
    assert got.loc[(0, 0, "previous"), "std"] == 0

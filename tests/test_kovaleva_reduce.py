"""The one-pass reduction over a Zarr store of constructed maps: every statistic against its hand value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology.kovaleva import reduce as red
from kovaleva_fixtures import (build_store, on_columns, pair_example, previous_token, single_example, uniform,
                               words_table, write_store)

EXAMPLES = [pair_example(), single_example(), pair_example()]  # n = 12, 5, 12


def maps(ex, variant="pretrained"):
    """Layer 0: [CLS] stripe, uniform, previous token. Layer 1: last-[SEP] stripe, uniform, previous token."""
    n = ex.n
    second = previous_token(n) if variant == "finetuned" else uniform(n)
    return np.stack([np.stack([on_columns(n, [0]), second, previous_token(n)]),
                     np.stack([on_columns(n, [n - 1]), uniform(n), previous_token(n)])])


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("stores")
    pre = write_store(build_store(EXAMPLES, maps), d / "pretrained.zarr", chunk=2)
    fin_ds = build_store(EXAMPLES, lambda ex: maps(ex, "finetuned"))
    fin_ds.attrs["variant"] = "finetuned"
    fin = write_store(fin_ds, d / "finetuned.zarr", chunk=1)  # other chunking: rechunked to align
    words = d / "words.parquet"
    words_table(EXAMPLES).to_parquet(words)
    return pre, fin, words


@pytest.fixture(scope="module")
def tables(stores):
    pre, _, words = stores
    part = red.store_stats(pre, words, scheduler={"scheduler": "synchronous"})
    return part, red.features_table(part), red.cls_table(part, 2)


def _row(df, **where):
    sel = df
    for k, v in where.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, where
    return sel.iloc[0]


def test_features_match_hand_values(tables):
    part, features, _ = tables
    assert part.examples == 3
    r = _row(features, layer=0, head=0, feature="cls")
    assert (r["mean"], r["std"], r["n"]) == (pytest.approx(1.0, abs=1e-3), pytest.approx(0.0, abs=1e-3), 3)
    assert _row(features, layer=1, head=0, feature="sep")["mean"] == pytest.approx(1.0, abs=1e-3)
    assert _row(features, layer=1, head=0, feature="cls")["mean"] == pytest.approx(0.0, abs=1e-6)
    # uniform head: the noun score is |wp(noun)| / n: 2/12, 1/5, 2/12
    expect = np.array([2 / 12, 1 / 5, 2 / 12])
    r = _row(features, layer=0, head=1, feature="noun")
    assert r["mean"] == pytest.approx(expect.mean(), abs=2e-3)
    assert r["std"] == pytest.approx(expect.std(ddof=1), abs=2e-3) and r["n"] == 3
    # previous-token head: [CLS] is attended by rows 0 and 1 -> 2/n
    r = _row(features, layer=0, head=2, feature="cls")
    assert r["mean"] == pytest.approx(np.mean([2 / 12, 2 / 5, 2 / 12]), abs=2e-3)
    # only examples containing the feature count: negation in the two pairs, object in the single
    assert _row(features, layer=0, head=1, feature="negation")["n"] == 2
    assert _row(features, layer=0, head=1, feature="object")["n"] == 1
    assert list(features.columns) == ["layer", "head", "feature", "mean", "std", "n"]


def test_cls_in_last_layer(tables):
    _, _, cls = tables
    assert set(cls["layer"]) == {1}
    assert _row(cls, head=0, feature="sep")["mean"] == pytest.approx(1.0, abs=1e-3)
    assert _row(cls, head=0, feature="cls")["mean"] == 0
    assert _row(cls, head=2, feature="cls")["mean"] == pytest.approx(1.0, abs=1e-3)  # row 0 attends to itself
    r = _row(cls, head=1, feature="punctuation")
    assert r["n"] == 2 and r["mean"] == pytest.approx(1 / 12, abs=1e-3)


def test_dependency_relations_and_flags(tables):
    part, _, _ = tables
    rel = red.relations_table(part.dependency, "dependency", 50)
    assert _row(rel, layer=0, head=1)["mean"] == pytest.approx(np.mean([1 / 12, 1 / 5, 1 / 12]), abs=2e-3)
    # "n't" -> 'does' and 'knots' -> 'chase' are adjacent arcs: the previous-token head scores 1 on every example
    r = _row(rel, layer=0, head=2)
    assert (r["mean"], r["n"]) == (pytest.approx(1.0, abs=1e-3), 3) and r["std"] == pytest.approx(0.0, abs=1e-3)
    assert _row(rel, layer=0, head=0)["mean"] == 0
    # median of the six head means is the uniform heads' 0.12: only the two previous-token heads are above it
    assert set(map(tuple, rel.loc[rel["flagged"], ["layer", "head"]].to_numpy())) == {(0, 2), (1, 2)}
    assert list(rel.columns) == ["layer", "head", "source", "mean", "std", "n", "flagged"]


def test_pattern_fractions(tables):
    part, _, _ = tables
    p = red.patterns_table(part.patterns)
    assert _row(p, layer=0, head=0, **{"class": "vertical"})["fraction"] == 1.0
    assert _row(p, layer=1, head=1, **{"class": "heterogeneous"})["fraction"] == 1.0
    # previous token: diagonal on the two 12-token pairs; the 5-token single only reaches D* = 0.375 < 0.5
    assert _row(p, layer=0, head=2, **{"class": "diagonal"})["fraction"] == pytest.approx(2 / 3)
    overall = p[p["layer"] == -1]
    assert len(overall) == 5 and overall["fraction"].sum() == pytest.approx(1.0)
    assert _row(overall, **{"class": "vertical"})["n"] == 3 * 2 * 3


def test_cosine_one_aligned_pass(stores):
    pre, fin, _ = stores
    m = red.store_cosine(pre, fin, scheduler={"scheduler": "threads"})
    cos = red.moments_table(m)
    same = cos[~((cos["layer"] == 0) & (cos["head"] == 1))]
    assert np.allclose(same["mean"], 1.0, atol=1e-3) and (same["n"] == 3).all()
    r = _row(cos, layer=0, head=1)  # uniform vs previous token: 1 / sqrt(n)
    expect = 1 / np.sqrt([12, 5, 12])
    assert r["mean"] == pytest.approx(expect.mean(), abs=2e-3) and r["std"] == pytest.approx(expect.std(ddof=1), abs=2e-3)


def test_store_errors_say_what_to_do(tmp_path, stores):
    with pytest.raises(FileNotFoundError, match="run the extraction"):
        red.store_stats(tmp_path / "missing.zarr", None)
    pre, _, _ = stores
    other = build_store(EXAMPLES[:2], maps)
    write_store(other, tmp_path / "short.zarr")
    with pytest.raises(ValueError, match="same examples"):
        red.store_cosine(pre, tmp_path / "short.zarr")
    with pytest.raises(ValueError, match="words.parquet"):
        red.prepare_words(pd.DataFrame({"example_idx": [1]}))

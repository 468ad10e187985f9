"""The one-pass reduction over a Zarr store of constructed maps: every statistic against its hand value; the one
chunk reduction (bertology.store.map_chunks) it runs on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology.kovaleva import reduce as red
from bertology.store import map_chunks
from tests.builders.kovaleva import build_store, maps, pair_example, single_example, words_table, write_store

EXAMPLES = [pair_example(), single_example(), pair_example()]  # n = 12, 5, 12
SYNC = {"scheduler": "synchronous"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("stores")
    pre = write_store(build_store(EXAMPLES, maps), d / "pretrained.zarr", chunk=2)
    fin_ds = build_store(EXAMPLES, lambda ex: maps(ex, "finetuned"))
    fin_ds.attrs["variant"] = "finetuned"
    fin = write_store(fin_ds, d / "finetuned.zarr", chunk=1)  # other chunking: rechunked to align
    return pre, fin, words_table(EXAMPLES)


@pytest.fixture(scope="module")
def tables(stores):
    pre, _, words = stores
    part = red.store_stats(pre, words, compute_kwargs=SYNC, classifier="rule", negation="paper")
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
    # "n't" -> 'did' and 'knots' -> 'chase' are adjacent arcs: the previous-token head scores 1 on every example
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
    pre, fin, words = stores
    part = red.store_pair(pre, fin, words, compute_kwargs={"scheduler": "threads"}, negation="paper")
    cos = red.moments_table(part.cosine)
    diff = red.features_diff_table(part)
    # only layer 0 head 1 changed (uniform -> previous token): [CLS] goes from 1/n to 2/n
    r = _row(diff, layer=0, head=1, feature="cls")
    assert r["mean"] == pytest.approx(np.mean([1 / 12, 1 / 5, 1 / 12]), abs=2e-3) and r["n"] == 3
    others = diff[~((diff["layer"] == 0) & (diff["head"] == 1))]
    assert np.allclose(others["mean"].dropna(), 0.0, atol=1e-6)
    assert _row(diff, layer=1, head=0, feature="negation")["n"] == 2
    same = cos[~((cos["layer"] == 0) & (cos["head"] == 1))]
    assert np.allclose(same["mean"], 1.0, atol=1e-3) and (same["n"] == 3).all()
    r = _row(cos, layer=0, head=1)  # uniform vs previous token: 1 / sqrt(n)
    expect = 1 / np.sqrt([12, 5, 12])
    assert r["mean"] == pytest.approx(expect.mean(), abs=2e-3) and r["std"] == pytest.approx(expect.std(ddof=1), abs=2e-3)


def test_negation_list_option(stores):
    """analysis.features.negation reaches both reductions: "It does n't ." (doesn't) is a negation only with the
    extended list; "It did n't ." (didn't, footnote 6) with both."""
    pre, fin, words = stores
    w = words.copy()
    w.loc[(w["example_idx"] == 100) & (w["text"] == "did"), "text"] = "does"
    for negation, n in (("paper", 1), ("extended", 2)):
        part = red.store_stats(pre, w, compute_kwargs=SYNC, classifier="rule", negation=negation)
        assert _row(red.features_table(part), layer=0, head=1, feature="negation")["n"] == n
        diff = red.features_diff_table(red.store_pair(pre, fin, w, compute_kwargs=SYNC, negation=negation))
        assert _row(diff, layer=0, head=1, feature="negation")["n"] == n
    with pytest.raises(ValueError, match="analysis.features.negation"):
        red.prepare_words(w, negation="long")


def test_store_errors_say_what_to_do(tmp_path, stores):
    from bertology.store import StoreError, read_words

    with pytest.raises(FileNotFoundError, match="run the extraction"):
        red.store_stats(tmp_path / "missing.zarr", None, classifier="rule", negation="paper")
    pre, _, _ = stores
    other = build_store(EXAMPLES[:2], maps)
    write_store(other, tmp_path / "short.zarr")
    with pytest.raises(StoreError, match="same examples"):
        red.store_pair(pre, tmp_path / "short.zarr", negation="paper")
    pd.DataFrame({"example_idx": [1]}).to_parquet(tmp_path / "words.parquet")
    with pytest.raises(StoreError, match="words.parquet lacks column"):
        read_words(tmp_path / "words.parquet")


def _chunk_sum(block, *, scale):
    """A map_chunks function: what the chunk holds, and the sum of its real attention (times `scale`)."""
    return block["example_idx"].tolist(), scale * float(np.nansum(block["attention"], dtype=np.float64))


def _pair_diff(a, b):
    return a["example_idx"].tolist(), float(np.nansum(b["attention"], dtype=np.float64) -
                                            np.nansum(a["attention"], dtype=np.float64))


def test_map_chunks_one_task_per_store_chunk_in_order(stores):
    pre, fin, _ = stores  # chunks of 2 and of 1 example: the first store's chunks are the tasks
    got = map_chunks(_chunk_sum, pre, variables=("example_idx", "attention"), compute_kwargs={"scheduler": "threads"},
                     scale=2.0)
    assert [ex for ex, _ in got] == [[100, 101], [102]]
    rows = 2 * 3 * sum(ex.n for ex in EXAMPLES)  # every real row of every map sums to 1
    assert sum(total for _, total in got) == pytest.approx(2.0 * rows, rel=1e-3)
    seen = []
    got = map_chunks(_chunk_sum, fin, variables=("example_idx", "attention"), compute_kwargs=SYNC,
                     per_chunk=lambda start, stop: seen.append((start, stop)) or {"scale": float(start)})
    assert seen == [(0, 1), (1, 2), (2, 3)] and [ex for ex, _ in got] == [[100], [101], [102]]
    # two aligned stores read chunk by chunk together, each with its own variables
    got = map_chunks(_pair_diff, [pre, fin], variables=[("example_idx", "attention"), ("attention",)],
                     compute_kwargs=SYNC)
    assert [ex for ex, _ in got] == [[100, 101], [102]] and all(abs(d) < 1e-2 for _, d in got)


def _random_store(seed: int, examples: int = 7, layers: int = 2, heads: int = 3, max_length: int = 20):
    """Softmax maps of random logits, random lengths, pairs, multi-wordpiece words and a random annotation."""
    from tests.builders.kovaleva import Example, word

    rng = np.random.default_rng(seed)
    exs = []
    pos_tags = ["NOUN", "VERB", "PRON", "DET", "PUNCT", "PROPN"]
    deps = ["nsubj", "dobj", "amod", "advmod", "ROOT", "punct"]
    texts = ["not", "knot", "dog", "never", "n't", "cats"]
    for _ in range(examples):
        seg_words = [int(rng.integers(2, 5)), int(rng.integers(1, 4))]
        word_ids, segments, words = [-1], [0], []
        for s, count in enumerate(seg_words):
            for _ in range(count):
                w = len(words)
                for _ in range(int(rng.integers(1, 3))):  # 1-2 wordpieces
                    word_ids.append(w)
                    segments.append(s)
                words.append(word(w, texts[rng.integers(6)], pos_tags[rng.integers(6)], deps[rng.integers(6)],
                                  int(rng.integers(0, w + 1)), s))
            word_ids.append(-1)
            segments.append(s)
        exs.append(Example(word_ids, segments, words))

    def softmax_maps(ex):
        logits = rng.normal(scale=2.0, size=(layers, heads, ex.n, ex.n))
        a = np.exp(logits)
        return a / a.sum(-1, keepdims=True)

    return exs, build_store(exs, softmax_maps, max_length=max_length)


def test_matches_naive_loops(tmp_path):
    """The vectorised one-pass statistics equal a direct, loop-by-loop reading of the definitions."""
    from bertology.attention.negation import is_negation

    exs, ds = _random_store(3)
    write_store(ds, tmp_path / "s.zarr", chunk=3)
    part = red.store_stats(tmp_path / "s.zarr", words_table(exs), compute_kwargs={"scheduler": "threads"}, classifier="rule", negation="paper")
    att = ds["attention"].values.astype(np.float64)
    kinds = {"noun": lambda w: w["pos"] in ("NOUN", "PROPN"), "verb": lambda w: w["pos"] == "VERB",
             "pronoun": lambda w: w["pos"] == "PRON", "subject": lambda w: w["dep"] == "nsubj",
             "object": lambda w: w["dep"] == "dobj", "negation": lambda w: is_negation(w["text"], negation="paper")}
    feats = ["cls", "sep", *kinds]
    scores = {f: [[[] for _ in range(3)] for _ in range(2)] for f in feats}
    cls_last = {f: [[] for _ in range(3)] for f in feats + ["punctuation"]}
    dep = [[[] for _ in range(3)] for _ in range(2)]
    for e, ex in enumerate(exs):
        n = ex.n
        tokens = {"cls": [[0]], "sep": [[p] for p in range(n) if ex.word_ids[p] == -1 and p > 0]}
        for f, test in {**kinds, "punctuation": lambda w: w["pos"] == "PUNCT"}.items():
            tokens[f] = [[p for p in range(n) if ex.word_ids[p] == w["word"]] for w in ex.words if test(w)]
        for l in range(2):
            for h in range(3):
                a = att[e, l, h, :n, :n]
                for f in feats:
                    if tokens[f]:
                        scores[f][l][h].append(max(sum(a[i, s] for i in range(n) for s in t) / n for t in tokens[f]))
                pairs = [(s, t) for w in ex.words if w["head"] != w["word"]
                         for s in range(n) if ex.word_ids[s] == w["word"]
                         for t in range(n) if ex.word_ids[t] == w["head"]]
                if pairs:
                    dep[l][h].append(max(a[s, t] for s, t in pairs))
                if l == 1:
                    for f in cls_last:
                        if tokens[f]:
                            cls_last[f][h].append(max(sum(a[0, s] for s in t) for t in tokens[f]))
    features = red.features_table(part)
    cls = red.cls_table(part, 2)
    rel = red.relations_table(part.dependency, "dependency", 99)
    for f in feats:
        for l in range(2):
            for h in range(3):
                r = _row(features, layer=l, head=h, feature=f)
                vals = np.array(scores[f][l][h])
                assert r["n"] == len(vals)
                if len(vals):
                    assert r["mean"] == pytest.approx(vals.mean(), abs=1e-6)
                if len(vals) > 1:
                    assert r["std"] == pytest.approx(vals.std(ddof=1), abs=1e-6)
    for f in cls_last:
        for h in range(3):
            vals = np.array(cls_last[f][h])
            r = _row(cls, head=h, feature=f)
            assert r["n"] == len(vals) and (not len(vals) or r["mean"] == pytest.approx(vals.mean(), abs=1e-6))
    for l in range(2):
        for h in range(3):
            vals = np.array(dep[l][h])
            r = _row(rel, layer=l, head=h)
            assert r["n"] == len(vals) and r["mean"] == pytest.approx(vals.mean(), abs=1e-6)

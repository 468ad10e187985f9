"""Clark et al. 2019: attention entropy and heads as dependency parsers, on inputs whose answers are known."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

from bertology.clark import entropy as ent
from bertology.clark import parser as prs
from bertology.clark.conllu import read_treebanks, truncation
from bertology.pipeline.config import validate_config
from bertology.clark import reduce as clred
from bertology.clark.reduce import ClarkKernel
from bertology.kovaleva.reduce import KovalevaKernel
from bertology.attention.onepass import reduce_store
from tests.builders import kovaleva as kb
from tests.builders.steps import run_step

# --------------------------------------------------------------------------------------------------
# entropy


def test_row_entropy_of_known_maps():
    n = 6
    uniform = np.full((n, n), 1.0 / n)
    assert np.allclose(ent.row_entropy(uniform), np.log(n))
    one_hot = np.eye(n)
    assert np.array_equal(ent.row_entropy(one_hot), np.zeros(n))  # 0 ln 0 = 0, no NaN
    half = np.zeros((1, n))
    half[0, [1, 4]] = 0.5
    assert np.allclose(ent.row_entropy(half), np.log(2))
    # float16 rows that sum to 1 only up to rounding are renormalised: still exactly ln 3
    third = np.zeros((1, n), np.float16)
    third[0, :3] = np.float16(1 / 3)
    assert third.astype(np.float64).sum() != 1.0
    assert abs(ent.row_entropy(third)[0] - np.log(3)) < 1e-6


def test_example_entropy_pools_rows_and_gives_references():
    n = 4
    maps = np.stack([np.stack([np.eye(n), np.full((n, n), 1 / n)])])  # (1, 2, n, n)
    total, sumsq, count = ent.example_entropy(maps, cls_position=0)
    feats = list(ent.FEATURES)
    assert count[0, 0, feats.index("all")] == n and count[0, 0, feats.index("cls")] == 1
    assert total[0, 0, feats.index("all")] == 0 and np.isclose(total[0, 1, feats.index("all")], n * np.log(n))
    assert np.isclose(total[0, 0, feats.index("uniform")], n * np.log(n))
    assert np.isclose(total[0, 1, feats.index("cls")], np.log(n))
    assert np.isclose(total[0, 0, feats.index("uniform_cls")], np.log(n))
    _, _, none = ent.example_entropy(maps, cls_position=None)
    assert none[..., feats.index("cls")].sum() == 0


def test_entropy_table_from_one_pass_over_a_store(tmp_path):
    """Layer 0 head 0 one-hot on [CLS] (entropy 0), head 1 uniform (ln n); pooled over every real query."""
    examples = [kb.pair_example(), kb.single_example()]

    def maps(ex):
        n = ex.n
        return np.stack([np.stack([kb.on_columns(n, [0]), kb.uniform(n)])])

    store = kb.write_store(kb.build_store(examples, maps), tmp_path / "s.zarr")
    kernels = [KovalevaKernel(), ClarkKernel()]  # one read of the store for both
    res = reduce_store(store, kernels, kb.words_table(examples), compute_kwargs={"scheduler": "synchronous"})
    part = res["clark"]
    assert res["kovaleva"].examples == len(examples)
    table = clred.entropy_table(part).set_index(["layer", "head", "feature"])
    rows = sum(ex.n for ex in examples)
    pooled = sum(ex.n * np.log(ex.n) for ex in examples) / rows
    assert table.loc[(0, 0, "all"), "mean"] == pytest.approx(0.0, abs=1e-9)
    assert table.loc[(0, 1, "all"), "mean"] == pytest.approx(pooled, rel=1e-3)
    assert table.loc[(0, 0, "uniform"), "mean"] == pytest.approx(pooled, rel=1e-12)
    assert table.loc[(0, 1, "all"), "n"] == rows and table.loc[(0, 1, "cls"), "n"] == len(examples)
    cls_mean = np.mean([np.log(ex.n) for ex in examples])
    assert table.loc[(0, 1, "cls"), "mean"] == pytest.approx(cls_mean, rel=1e-3)
    assert table.loc[(0, 0, "uniform_cls"), "mean"] == pytest.approx(cls_mean, rel=1e-12)
    assert list(clred.entropy_table(part).columns) == ["layer", "head", "feature", "mean", "std", "n"]


# --------------------------------------------------------------------------------------------------
# heads as parsers


def split_example():
    """[CLS] The dog+s bark+ed [SEP] (n = 7): w0 The (det -> w1), w1 dogs (nsubj -> w2), w2 barked (root).

    positions: 0 CLS | 1 The | 2,3 dogs | 4,5 barked | 6 SEP
    """
    word_ids = np.array([-1, 0, 1, 1, 2, 2, -1])
    arcs = prs.Arcs.from_words(np.array([0, 1, 2]), np.array([1, 2, 2]), np.array(["det", "nsubj", "root"]))
    return word_ids, arcs


def test_word_attention_sums_to_and_averages_from_split_words():
    word_ids, _ = split_example()
    a = np.zeros((1, 1, 7, 7))
    a[0, 0, 2, [4, 5]] = [0.3, 0.3]  # dogs' first piece: 0.6 to barked (two pieces), 0.4 to The
    a[0, 0, 2, 1] = 0.4
    a[0, 0, 3, 1] = 1.0  # dogs' second piece: all to The
    wd = prs.word_attention(a, word_ids, 3)
    assert wd.shape == (1, 1, 3, 3)
    assert wd[0, 0, 1, 2] == pytest.approx((0.6 + 0.0) / 2)  # to barked: summed over its pieces, mean over dogs'
    assert wd[0, 0, 1, 0] == pytest.approx((0.4 + 1.0) / 2)


def test_word_attention_equals_the_membership_products_for_any_word_order():
    """Wd = (M / |wp|) A M^T with M the word x wordpiece membership, also for words whose pieces are not
    contiguous or out of order, and for words without a piece (zero row and column)."""
    from bertology.kovaleva.features import word_membership

    rng = np.random.default_rng(3)
    word_ids = np.array([-1, 2, 0, 0, 3, 2, 1, 3, 3, -1, -1])  # word 4 has no piece; two specials at the end
    n, W = len(word_ids), 5
    a = rng.random((2, 3, n, n))
    a /= a.sum(-1, keepdims=True)
    m = word_membership(word_ids, n, W).astype(np.float64)
    sizes = np.maximum(m.sum(1, keepdims=True), 1)
    assert np.allclose(prs.word_attention(a, word_ids, W), (m / sizes) @ a @ m.T, rtol=0, atol=1e-12)


def test_parser_accuracy_where_the_right_head_and_direction_are_known():
    """Head 0: every word attends to its syntactic head (dep_to_head right, head_to_dep not necessarily).
    Head 1: every head word attends to its dependents, so the word attending most to a dependent is its head
    (head_to_dep right). The split head word `barked` wins only through the sum over its two pieces."""
    word_ids, arcs = split_example()
    n = 7
    a = np.zeros((2, n, n))
    # head 0: The -> dogs (both pieces, 0.35 each = 0.7), dogs (both pieces) -> barked 0.3 + 0.3 vs The 0.4
    a[0, 1, [2, 3]] = 0.35
    a[0, 1, 0] = 0.3
    a[0, [2, 3], 4] = 0.3
    a[0, [2, 3], 5] = 0.3
    a[0, [2, 3], 1] = 0.4
    a[0, [4, 5], 0] = 1.0
    a[0, [0, 6], 0] = 1.0
    # head 1: dogs attends to The; barked attends to dogs; The attends to barked
    a[1, [2, 3], 1] = 1.0
    a[1, [4, 5], 2] = 0.5
    a[1, [4, 5], 3] = 0.5
    a[1, 1, [4, 5]] = 0.5
    a[1, [0, 6], 0] = 1.0
    counts = prs.ParserCounts()
    counts.add_example(a[None], word_ids, arcs)
    table = prs.parser_table(counts, 1, 2).set_index(["relation", "direction", "head"])
    assert set(counts.n) == {"det", "nsubj"}  # the root is no arc
    assert table.loc[("nsubj", "dep_to_head", 0), "accuracy"] == 1.0  # 0.6 summed over barked > 0.4 to The
    assert table.loc[("det", "dep_to_head", 0), "accuracy"] == 1.0
    assert table.loc[("nsubj", "head_to_dep", 1), "accuracy"] == 1.0  # barked attends most to dogs
    assert table.loc[("det", "head_to_dep", 1), "accuracy"] == 1.0  # dogs attends most to The
    assert table.loc[("nsubj", "dep_to_head", 1), "accuracy"] == 0.0  # dogs attends to The, not barked
    assert table.loc[("det", "dep_to_head", 1), "accuracy"] == 0.0  # The attends to barked, not dogs
    assert (table["n"] == 1).all() and (table["baseline_offset"] == 1).all()
    assert list(prs.parser_table(counts, 1, 2).columns) == prs.COLUMNS


def test_truncated_words_are_no_candidates_and_their_arcs_are_skipped():
    word_ids, arcs = split_example()
    cut = np.array([-1, 0, 1, 1, -1])  # barked truncated away
    a = np.full((1, 1, 5, 5), 0.2)
    counts = prs.ParserCounts()
    counts.add_example(a, cut, arcs)
    assert counts.n == Counter({"det": 1}) and counts.skipped == 1


def test_baseline_is_the_most_common_offset_with_documented_ties():
    assert prs.baseline(Counter({1: 3, -1: 3, 2: 5})) == (2, 5 / 11)
    assert prs.baseline(Counter({1: 3, -1: 3})) == (-1, 0.5)
    assert prs.baseline(Counter({2: 2, -1: 2})) == (-1, 0.5)


# --------------------------------------------------------------------------------------------------
# gold CoNLL-U

CONLLU = """# sent_id = a
# text = I can't go to the market.
1	I	I	PRON	PRP	_	4	nsubj	_	_
2-3	can't	_	_	_	_	_	_	_	_
2	ca	can	AUX	MD	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	go	go	VERB	VB	_	0	root	_	_
4.1	went	go	VERB	VBD	_	_	_	4:conj	_
5	to	to	ADP	IN	_	7	case	_	_
6	the	the	DET	DT	_	7	det	_	_
7	market	market	NOUN	NN	_	4	obl	_	SpaceAfter=No
8	.	.	PUNCT	.	_	4	punct	_	_

# sent_id = b
1	Il	il	PRON	_	_	2	nsubj	_	_
2	va	aller	VERB	_	_	0	root	_	_
3-4	au	_	_	_	_	_	_	_	_
3	à	à	ADP	_	_	5	case	_	_
4	le	le	DET	_	_	5	det	_	_
5	marché	marché	NOUN	_	_	2	obl:mod	_	_

"""


def test_conllu_reader_handles_multiword_tokens_and_empty_nodes(tmp_path):
    path = tmp_path / "t.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    bank = read_treebanks([path])
    assert bank.sample["text_a"].tolist() == ["I can't go to the market.", "Il va au marché"]
    assert bank.sample["text_b"].isna().all()
    w = bank.words
    a = w[w["example_idx"] == 0].reset_index(drop=True)
    text = bank.sample["text_a"][0]
    assert [text[s:e] for s, e in zip(a["start_char"], a["end_char"])] == ["I", "ca", "n't", "go", "to", "the",
                                                                          "market", "."]
    assert a["head"].tolist() == [3, 3, 3, 3, 6, 6, 3, 3]  # 0-based; the root points to itself
    assert a["dep"].tolist()[-2] == "obl" and a["is_punct"].tolist()[-1]
    b = w[w["example_idx"] == 1].reset_index(drop=True)
    assert b["dep"].tolist() == ["nsubj", "root", "case", "det", "obl:mod"]  # subtypes kept
    # `au` is not `à` + `le`: the whole span goes to the first word whose head is outside the token
    assert (b.loc[2, "start_char"], b.loc[2, "end_char"]) == (6, 8) and b.loc[3, "start_char"] == b.loc[3, "end_char"]
    assert bank.counts["empty_nodes"] == 1 and bank.counts["multiword_tokens"] == 2
    assert bank.counts["multiword_tokens_unsplit"] == 1 and bank.counts["sentences"] == 2
    assert bank.sentences["sent_id"].tolist() == ["a", "b"]


def test_conllu_errors_name_the_file(tmp_path):
    from bertology.data import DataError

    with pytest.raises(DataError, match="not a file"):
        read_treebanks([tmp_path / "missing.conllu"])
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tI\tI\tPRON\t_\t_\t_\t_\t_\t_\n\n")
    with pytest.raises(DataError, match="no HEAD/DEPREL"):
        read_treebanks([bad])


def random_treebank(rng: np.random.Generator, sentences: int) -> str:
    """Random projective-agnostic trees over a small vocabulary, labels with subtypes, in CoNLL-U."""
    vocab = ["the", "dog", "cat", "runs", "quickly", "under", "a", "red", "house", "sees", "big", "old"]
    labels = ["det", "nsubj", "obj", "amod", "advmod", "case", "obl", "nmod:poss", "aux:pass"]
    out = []
    for s in range(sentences):
        n = int(rng.integers(3, 15))
        root = int(rng.integers(1, n + 1))
        out.append(f"# sent_id = r{s}")
        for i in range(1, n + 1):
            head = 0 if i == root else int(rng.choice([j for j in range(1, n + 1) if j != i]))
            label = "root" if head == 0 else str(rng.choice(labels))
            out.append(f"{i}\t{rng.choice(vocab)}\t_\tX\t_\t_\t{head}\t{label}\t_\t_")
        out.append("")
    return "\n".join(out) + "\n"


def independent_counts(text: str) -> tuple[Counter, dict[str, Counter]]:
    """n per relation and Counter of HEAD - ID per relation, read with str.split only."""
    n, offsets = Counter(), defaultdict(Counter)
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) == 10 and cols[0].isdigit() and cols[6] != "0":
            n[cols[7]] += 1
            offsets[cols[7]][int(cols[6]) - int(cols[0])] += 1
    return n, offsets


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory, tiny_model_dir):
    """Random gold trees -> sentences -> the tiny model's store -> syntax/{model}.csv, through the steps."""
    tmp = tmp_path_factory.mktemp("gold")
    text = random_treebank(np.random.default_rng(0), 60)
    (tmp / "gold.conllu").write_text(text)
    cfg = validate_config({"model": str(tiny_model_dir), "tasks": ["sst2"],
                           "data": {"source": "demo", "max_length": 12},
                           "attention": {"batch_size": 8, "chunk_size": 16, "keepbits": None}})
    outs = {k: tmp / f"{k}.{ext}" for k, ext in (("sample", "parquet"), ("words", "parquet"),
                                                  ("sentences", "csv"), ("counts", "json"))}
    assert run_step("syntax_sentences", cfg, {}, {"conllu": [tmp / "gold.conllu"]}, outs) == 0
    store = tmp / "pretrained.zarr"
    assert run_step("extract_syntax", cfg, {"model": "pretrained"},
                    {"sample": outs["sample"], "words": outs["words"]}, {"store": store}) == 0
    table, summary = tmp / "pretrained.csv", tmp / "pretrained.json"
    assert run_step("syntax_parser", cfg, {"model": "pretrained"}, {"store": store, "words": outs["words"]},
                    {"table": table, "summary": summary}) == 0
    return text, store, outs["words"], pd.read_csv(table, keep_default_na=False), json.loads(summary.read_text())


def test_gold_baseline_equals_an_independent_count(gold_run):
    text, store, words, table, summary = gold_run
    assert summary["sentences_truncated"] > 0  # max_length 12 cuts the longer sentences: arcs are skipped
    import xarray as xr

    ds = xr.open_zarr(store)
    kept = set()  # (example, word) pairs with a wordpiece
    for e in range(ds.sizes["example"]):
        for w in np.unique(ds["word_ids"].values[e]):
            if w >= 0:
                kept.add((int(ds["example_idx"].values[e]), int(w)))
    # independent count restricted to arcs whose two words survived truncation
    n, offsets = Counter(), defaultdict(Counter)
    sent = -1
    for line in text.splitlines():
        if line.startswith("# sent_id"):
            sent += 1
        cols = line.split("\t")
        if len(cols) == 10 and cols[6] != "0":
            d, h = int(cols[0]) - 1, int(cols[6]) - 1
            if (sent, d) in kept and (sent, h) in kept:
                n[cols[7]] += 1
                offsets[cols[7]][h - d] += 1
    assert summary["arcs_scored"] == sum(n.values())
    full_n, _ = independent_counts(text)
    assert summary["arcs_skipped"] == sum(full_n.values()) - sum(n.values())
    best = table.groupby("relation").first()
    assert set(best.index) == set(n)
    for rel, count in n.items():
        top = max(offsets[rel].values())
        assert best.loc[rel, "n"] == count
        assert best.loc[rel, "baseline_accuracy"] == pytest.approx(top / count)
        assert offsets[rel][best.loc[rel, "baseline_offset"]] == top
    assert "nmod:poss" in n and "aux:pass" in n


def test_gold_table_is_complete_and_recomputes_from_the_store(gold_run):
    text, store, words, table, _ = gold_run
    import xarray as xr

    ds = xr.open_zarr(store)
    L, H = ds.sizes["layer"], ds.sizes["head"]
    assert len(table) == table["relation"].nunique() * 2 * L * H
    assert not table.duplicated(["relation", "direction", "layer", "head"]).any()
    # naive re-computation, one word pair at a time, for one head
    wt = pd.read_parquet(words)
    layer, head = L - 1, H - 1
    correct, total = Counter(), Counter()
    for e in range(ds.sizes["example"]):
        n = int(ds["length"].values[e])
        a = ds["attention"].values[e, layer, head, :n, :n].astype(np.float64)
        ids = ds["word_ids"].values[e, :n]
        present = sorted({int(w) for w in ids if w >= 0})
        wp = {w: [p for p in range(n) if ids[p] == w] for w in present}

        def att(u, v):
            return np.mean([sum(a[s, t] for t in wp[v]) for s in wp[u]])

        rows = wt[wt["example_idx"] == int(ds["example_idx"].values[e])]
        for w, h, rel in zip(rows["word"], rows["head"], rows["dep"]):
            if w == h or w not in wp or h not in wp:
                continue
            others = [v for v in present if v != w]
            to = max(others, key=lambda v: (att(w, v), -v))
            frm = max(others, key=lambda v: (att(v, w), -v))
            correct[(rel, "dep_to_head")] += to == h
            correct[(rel, "head_to_dep")] += frm == h
            total[rel] += 1
    got = table[(table["layer"] == layer) & (table["head"] == head)].set_index(["relation", "direction"])
    for (rel, direction), c in correct.items():
        assert got.loc[(rel, direction), "accuracy"] == pytest.approx(c / total[rel])


def test_truncation_counts_words_after_the_last_kept_word():
    words = pd.DataFrame({"example_idx": [0, 0, 0, 1, 1], "word": [0, 1, 2, 0, 1]})
    word_ids = np.array([[-1, 0, 1, -1], [-1, 0, 1, -1]])
    assert truncation(words, word_ids, np.array([4, 4]), np.array([0, 1])) == {"sentences_truncated": 1,
                                                                               "words_truncated": 1}


# --------------------------------------------------------------------------------------------------
# the demo's gold trees


def test_every_demo_phrase_has_a_tree_that_spells_it():
    from bertology.demo.lexicon import CLAUSES, PLACES, TIMES
    from bertology.demo.trees import PHRASES

    phrases = set(PLACES) | {t for ts in TIMES.values() for t in ts} | {c for cs in CLAUSES.values() for c in cs}
    assert phrases <= set(PHRASES)
    for text in phrases:
        parts = PHRASES[text]
        assert " ".join(f for f, _, _, _ in parts) == text
        assert sum(h == 0 for _, _, h, _ in parts) == 1 and all(0 <= h <= len(parts) for _, _, h, _ in parts)


def is_tree(heads: list[int]) -> bool:
    """heads: 0-based head per token, -1 for the root: exactly one root and every token reaches it."""
    if heads.count(-1) != 1:
        return False
    for i in range(len(heads)):
        seen, j = set(), i
        while heads[j] != -1:
            if j in seen:
                return False
            seen.add(j)
            j = heads[j]
    return True


def test_demo_trees_spell_the_grammars_sentences_and_are_trees():
    from bertology.demo.grammar import realise
    from bertology.demo.sampling import Rng, random_prop
    from bertology.demo.trees import sentence_tree

    r = Rng(np.random.default_rng(5))
    for _ in range(500):
        p = random_prop(r, modifiers=0.6, negated=0.4)
        w = r.wording(passive=0.4)
        tree = sentence_tree(p, w)
        assert tree.text() == realise(p, w)
        heads = [t.head for t in tree.tokens]
        assert is_tree(heads)
        root = heads.index(-1)
        rels = {t.deprel for t in tree.tokens if t.head == root}  # the main clause's dependents
        assert ("nsubj:pass" in rels) == w.passive and ("obj" in rels) != w.passive
        assert tree.tokens[root].upos == "VERB"


def test_demo_treebank_reads_back_with_frequent_relations(tmp_path):
    from bertology.demo.trees import gold_treebank

    text = gold_treebank(200, 42)
    assert text == gold_treebank(200, 42) and text != gold_treebank(200, 43)
    path = tmp_path / "demo.conllu"
    path.write_text(text)
    bank = read_treebanks([path])
    assert bank.counts["sentences"] == 200
    n, _ = independent_counts(text)
    for rel in ("nsubj", "obj", "det", "amod", "advmod", "case", "obl", "nmod:poss", "punct", "nsubj:pass",
                "aux:pass", "obl:agent"):
        assert n[rel] >= 20, (rel, n[rel])
    words = bank.words[bank.words["example_idx"] == 0]
    sample_text = bank.sample["text_a"][0]
    assert [sample_text[s:e] for s, e in zip(words["start_char"], words["end_char"])] == words["text"].tolist()


def test_predictions_over_the_present_words_equal_the_word_level_argmax():
    """predict_present on word_blocks (the present words only, in place) = predict_heads on word_attention, with ties
    (attention of float16 values, many exactly equal) going to the earlier word in both."""
    rng = np.random.default_rng(7)
    word_ids = np.array([-1, 0, 1, 1, 2, 4, 4, 4, 5, -1, 6, 7, 7, -1])  # word 3 has no piece; pieces out of order below
    n, W = len(word_ids), 8
    for shuffle in (False, True):
        ids = word_ids.copy()
        if shuffle:
            ids[1:9] = ids[1:9][::-1]
        a = np.round(rng.random((2, 3, n, n)) * 4) / 4  # coarse values: ties everywhere
        a = (a / np.maximum(a.sum(-1, keepdims=True), 1)).astype(np.float16).astype(np.float32)
        present = np.zeros(W, bool)
        present[ids[ids >= 0]] = True
        want = prs.predict_heads(prs.word_attention(a, ids, W), present)  # (2, L, H, W)
        blocks, words = prs.word_blocks(a, ids, W)
        assert words.tolist() == np.flatnonzero(present).tolist()
        got = words[prs.predict_present(blocks, np.arange(words.size))]  # (2, L, H, k)
        assert np.array_equal(got, want[..., words])

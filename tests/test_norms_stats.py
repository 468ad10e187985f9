"""norms.csv and mixing.csv (bertology.norms.norm_stats), token categories from the tokenizer, and the one-pass driver
(bertology.norms.analysis) on tiny random models."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.norms import norm_stats as ns
from bertology.norms.tokens import CATEGORIES, TokenKinds
from tests.builders.norms import tiny


def _row(table, layer, head, cat, measure):
    sel = (table["layer"] == layer) & (table["category"] == cat) & (table["measure"] == measure)
    sel &= table["head"].isna() if head is None else (table["head"] == head).fillna(False)
    (i,) = np.flatnonzero(sel.to_numpy())
    return table.iloc[i]


def test_shares_by_construction():
    # one layer, two heads, tokens: [CLS] word , [SEP]
    cats = np.array([0, 3, 2, 1])
    alpha = np.zeros((1, 2, 4, 4))
    alpha[0, 0, :, 0] = 1.0                              # head 0: everything to [CLS]
    alpha[0, 1] = 0.25                                   # head 1: uniform
    norms = np.array([[[0.0, 1.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0]]])
    st = ns.NormStats(1, 2)
    st.update(alpha, norms, cats)
    st.update(alpha, norms, cats)
    t = st.table()
    assert list(t.columns) == ns.NORMS_COLUMNS
    assert _row(t, 0, 0, "cls", "weight_share")["mean"] == pytest.approx(1.0)
    assert np.isnan(_row(t, 0, 0, "cls", "norm_share")["mean"])          # all the weight on a zero vector: 0 / 0
    assert _row(t, 0, 1, "sep", "weight_share")["mean"] == pytest.approx(0.25)
    assert _row(t, 0, 1, "punctuation", "norm_share")["mean"] == pytest.approx(0.25)
    assert _row(t, 0, 1, "cls", "weight_share")["n"] == 2 and _row(t, 0, 1, "cls", "weight_share")["std"] == 0
    # the layer pools its heads' weights: [CLS] gets (4 + 1) of 8
    assert _row(t, 0, None, "cls", "weight_share")["mean"] == pytest.approx(5 / 8)
    shares = t[(t["measure"] == "weight_share") & (t["head"] == 1).fillna(False)]["mean"].sum()
    assert shares == pytest.approx(1.0)
    assert _row(t, 0, 0, "sep", "value_norm")["mean"] == pytest.approx(2.0)
    assert _row(t, 0, 0, "sep", "value_norm")["n"] == 2


def test_spearman_alpha_norm_and_frequency():
    rng = np.random.default_rng(0)
    st = ns.NormStats(1, 1)
    for _ in range(10):
        n = 6
        cats = np.array([0, 3, 3, 3, 3, 1])
        norms = rng.uniform(1, 2, size=(1, 1, n))
        alpha = np.broadcast_to(norms[..., None, :] / 12, (1, 1, n, n))    # alpha grows with the norm (rows <= 1)
        freq = 1.0 / norms[0, 0]                                         # frequent tokens have small norms
        st.update(alpha, norms, cats, freq)
    t = st.table()
    assert _row(t, 0, 0, "other", "spearman_alpha_norm")["mean"] == pytest.approx(1.0)
    assert _row(t, 0, 0, "other", "spearman_alpha_norm")["n"] == 40
    assert _row(t, 0, 0, "ordinary", "spearman_norm_frequency")["mean"] == pytest.approx(-1.0)


def test_mixing_table():
    m = ns.MixingStats(2)
    r = np.full((2, 5, 3), 0.5)
    r[:, 4] = np.nan                                                     # a pre-LN layer: no LayerNorm measure
    m.update(r)
    t = m.table()
    assert list(t.columns) == ns.MIXING_COLUMNS
    assert len(t) == 2 * 4 and (t["mean"] == 0.5).all() and (t["n"] == 3).all()


@pytest.mark.parametrize("arch", ["bert", "roberta", "modernbert"])
def test_token_categories_from_the_tokenizer(arch):
    _, tok = tiny(arch)
    enc = tok("the cat , sat .", "a dog !")
    ids = np.array(enc["input_ids"])
    cats = TokenKinds(tok).categories(np.concatenate([ids, [tok.pad_token_id]])[None], np.array([len(ids)]))[0]
    texts = [tok.convert_tokens_to_string([t]).strip() for t in tok.convert_ids_to_tokens(ids.tolist())]
    assert cats[0] == CATEGORIES.index("cls") and cats[-2] == CATEGORIES.index("sep") and cats[-1] == -1
    got = {t: CATEGORIES[c] for t, c in zip(texts[1:-1], cats[1:-2]) if t}
    assert {t for t, c in got.items() if c == "punctuation"} == {",", ".", "!"}
    assert all(c == "other" for t, c in got.items() if t.isalpha()) and "other" in got.values()


@pytest.mark.parametrize("arch", ["bert", "distilbert", "modernbert"])
def test_one_pass_views_and_faithfulness(arch):
    from bertology.demo import generate
    from bertology.norms.analysis import SCORE_COLUMNS, run_faithfulness, run_views
    from bertology.norms.tokens import token_frequencies

    model, tok = tiny(arch)
    frame = generate("mrpc", "validation", 5, seed=1)
    freq = token_frequencies(tok, generate("mrpc", "train", 20, seed=2), 48)
    res = run_views(model, tok, frame, max_length=48, batch_size=2, flow_examples=2, frequencies=freq,
                    mixing_examples=3)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    assert list(res.scores.columns) == SCORE_COLUMNS
    counts = res.scores.groupby("method")["example_idx"].nunique().to_dict()
    newer = ("alti", "globenc", "decompx", "value_zeroing")
    # the newer mixing views on the first 3: ALTI and GlobEnc on post-LN and pre-norm layers, DecompX not through
    # ModernBERT's gated MLP, ALTI-Logit where one linear or a pooler and a classifier follow the last layer
    # (ModernBERT's head normalises: left out, and said), Value Zeroing on every layer it finds
    views = ("alti", "globenc", "value_zeroing") if arch == "modernbert" else newer + ("alti_logit",)
    assert counts == {"raw": 5, "norm": 5, "rollout": 5, "flow": 2, **dict.fromkeys(views, 3)}
    assert (res.mixing_note is not None) == (arch == "modernbert") and res.mixing_examples == 3
    assert res.mixing_views == views
    assert res.decompx_error < 1e-4                    # float32 models: DecompX's parts add up to the hidden states
    # every layer's own row of each newer view (mixing_layers.parquet), one per token of the views' examples
    assert len(res.layers) == len(res.mixing_views) * L * (res.scores["method"] == "value_zeroing").sum()
    for method in ("raw", "rollout", "flow"):
        sums = res.scores[res.scores["method"] == method].groupby("example_idx")["score"].sum()
        np.testing.assert_allclose(sums, 1.0, rtol=1e-5)
    shares = res.norms[(res.norms["measure"] == "weight_share") & res.norms["head"].notna()]
    np.testing.assert_allclose(shares.groupby(["layer", "head"])["mean"].sum(), 1.0, rtol=1e-5)
    assert set(res.norms["measure"]) == {"weight_share", "norm_share", "value_norm", "spearman_alpha_norm",
                                         "spearman_norm_frequency"}
    assert res.mixing["layer"].nunique() == L and (res.mixing["n"] > 0).all()
    assert ("attnresln_n" in set(res.mixing["measure"])) == (arch != "modernbert")
    fr = run_faithfulness(model, tok, frame, res.scores, max_length=48, batch_size=8, confidence=0.95,
                          resamples=50, seed=0)
    assert fr.examples == 2
    views = ("raw", "norm", "rollout", "flow") + res.mixing_views
    assert set(zip(fr.table["view"], fr.table["importance"])) == {(v, i) for v in views
                                                                  for i in ("ablation", "gradient", "aopc")} | {
        ("random", "aopc")}
    assert (fr.table["n"] <= 2).all() and len(fr.rhos) == 2 * (3 * len(views) + 1)
    assert L * H > 0

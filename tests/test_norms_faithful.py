"""Token importance and faithfulness (bertology.norms.faithful) on tiny random classifiers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertology.norms import faithful as ff
from tests.builders.norms import tiny


@pytest.mark.parametrize("arch", ["bert", "distilbert", "roberta", "deberta-v2", "modernbert"])
def test_a_token_the_classifier_cannot_see_has_zero_importance(arch):
    model, tok = tiny(arch)
    enc = tok("the cat sat on the mat and the dog barked at it", return_tensors="pt", return_token_type_ids=True)
    ids, mask, tt = enc["input_ids"][0], enc["attention_mask"][0].clone(), enc["token_type_ids"][0]
    hidden = 4
    mask[hidden] = 0                                           # no query may attend to it: the classifier cannot see it
    positions = np.arange(1, len(ids) - 1)
    imp, c = ff.ablation_importance(model, ids, mask, positions, ff.replacement_token_id(tok), token_type_ids=tt,
                                    batch_size=5)
    assert abs(imp[hidden]) < 1e-6                              # float32 batches of other shapes: rounding only
    assert np.isnan(imp[0]) and np.isnan(imp[-1])
    visible = np.delete(positions, np.flatnonzero(positions == hidden))
    assert np.abs(imp[visible]).max() > 1e-3, "the visible tokens matter (the test can fail)"
    grad = ff.gradient_importance(model, ids, mask, token_type_ids=tt)
    assert abs(grad[hidden]) < 1e-9
    assert np.abs(grad[visible]).max() > 1e-4
    # the ablation is what the model says when the token is replaced
    ablated = ids.clone()
    ablated[2] = ff.replacement_token_id(tok)
    with torch.no_grad():
        p0 = torch.softmax(ff._forward(model, ids[None], mask[None], tt[None]).logits.double(), -1)[0, c]
        p1 = torch.softmax(ff._forward(model, ablated[None], mask[None], tt[None]).logits.double(), -1)[0, c]
    assert imp[2] == pytest.approx(float(p0 - p1), abs=1e-6)


def test_gradient_times_input_matches_finite_differences():
    model, tok = tiny("bert")
    model = model.double()
    try:
        enc = tok("a dog barked", return_tensors="pt")
        ids, mask = enc["input_ids"][0], enc["attention_mask"][0]
        grad = ff.gradient_importance(model, ids, mask)
        # d/dt p(e_j * t) at t = 1 is sum_d e_jd dp/de_jd: scale one token's embedding
        emb = model.base_model.embeddings
        j, eps = 2, 1e-5
        vals = []
        for t in (1 + eps, 1 - eps):
            h = emb.register_forward_hook(lambda m, a, o: o.index_copy(1, torch.tensor([j]), o[:, j:j + 1] * t))
            with torch.no_grad():
                p = torch.softmax(model(input_ids=ids[None], attention_mask=mask[None]).logits, -1)[0]
            h.remove()
            vals.append(p)
        with torch.no_grad():
            c = int(torch.softmax(model(input_ids=ids[None], attention_mask=mask[None]).logits, -1)[0].argmax())
        assert grad[j] == pytest.approx(float((vals[0][c] - vals[1][c]) / (2 * eps)), rel=1e-4, abs=1e-9)
    finally:
        model.float()


def test_replacement_prefers_mask_then_unk():
    class Tok:
        mask_token_id, unk_token_id = None, 3

    assert ff.replacement_token_id(Tok()) == 3
    Tok.unk_token_id = None
    with pytest.raises(ff.NoReplacementToken):
        ff.replacement_token_id(Tok())


def test_norm_scores_and_summary():
    alpha = np.array([[[0.5, 0.5], [0.0, 1.0]]])                    # H=1
    f = np.array([[[3.0, 4.0], [0.0, 2.0]]])                       # ||f(x_0)|| = 5, ||f(x_1)|| = 2
    np.testing.assert_allclose(ff.norm_scores(alpha, f), [2.5, 1.0])
    assert ff.spearman(np.array([1, 2, 3, 4]), np.array([2, 4, 6, 9])) == pytest.approx(1.0)
    assert np.isnan(ff.spearman(np.array([1, 1, 1]), np.array([1, 2, 3])))
    rhos = pd.DataFrame({"example_idx": [0, 1, 2, 0, 1, 2], "view": ["raw"] * 3 + ["flow"] * 3,
                         "importance": ["ablation"] * 6, "rho": [0.2, 0.4, np.nan, 0.5, 0.7, 0.9]})
    table = ff.summarise(rhos, confidence=0.95, resamples=200, seed=1)
    raw = table.set_index("view").loc["raw"]
    assert raw["n"] == 2 and raw["mean"] == pytest.approx(0.3) and raw["std"] == pytest.approx(np.std([0.2, 0.4], ddof=1))
    flow = table.set_index("view").loc["flow"]
    assert 0.5 <= flow["ci_low"] <= flow["mean"] <= flow["ci_high"] <= 0.9


def test_aopc_is_the_mean_drop_over_the_fractions_by_construction():
    model, tok = tiny("bert")
    model = model.double()
    try:
        enc = tok("the cat sat on the mat and the dog barked at it", return_tensors="pt", return_token_type_ids=True)
        ids, mask, tt = enc["input_ids"][0], enc["attention_mask"][0], enc["token_type_ids"][0]
        positions = np.arange(1, len(ids) - 1)                  # m = 12 ordinary tokens
        scores = np.zeros(len(ids))
        scores[positions] = np.arange(len(positions))[::-1]     # position 1 first, ..., the last one last
        order = ff.top_first(scores, positions)
        np.testing.assert_array_equal(order, positions)
        rep = ff.replacement_token_id(tok)
        got = ff.aopc(model, ids, mask, {"v": order, "w": order[::-1]}, rep, batch_size=3, token_type_ids=tt)
        with torch.no_grad():
            p = lambda x: torch.softmax(ff._forward(model, x[None], mask[None], tt[None]).logits.double(), -1)[0]
            base = p(ids)
            c = int(base.argmax())
            drops = []
            for k in (2, 3, 4, 5, 6):                           # ceil(0.1 * 12), ..., ceil(0.5 * 12)
                x = ids.clone()
                x[torch.as_tensor(order[:k].copy())] = rep
                drops.append(float(base[c] - p(x)[c]))
        assert got["v"] == pytest.approx(np.mean(drops), abs=1e-12)
        assert got["v"] != pytest.approx(got["w"], abs=1e-9)
    finally:
        model.float()


def test_top_first_puts_nan_last_and_breaks_ties_by_position():
    s = np.array([np.nan, 1.0, 3.0, 1.0, np.nan, 2.0])
    np.testing.assert_array_equal(ff.top_first(s, np.arange(6)), [2, 5, 1, 3, 0, 4])


def _one_at_a_time(model, x, jobs, rep):
    """The reference: every copy its own forward of batch 1, no padding."""
    with torch.no_grad():
        p = lambda ids: torch.softmax(ff._forward(model, ids[None], x.attention_mask[None], None if x.token_type_ids
                                                  is None else x.token_type_ids[None]).logits.double(), -1)[0]
        base = p(x.input_ids)
        c = int(base.argmax())
        out = []
        for pos in jobs:
            ids = x.input_ids.clone()
            ids[torch.as_tensor(np.asarray(pos))] = rep
            out.append(float(base[c] - p(ids)[c]))
    return np.array(out), c


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert"])
def test_batched_copies_of_several_examples_equal_one_at_a_time(arch):
    model, tok = tiny(arch)
    model = model.double()                                   # float64: batching changes rounding only, ~1e-16
    try:
        texts = [("the cat sat on the mat and the dog barked at it", "a dog"), ("a short one", None),
                 ("birds sing in the morning while the sun rises slowly", "and then they stop")]
        examples = []
        for a, b in texts:
            enc = tok(a, b, return_tensors="pt", return_token_type_ids=True)
            examples.append(ff.Example(enc["input_ids"][0], enc["attention_mask"][0], enc["token_type_ids"][0]))
        rep = ff.replacement_token_id(tok)
        jobs, want, classes = [], [], []
        for e, x in enumerate(examples):
            n = len(x.input_ids)
            mine = ff.ablation_jobs(e, np.arange(1, n - 1)) + [(e, np.array([2, 1, 3])), (e, np.array([1, 2, 3])),
                                                              (e, np.arange(1, n - 1))]
            jobs += mine
            drops, c = _one_at_a_time(model, x, [p for _, p in mine], rep)
            want.append(drops)
            classes.append(c)
        pad = tok.pad_token_id
        for max_tokens in (1, 40, 10_000):                  # 1: one copy a forward; 10_000: all in one padded batch
            got, cls = ff.masked_drops(model, examples, jobs, rep, max_tokens=max_tokens, pad_id=pad)
            np.testing.assert_allclose(got, np.concatenate(want), rtol=0, atol=1e-12)
            np.testing.assert_array_equal(cls, classes)
        assert np.abs(np.concatenate(want)).max() > 1e-4, "the copies change the prediction (the test can fail)"
        grads = ff.gradient_importances(model, examples, max_tokens=10_000, pad_id=pad)
        for x, g in zip(examples, grads):
            np.testing.assert_allclose(g, ff.gradient_importance(model, x.input_ids, x.attention_mask,
                                                                 token_type_ids=x.token_type_ids),
                                       rtol=0, atol=1e-12)
        # the single-example entry points are the same computation
        x = examples[0]
        positions = np.arange(1, len(x.input_ids) - 1)
        imp, c = ff.ablation_importance(model, x.input_ids, x.attention_mask, positions, rep, batch_size=4,
                                        token_type_ids=x.token_type_ids)
        np.testing.assert_allclose(imp[positions], want[0][:len(positions)], rtol=0, atol=1e-12)
        assert c == classes[0]
    finally:
        model.float()

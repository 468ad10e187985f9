"""The newer mixing views (bertology.norms.mixviews and the modules it runs: mixparts, alti_globenc, decompx,
value_zeroing): ALTI's and GlobEnc's per-token parts add up to the LN1 output, DecompX's to every layer's output and
to the logits, Value Zeroing's zeroed forward equals one built by hand, on tiny random float64 models of several
post-LN architectures; the arithmetic on cases known by construction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertology.norms import alti_globenc as ag
from bertology.norms import decompx as dx
from bertology.norms import mixparts as mp
from bertology.norms import mixviews as mv
from bertology.norms import value_zeroing as vz
from bertology.norms import values as nv
from bertology.norms.mixing import decompose
from bertology.pipeline.config import schema_section
from tests.builders.encoders import ARCHITECTURES
from tests.builders.norms import batch, tiny

POST_LN = tuple(a for a in ARCHITECTURES if a != "modernbert")
TOL = dict(rtol=1e-9, atol=1e-9)


def _forward(arch):
    model, tok = tiny(arch)
    model = model.double()
    inputs, lengths = batch(tok)
    parts = mp.layer_parts(model)
    head = mp.head_linears(model)
    with torch.no_grad(), nv.Capture(model, vectors=True) as cap, mp.PartsCapture(model, parts, head) as pc:
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
    return model, tok, inputs, lengths, parts, head, cap, pc, out


@pytest.mark.parametrize("arch", POST_LN)
def test_decompositions_add_up_to_what_the_model_computes(arch):
    model, tok, inputs, lengths, parts, head, cap, pc, out = _forward(arch)
    try:
        assert len(pc.head_of(0)[0]) >= 2, "a classifier's head: the pooler's (or dense) linear, the classifier"
        for row in range(2):
            n = int(lengths[row])
            X = torch.zeros(n, n, cap.residual[0].shape[-1], dtype=torch.float64)
            X[torch.arange(n), torch.arange(n)] = cap.residual[0][row, :n]
            for p in parts:
                i = p.block.index
                dec = decompose(out.attentions[i][row, :, :n, :n], nv.transformed_vectors(
                    p.block, cap.values[i][row:row + 1, :n])[0], cap.residual[i][row, :n], p.block.output.bias,
                    p.block.post_norm)
                # ALTI's and GlobEnc's T_i(x_j) plus what no token contributes = the LN1 output
                torch.testing.assert_close(dec.ln.sum(1) + dec.ln_rest, cap.sum_out[i][row, :n], **TOL)
                # DecompX: the parts of every layer's output add up to it (= the next layer's input, the hidden state)
                X, stages = dx.decompx_layer(p, X, out.attentions[i][row, :, :n, :n], cap.sum_in[i][row, :n],
                                             pc.z[i][row, :n], pc.a[i][row, :n], pc.ln2_in[i][row, :n])
                torch.testing.assert_close(stages["ln1"].sum(1), cap.sum_out[i][row, :n], **TOL)
                torch.testing.assert_close(stages["res2"].sum(1), pc.ln2_in[i][row, :n], **TOL)
                torch.testing.assert_close(X.sum(1), out.hidden_states[i + 1][row, :n], **TOL)
            logit_parts = dx.decompx_head(*pc.head_of(row)[:1], X[0], *pc.head_of(row)[1:], eps=1e-12)
            torch.testing.assert_close(logit_parts.sum(0), out.logits[row], **TOL)
    finally:
        model.float()


@pytest.mark.parametrize("arch", POST_LN)
def test_example_views_are_distributions_where_the_papers_normalise(arch):
    model, tok, inputs, lengths, parts, head, cap, pc, out = _forward(arch)
    try:
        n = int(lengths[1])
        one = {k: v[1:2, :n] for k, v in inputs.items()}
        seconds: dict[str, float] = {}
        ev = mv.example_views(model, parts, head, cap, pc, out.attentions, 1, n, out.logits[1], seconds, one)
        assert set(ev.scores) == set(mv.VIEWS) and set(seconds) == set(mv.VIEWS)
        for view in ("alti", "globenc", "value_zeroing"):
            s = ev.scores[view]
            assert s.shape == (n,) and (s >= 0).all()
            # GlobEnc rolls out the raw norms (the authors' code); the others normalise every layer's rows
            assert np.isclose(s.sum(), 1.0) != (view == "globenc")
            assert ev.layers[view].shape == (model.config.num_hidden_layers, n)
        # the normalised GlobEnc (analysis.mixing_views.globenc_rows) is a distribution, in the same order here
        normalised = mv.example_views(model, parts, head, cap, pc, out.attentions, 1, n, out.logits[1], {},
                                      options=schema_section("analysis.mixing_views", globenc_rows="normalised"))
        assert np.isclose(normalised.scores["globenc"].sum(), 1.0)
        np.testing.assert_allclose(normalised.layers["globenc"].sum(1), 1.0)
        # DecompX's parts of the predicted class add up to its logit
        assert ev.predicted == int(out.logits[1].argmax())
        assert np.isclose(ev.scores["decompx"].sum(), float(out.logits[1, ev.predicted]))
        # float64: the parts add up, to the share eps / (sum_j |<p_j, b>| + eps) of each bias the authors' eps loses
        assert ev.decompx_error < 1e-9
        exact = mv.example_views(model, parts, head, cap, pc, out.attentions, 1, n, out.logits[1], {},
                                 options=schema_section("analysis.mixing_views", decompx_epsilon=0.0))
        assert exact.decompx_error < 1e-12
    finally:
        model.float()


@pytest.mark.parametrize("method", ["subtract", "forward"])
@pytest.mark.parametrize("arch", POST_LN)
def test_value_zeroing_equals_a_hand_built_zeroed_forward(arch, method):
    model, tok = tiny(arch)
    model = model.double()
    try:
        inputs, lengths = batch(tok)
        n = int(lengths[1])
        one = {k: v[1:2, :n] for k, v in inputs.items()}
        parts = mp.layer_parts(model)
        got = vz.value_zeroing(model, parts, one, method)
        L = model.config.num_hidden_layers
        assert got.shape == (L, n, n)
        values = {id(p.block.value): p.block for p in parts}.values()
        with torch.no_grad():
            intact = model(**one, output_hidden_states=True).hidden_states
            for l in range(L):
                rows = []
                for j in range(n):
                    # by hand: the whole model on the example alone, token j's value vectors zeroed in layer l only
                    calls = {"k": 0}
                    handles = [b.value.register_forward_hook(
                        lambda m, a, o, l=l, j=j, b=b, calls=calls: _zero_at(b, o, j) if _tick(calls) == l else None) for b in values]
                    try:
                        zeroed = model(**one, output_hidden_states=True).hidden_states[l + 1][0]
                    finally:
                        for h in handles:
                            h.remove()
                    rows.append(1 - torch.nn.functional.cosine_similarity(zeroed, intact[l + 1][0], dim=-1))
                raw = torch.stack(rows, 1).clamp(min=0)                                   # (n_i, n_j)
                torch.testing.assert_close(got[l], raw / raw.sum(1, keepdim=True), **TOL)
    finally:
        model.float()


def _tick(calls):
    k = calls["k"]
    calls["k"] += 1
    return k


def _zero_at(block, output, j):
    out = output.clone()
    H, dh = block.heads, block.head_dim
    if block.layout == "blocks":
        out[0, j, 2 * H * dh:] = 0
    else:
        out[0, j, :H * dh] = 0
    return out


@pytest.mark.parametrize("model_type", ["albert", "mpnet", "xlm-roberta", "roformer"])
def test_decompx_adds_up_to_the_logits_on_other_post_ln_layouts(model_type):
    # ALBERT (one shared layer, a mapping before the layers), MPNet (its own attention wrapper), XLM-RoBERTa (head
    # registered before the encoder), RoFormer (rotary positions): the head is found from the call order
    from transformers import AutoModelForSequenceClassification

    from tests.builders.anyencoder import any_tokenizer, tiny_config

    tok, _ = any_tokenizer(model_type)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(tiny_config(model_type, tok),
                                                           attn_implementation="eager").eval().double()
    enc = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    inputs = dict(enc)
    n = int(enc["attention_mask"][1].sum())
    parts, head = mp.layer_parts(model), mp.head_linears(model)
    with torch.no_grad(), nv.Capture(model, vectors=True) as cap, mp.PartsCapture(model, parts, head) as pc:
        out = model(**inputs, output_attentions=True)
        ev = mv.example_views(model, parts, head, cap, pc, out.attentions, 1, n, out.logits[1], {},
                              {k: v[1:2, :n] for k, v in inputs.items()})
    assert ev.predicted == int(out.logits[1].argmax())
    assert ev.scores["decompx"].sum() == pytest.approx(float(out.logits[1, ev.predicted]), abs=1e-9)
    assert ev.layers["value_zeroing"].shape == (model.config.num_hidden_layers, n)


def test_a_pre_ln_model_gets_no_newer_views_and_says_why():
    model, _ = tiny("modernbert")
    with pytest.raises(mp.MixingViewsUnsupported, match="pre-LN"):
        mp.layer_parts(model)


def test_arithmetic_by_construction():
    # ALTI: a part equal to the whole output gets everything, a zero part nothing beyond what it leaves
    y = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    parts = torch.tensor([[[1.0, 2.0], [0.0, 0.0]]], dtype=torch.float64)        # (n=1, m=2, D=2)
    torch.testing.assert_close(ag.alti_matrix(parts, y), torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    # rollout without identity: a permutation twice is the identity
    p = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(ag.rollout(torch.stack([p, p])), torch.eye(2, dtype=torch.float64))
    # absdot: the bias goes to the parts in proportion to |<part, b>|, all of it
    parts = torch.tensor([[[1.0, 0.0], [0.0, 3.0]]], dtype=torch.float64)
    out = dx.split_bias(parts, torch.tensor([1.0, 1.0], dtype=torch.float64), eps=1e-12)
    torch.testing.assert_close(out.sum(1), parts.sum(1) + 1.0)
    torch.testing.assert_close(out[0, 0] - parts[0, 0], torch.tensor([0.25, 0.25], dtype=torch.float64))
    # a bias orthogonal to every part: the authors' eps drops it, exact division (eps = 0) splits it equally
    orth = torch.tensor([[[0.0, 1.0], [0.0, 2.0]]], dtype=torch.float64)
    out = dx.split_bias(orth, torch.tensor([1.0, 0.0], dtype=torch.float64), eps=1e-12)
    torch.testing.assert_close(out, orth)
    out = dx.split_bias(orth, torch.tensor([1.0, 0.0], dtype=torch.float64), eps=0.0)
    torch.testing.assert_close(out[0, :, 0], torch.tensor([0.5, 0.5], dtype=torch.float64))
    # value zeroing: a row whose output does not move stays 0, the others are distributions
    intact = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    zeroed = torch.stack([torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])]).double()
    c = vz.cosine_distance_matrix(intact, zeroed)
    torch.testing.assert_close(c[0], torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(c[1], torch.tensor([1.0, 0.0], dtype=torch.float64))


@pytest.mark.parametrize("arch", POST_LN)
@pytest.mark.parametrize("chunk", [1, 1 << 20])
def test_alti_and_globenc_by_blocks_equal_their_definitions(arch, chunk):
    # alti_globenc_layer (rows in blocks, GlobEnc from Gram matrices) = alti_matrix and globenc_matrix of the whole
    # LN1 decomposition, in both GlobEnc row modes; chunk 1: one row at a time
    model, tok, inputs, lengths, parts, head, cap, pc, out = _forward(arch)
    try:
        for row in range(2):
            n = int(lengths[row])
            for p in parts:
                i = p.block.index
                args = (out.attentions[i][row, :, :n, :n], nv.transformed_vectors(
                    p.block, cap.values[i][row:row + 1, :n])[0], cap.residual[i][row, :n], p.block.output.bias)
                dec = decompose(*args, p.block.post_norm)
                ln2_in = pc.ln2_in[i][row, :n]
                for rows in ("raw", "normalised"):
                    a, g = ag.alti_globenc_layer(*args, p.block.post_norm, cap.sum_out[i][row, :n], p.final_norm,
                                                 ln2_in, rows, chunk_elements=chunk)
                    torch.testing.assert_close(a, ag.alti_matrix(dec.ln, cap.sum_out[i][row, :n]), rtol=1e-12,
                                               atol=1e-12)
                    torch.testing.assert_close(g, ag.globenc_matrix(dec.ln, p.final_norm, ln2_in, rows),
                                               rtol=1e-10, atol=1e-12)
    finally:
        model.float()

"""The newer mixing views (bertology.norms.mixviews): ALTI's and GlobEnc's per-token parts add up to the LN1 output,
DecompX's to every layer's output and to the logits, Value Zeroing's zeroed forward equals one built by hand, on
tiny random float64 models of several post-LN architectures; the arithmetic on cases known by construction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertology.norms import mixviews as mv
from bertology.norms import values as nv
from bertology.norms.mixing import decompose
from tests.builders.encoders import ARCHITECTURES
from tests.builders.norms import batch, tiny

POST_LN = tuple(a for a in ARCHITECTURES if a != "modernbert")
TOL = dict(rtol=1e-9, atol=1e-9)


def _forward(arch):
    model, tok = tiny(arch)
    model = model.double()
    inputs, lengths = batch(tok, model)
    parts = mv.layer_parts(model)
    head = mv.head_linears(model)
    with torch.no_grad(), nv.Capture(model, vectors=True) as cap, mv.PartsCapture(model, parts, head) as pc:
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
    return model, tok, inputs, lengths, parts, head, cap, pc, out


@pytest.mark.parametrize("arch", POST_LN)
def test_decompositions_add_up_to_what_the_model_computes(arch):
    model, tok, inputs, lengths, parts, head, cap, pc, out = _forward(arch)
    try:
        assert head, "a classifier has a head"
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
                X, stages = mv.decompx_layer(p, X, out.attentions[i][row, :, :n, :n], cap.sum_in[i][row, :n],
                                             pc.z[i][row, :n], pc.a[i][row, :n], pc.ln2_in[i][row, :n])
                torch.testing.assert_close(stages["ln1"].sum(1), cap.sum_out[i][row, :n], **TOL)
                torch.testing.assert_close(stages["res2"].sum(1), pc.ln2_in[i][row, :n], **TOL)
                torch.testing.assert_close(X.sum(1), out.hidden_states[i + 1][row, :n], **TOL)
            logit_parts = mv.decompx_head(head, X[0], [t[row] for t in pc.head_in], [t[row] for t in pc.head_out])
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
            assert s.shape == (n,) and (s >= 0).all() and np.isclose(s.sum(), 1.0)
            assert ev.layers[view].shape == (model.config.num_hidden_layers, n)
        # DecompX's parts of the predicted class add up to its logit
        assert ev.predicted == int(out.logits[1].argmax())
        assert np.isclose(ev.scores["decompx"].sum(), float(out.logits[1, ev.predicted]))
    finally:
        model.float()


@pytest.mark.parametrize("arch", POST_LN)
def test_value_zeroing_equals_a_hand_built_zeroed_forward(arch):
    model, tok = tiny(arch)
    model = model.double()
    try:
        inputs, lengths = batch(tok, model)
        n = int(lengths[1])
        one = {k: v[1:2, :n] for k, v in inputs.items()}
        parts = mv.layer_parts(model)
        got = mv.value_zeroing(model, parts, one)
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
                        lambda m, a, o, l=l, j=j, b=b: _zero_at(b, o, j) if _tick(calls) == l else None) for b in values]
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

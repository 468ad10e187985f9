"""Context mixing (bertology.norms.mixing): the decomposition adds back up to the layer's own output, on tiny
random models of every architecture; the ratios on cases known by construction."""

from __future__ import annotations

import pytest
import torch

from bertology.norms import mixing as mx
from bertology.norms import values as nv
from tests.builders.encoders import ARCHITECTURES
from tests.builders.norms import batch, tiny


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_decomposition_adds_up_to_the_layer_output(arch):
    model, tok = tiny(arch)
    if arch != "modernbert":  # transformers' ModernBERT gives NaN in float64 (its sliding-window mask)
        model = model.double()
    tol = dict(rtol=1e-9, atol=1e-9) if arch != "modernbert" else dict(rtol=1e-4, atol=1e-5)
    try:
        inputs, lengths = batch(tok)
        with torch.no_grad(), nv.Capture(model, vectors=True) as cap:
            out = model(**inputs, output_attentions=True)
        for block in cap.blocks:
            for row in range(2):
                n = int(lengths[row])
                dec = mx.example_decomposition(cap, block, out.attentions[block.index], row, n)
                # attention + residual (+ b_O) = the input of the post-LayerNorm, or x + attention in a pre-LN layer
                torch.testing.assert_close(dec.attnres.sum(1) + dec.bias, cap.sum_in[block.index][row, :n].double(),
                                           **tol)
                if block.post_norm is None:
                    assert arch == "modernbert" and dec.ln is None
                else:
                    torch.testing.assert_close(dec.ln.sum(1) + dec.ln_rest, cap.sum_out[block.index][row, :n].double(),
                                               **tol)
        ratios = mx.mixing_ratios(cap, out.attentions, lengths)
        L = model.config.num_hidden_layers
        assert ratios.shape == (2, L, len(mx.MEASURES), inputs["input_ids"].shape[1])
        n1 = int(lengths[1])
        assert torch.isnan(ratios[1, :, :, n1:]).all()
        finite = ratios[0, :, : (4 if arch == "modernbert" else 5)]
        assert ((finite >= 0) & (finite <= 1)).all()
    finally:
        model.float()


def test_ratios_by_construction():
    # identity attention: nothing is mixed in
    H, n, D = 2, 3, 4
    rng = torch.Generator().manual_seed(0)
    f = torch.randn(H, n, D, generator=rng, dtype=torch.float64)
    x = torch.randn(n, D, generator=rng, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.float64).expand(H, n, n)
    dec = mx.decompose(eye, f, x, None, torch.nn.LayerNorm(D).double())
    r = mx.layer_ratios(eye, dec)
    torch.testing.assert_close(r, torch.zeros(len(mx.MEASURES), n, dtype=torch.float64))
    # one head attending only to the other token with a vector as long as the residual: attention mixes all,
    # attention + residual half (the two vectors have the same norm)
    alpha = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]], dtype=torch.float64)
    f = torch.tensor([[[0.0, 2.0], [3.0, 0.0]]], dtype=torch.float64)     # f(x_0) = (0, 2), f(x_1) = (3, 0)
    x = torch.tensor([[3.0, 0.0], [0.0, 2.0]], dtype=torch.float64)        # ||x_0|| = 3 = ||f(x_1)||
    dec = mx.decompose(alpha, f, x, None, None)
    r = mx.layer_ratios(alpha, dec)
    torch.testing.assert_close(r[mx.MEASURES.index("attn_n")], torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(r[mx.MEASURES.index("attnres_n")], torch.full((2,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(r[mx.MEASURES.index("attn_w")], torch.ones(2, dtype=torch.float64))
    assert torch.isnan(r[mx.MEASURES.index("attnresln_n")]).all()


@pytest.mark.parametrize("layout", ["post_ln", "pre_ln", "unrecognised"])
def test_ratios_from_row_sums_equal_the_decomposition(layout):
    # layer_ratios_fast (row sums and own parts) = layer_ratios of the whole (n, n, D) decomposition
    H, n, D = 3, 6, 8
    rng = torch.Generator().manual_seed(1)
    alpha = torch.softmax(torch.randn(H, n, n, generator=rng, dtype=torch.float64), -1)
    f = torch.randn(H, n, D, generator=rng, dtype=torch.float64)
    x = torch.randn(n, D, generator=rng, dtype=torch.float64)
    b = torch.randn(D, generator=rng, dtype=torch.float64)
    norm = torch.nn.LayerNorm(D).double()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(D, generator=rng, dtype=torch.float64))
    norm = norm if layout == "post_ln" else None
    dec = mx.decompose(alpha, f, x, b, norm)
    want = mx.layer_ratios(alpha, dec)
    if layout == "unrecognised":
        want[3:] = float("nan")
    got = mx.layer_ratios_fast(alpha, f, None if layout == "unrecognised" else x, b, norm)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert got[4].isnan().all() == (layout != "post_ln")

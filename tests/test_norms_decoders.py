"""The norm family on decoders (docs/reference.md#value-norms, #decoders): value norms of grouped key/value heads and
GPT-2's Conv1D against a direct computation from the weights named here per architecture, the pre-norm residual
layout, Value Zeroing against zeroed forwards built by hand, the views' target (the classified last token) and
faithfulness's deletion of tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertology.norms import values as nv

_MODELS: dict = {}


def tiny_decoder(model_type: str, kv_heads: int | None = None):
    """(eval classifier, tokenizer) of a tiny random decoder (tests/builders/decoders.py: hidden 32, 4 query heads,
    2 layers); kv_heads overrides its key/value heads."""
    key = (model_type, kv_heads)
    if key not in _MODELS:
        from transformers import AutoModelForSequenceClassification

        from bertology.models.loading import prepare_decoder_tokenizer
        from tests.builders.decoders import decoder_config, decoder_tokenizer

        tok = decoder_tokenizer("gpt2" if model_type == "gpt2" else "llama")
        config = decoder_config(model_type, tok)
        if kv_heads is not None:
            config.num_key_value_heads = kv_heads
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
        with torch.no_grad():                          # biases random where the projections have them
            for p in model.parameters():
                if p.ndim == 1 and float(p.abs().sum()) == 0:
                    p.normal_(0.0, 0.3)
        _MODELS[key] = (model.eval(), prepare_decoder_tokenizer(tok))
    return _MODELS[key]


def padded_batch(tok):
    texts = ["the cat sat on the mat , and the dog barked at it .", "a short one ."]
    enc = tok(texts, padding=True, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}, enc["attention_mask"].sum(1)


def reference(model_type: str, layer, D: int):
    """(W_V (KV*dh, D), b_V or None, W_O (D, H*dh), the attention's input from the layer's input) by each
    architecture's own attribute names (GPT-2's Conv1D holds (in, out) weights: transposed here)."""
    if model_type == "gpt2":
        a = layer.attn
        return a.c_attn.weight[:, 2 * D:].T, a.c_attn.bias[2 * D:], a.c_proj.weight.T, layer.ln_1
    a = layer.self_attn
    return a.v_proj.weight, a.v_proj.bias, a.o_proj.weight, layer.input_layernorm


CASES = [("llama", 2), ("llama", 4), ("llama", 1), ("qwen2", 2), ("gpt2", None)]


@pytest.mark.parametrize("model_type,kv", CASES)
def test_decoder_value_norms_equal_a_direct_computation_from_the_weights(model_type, kv):
    """||f_h(x_j)|| = ||v_j^{g(h)} W_O^h^T||, g(h) = h // (H / KV): query head h's columns of W_O on its key/value
    group's value vector; and the heads' context vectors (W_O's input) are alpha_h v^{g(h)} in that order."""
    model, tok = tiny_decoder(model_type, kv)
    inputs, lengths = padded_batch(tok)
    ctx: list[torch.Tensor] = []
    blocks = nv.attention_blocks(model)
    handles = [b.output.register_forward_hook(lambda m, a, o: ctx.append(a[0])) for b in blocks]
    try:
        with torch.no_grad(), nv.Capture(model) as cap:
            out = model(**inputs, output_attentions=True, output_hidden_states=True)
            norms = cap.value_norms(lengths)
    finally:
        for h in handles:
            h.remove()
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    KV = kv or H
    assert [b.groups for b in blocks] == [KV] * L
    B, T = inputs["input_ids"].shape
    assert norms.shape == (B, L, H, T) and int(lengths.min()) < T
    D = out.hidden_states[0].shape[-1]
    dh = D // H
    layers = model.base_model.h if model_type == "gpt2" else model.base_model.layers
    for l, layer in enumerate(layers):
        wv, bv, wo, pre = reference(model_type, layer, D)
        with torch.no_grad():
            v = pre(out.hidden_states[l]) @ wv.T + (0 if bv is None else bv)                # (B, T, KV*dh)
            for h in range(H):
                g = h // (H // KV)
                vg = v[..., g * dh:(g + 1) * dh]
                want = (vg @ wo[:, h * dh:(h + 1) * dh].T).norm(dim=-1)
                context = out.attentions[l][:, h] @ vg                                       # (B, T, dh)
                for b in range(B):
                    n = int(lengths[b])
                    torch.testing.assert_close(norms[b, l, h, :n], want[b, :n], rtol=1e-4, atol=1e-5)
                    assert torch.isnan(norms[b, l, h, n:]).all()
                    torch.testing.assert_close(context[b, :n], ctx[l][b, :n, h * dh:(h + 1) * dh], rtol=1e-4,
                                               atol=1e-5)
    assert (norms[0] > 0).all()


def test_a_pre_norm_decoder_gets_the_residual_measures_and_its_sum_is_the_models_own():
    """Llama's post_attention_layernorm reads x + attention: the decomposition's rows add up to its input; no post-LN
    measure (attnresln_n NaN); GPT-2 (ln_1/ln_2 names not read) gets the attention measures only."""
    from bertology.norms import mixing as mx

    model, tok = tiny_decoder("llama", 2)
    inputs, lengths = padded_batch(tok)
    blocks = nv.attention_blocks(model)
    assert all(b.residual_sum is b.layer.post_attention_layernorm and b.post_norm is None for b in blocks)
    with torch.no_grad(), nv.Capture(model, vectors=True) as cap:
        out = model(**inputs, output_attentions=True)
        ratios = mx.mixing_ratios(cap, out.attentions, lengths)
        for b in blocks:
            for row, n in enumerate(lengths.tolist()):
                dec = mx.example_decomposition(cap, b, out.attentions[b.index], row, n)
                torch.testing.assert_close(dec.attnres.sum(1) + dec.bias, cap.sum_in[b.index][row, :n].double(),
                                           rtol=1e-5, atol=1e-5)
    n = int(lengths[0])
    assert torch.isfinite(ratios[0, :, :4, :n]).all() and torch.isnan(ratios[0, :, 4]).all()
    gpt2, _ = tiny_decoder("gpt2")
    assert all(b.layer is None and b.enclosing is not None for b in nv.attention_blocks(gpt2))


def test_the_decoder_capability_says_value_norms_run(tmp_path):
    from tests.builders.decoders import build_decoder

    path = build_decoder("llama", tmp_path / "llama", style="llama")
    assert nv.norms_unsupported(str(path)) is None


@pytest.mark.parametrize("method", ["subtract", "forward"])
def test_value_zeroing_on_a_grouped_query_decoder_equals_zeroed_forwards_by_hand(method):
    """Zeroing token j's value in layer l (its key/value vector, so for every query head of each group): 1 - cos of
    the layer's output from n whole-model forwards with v_proj's output zeroed at j, rows normalised to sum 1,
    against value_zeroing's matrices."""
    from bertology.norms import value_zeroing as vz

    model, tok = tiny_decoder("llama", 2)
    ids = tok("the cat sat on the mat .", return_tensors="pt")["input_ids"]
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    blocks = vz.zeroing_blocks(model)
    got = vz.value_zeroing(model, blocks, inputs, method=method)
    n = ids.shape[1]
    layers = model.base_model.layers
    with torch.no_grad():
        intact = model(**inputs, output_hidden_states=True).hidden_states
        for l, layer in enumerate(layers):
            want = torch.zeros(n, n, dtype=torch.float64)
            for j in range(n):
                def zero(module, args, output, j=j):
                    output = output.clone()
                    output[:, j] = 0
                    return output
                h = layer.self_attn.v_proj.register_forward_hook(zero)
                try:
                    zeroed = model(**inputs, output_hidden_states=True).hidden_states[l + 1]
                finally:
                    h.remove()
                want[:, j] = 1 - torch.nn.functional.cosine_similarity(
                    intact[l + 1][0].double(), zeroed[0].double(), dim=-1)
            if l == len(layers) - 1:      # the last hidden state is after the final norm: compare before it
                continue
            want = want.clamp(min=0)
            torch.testing.assert_close(got[l].double(), want / want.sum(1, keepdim=True), rtol=1e-4, atol=1e-6)
    assert torch.triu(got, diagonal=1).abs().max() < 1e-6, "a causal layer: token j changes no earlier output"


def test_the_views_of_a_decoder_read_its_last_token_and_faithfulness_deletes():
    import pandas as pd

    from bertology.norms import faithful as ff
    from bertology.norms.analysis import run_faithfulness, run_views, view_target

    model, tok = tiny_decoder("llama", 2)
    assert view_target(model, 7) == 6
    frame = pd.DataFrame({"idx": [0, 1, 2], "text_a": ["the cat sat on the mat .", "a dog barked at it .",
                                                        "one two three four five"], "text_b": [None] * 3,
                          "label": [0, 1, 0]})
    res = run_views(model, tok, frame, max_length=32, batch_size=2, flow_examples=None, mixing_examples=None)
    assert {"raw", "norm", "rollout", "flow", "value_zeroing", "alti", "alti_logit", "globenc"} <= \
        set(res.scores["method"])
    assert "pre-norm" in res.mixing_note
    for _, g in res.scores[res.scores["method"].isin(["rollout", "flow", "value_zeroing"])].groupby(
            ["example_idx", "method"]):
        assert np.isclose(g["score"].sum(), 1.0) and (g["score"] > 0).sum() > 1      # the last row spreads
    assert set(res.mixing["measure"]) == {"attn_w", "attn_n", "attnres_w", "attnres_n"}
    assert ff.replacement_token_id(tok, model) == ff.DELETE
    ids = tok("the cat sat on the mat .", return_tensors="pt")["input_ids"][0]
    x = ff.Example(ids, torch.ones_like(ids))
    drops, classes = ff.masked_drops(model, [x], [(0, np.array([2, 4]))], ff.DELETE, max_tokens=64)
    keep = torch.ones(len(ids), dtype=torch.bool)
    keep[[2, 4]] = False
    with torch.no_grad():
        p = torch.softmax(model(input_ids=ids[None]).logits.double(), -1)[0]
        q = torch.softmax(model(input_ids=ids[keep][None]).logits.double(), -1)[0]
    assert np.isclose(drops[0], float(p[classes[0]] - q[classes[0]]), atol=1e-6)
    faith = run_faithfulness(model, tok, frame, res.scores, max_length=32, batch_size=2, confidence=0.9,
                             resamples=50, seed=0)
    assert faith.examples == 3 and {"ablation", "gradient", "aopc"} <= set(faith.table["importance"])
    grads = faith.importance[faith.importance["method"] == "gradient"]["score"]
    assert np.isfinite(grads).all() and (grads != 0).any()

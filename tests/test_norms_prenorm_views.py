"""GlobEnc and DecompX on pre-norm layers (bertology.norms.globenc_prenorm, decompx_prenorm and
mixviews.prenorm_example_views), on tiny random float64 models with every bias and norm parameter random:

- the parts add up to what the model computes: GlobEnc's T_i(x_j) plus b_O to the residual sum x + attention (GPT-2,
  OPT, BLOOM, Llama, Qwen2, ModernBERT); DecompX's to every layer's output, the final norm's output and the logits
  (GPT-2, OPT, BLOOM: exactly with decompx_epsilon 0, to the authors' epsilon otherwise);
- both equal a re-implementation of the authors' arithmetic written here from their code (GlobEnc:
  mohsenfayyaz/GlobEnc `modeling_bert.py`'s norms of the attention + residual parts, rolled out raw; DecompX:
  mohsenfayyaz/DecompX `modeling_bert.py`'s `bias_decomposer` absdot, `ln_decomposer`, `GeLU_ZO`,
  the first layer's real value vectors, the attention + residual bias split) in the pre-norm order, from the
  models' own modules by name, to 1e-9 relative with the same token ranking;
- a gated MLP (Llama, Qwen2, ModernBERT) is left out of DecompX with its reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import rankdata

from bertology.norms import decompx_prenorm as dp
from bertology.norms import mixviews as mv
from bertology.norms import prenorm as pn
from bertology.norms import values as nv
from bertology.pipeline.config import schema_section

PLAIN = ("gpt2", "opt", "bloom")
GATED = ("llama", "qwen2", "modernbert")
TEXT = "the cat sat on the mat , and the dog barked at it ."
REL = 1e-9


def _randomise(model) -> None:
    """Every 1-d parameter (biases, norm weights) random, in place."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                centre = 1.0 if name.endswith("weight") else 0.0
                p.copy_(centre + 0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def build(family: str):
    """(float64 classifier, tokenizer) of a tiny random `family` with random biases and norm parameters."""
    import transformers as tf

    if family == "modernbert":
        from tests.builders.encoders import model_config, tokenizer_for

        tok = tokenizer_for("modernbert")
        config = model_config("modernbert", tok, layers=3)
    else:
        from tests.builders.decoders import decoder_config, decoder_tokenizer

        tok = decoder_tokenizer("gpt2")
        config = decoder_config(family, tok, layers=3)
    torch.manual_seed(0)
    model = tf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval().double()
    _randomise(model)
    return model, tok


_BUILT: dict[str, tuple] = {}


def run(family: str, options=None):
    """The model, its pre-norm parts, one unpadded example's forward (hidden states, attentions) and bertology's
    views of it, at the classified position."""
    if family not in _BUILT:
        _BUILT[family] = build(family)
    model, tok = _BUILT[family]
    ids = tok([TEXT], return_tensors="pt")["input_ids"]
    n = ids.shape[1]
    target = 0 if family == "modernbert" else n - 1
    parts = pn.prenorm_parts(model)
    with torch.no_grad(), nv.Capture(model, vectors=True, norms=False) as cap, \
            pn.PreNormCapture(model, parts, pn.head_candidates(model, parts)) as pc:
        out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
        ev = mv.prenorm_example_views(model, parts, cap, pc, out.attentions, 0, n, out.logits[0], {}, target,
                                      options, decompx=dp.gated_reason(parts) is None)
    return model, parts, ids, out, pc, cap, ev, target


def _same(got: np.ndarray, ref: torch.Tensor) -> None:
    ref = ref.detach().double().numpy()
    assert got.shape == ref.shape
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err <= REL, f"max relative difference {err:.3g}"
    assert (rankdata(got) == rankdata(ref)).all(), "the ranking of tokens differs"


# ------------------------------------------------------------------------------- the models' modules, by name

FAMILY = {
    "gpt2": dict(layers="transformer.h", ln1="ln_1", ln2="ln_2", qkv="attn.c_attn", out="attn.c_proj", up="mlp.c_fc",
                 act="mlp.act", down="mlp.c_proj", final="transformer.ln_f"),
    "opt": dict(layers="model.decoder.layers", ln1="self_attn_layer_norm", ln2="final_layer_norm", v="self_attn.v_proj",
                out="self_attn.out_proj", up="fc1", act="activation_fn", down="fc2",
                final="model.decoder.final_layer_norm"),
    "bloom": dict(layers="transformer.h", ln1="input_layernorm", ln2="post_attention_layernorm",
                  qkv="self_attention.query_key_value", out="self_attention.dense", up="mlp.dense_h_to_4h",
                  act="mlp.gelu_impl", down="mlp.dense_4h_to_h", final="transformer.ln_f"),
    "llama": dict(layers="model.layers", ln2="post_attention_layernorm", v="self_attn.v_proj", out="self_attn.o_proj"),
    "qwen2": dict(layers="model.layers", ln2="post_attention_layernorm", v="self_attn.v_proj", out="self_attn.o_proj"),
    "modernbert": dict(layers="model.layers", ln2="mlp_norm", qkv="attn.Wqkv", out="attn.Wo"),
}


def _value_rows(family: str, model, lin_out: torch.Tensor) -> torch.Tensor:
    """The value vectors (n, KV, dh) from the value (or fused query-key-value) linear's output (n, *), as each
    model's own attention splits it."""
    c = model.config
    H = c.num_attention_heads
    D = c.hidden_size
    dh = D // H
    if family == "bloom":                                        # per head [q_h k_h v_h]
        return lin_out.view(-1, H, 3, dh)[:, :, 2]
    if family in ("gpt2", "modernbert"):                         # [q | k | v]
        return lin_out[:, 2 * D:].reshape(-1, H, dh)
    return lin_out.reshape(-1, getattr(c, "num_key_value_heads", None) or H, dh)


def _value_weight(family: str, model, layer) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_V (D, H*dh) as x W_V, b_V (H*dh,)) of a plain-MLP family's layer."""
    f = FAMILY[family]
    D, H = model.config.hidden_size, model.config.num_attention_heads
    dh = D // H
    if family == "gpt2":                                         # Conv1D: (in, out)
        m = layer.get_submodule(f["qkv"])
        return m.weight[:, 2 * D:], m.bias[2 * D:]
    if family == "bloom":
        m = layer.get_submodule(f["qkv"])
        return m.weight.view(H, 3, dh, D)[:, 2].reshape(H * dh, D).T, m.bias.view(H, 3, dh)[:, 2].reshape(-1)
    m = layer.get_submodule(f["v"])
    return m.weight.T, m.bias


def _out_weight(family: str, layer) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(W_O (H*dh, D) as a W_O, b_O)."""
    m = layer.get_submodule(FAMILY[family]["out"])
    return (m.weight if family == "gpt2" else m.weight.T), m.bias


def _hooked(model, family: str, ids):
    """One forward with the tensors the authors' code reads, by module name: per layer the value linear's output,
    the MLP norm's input (the residual sum), the MLP's pre-activation and activation; the final norm's input."""
    f = FAMILY[family]
    layers = model.get_submodule(f["layers"])
    got: dict[str, torch.Tensor] = {}
    names = {}
    for l, layer in enumerate(layers):
        names[f"v{l}"] = (layer.get_submodule(f.get("qkv", f.get("v"))), "out")
        names[f"r{l}"] = (layer.get_submodule(f["ln2"]), "in")
        if "up" in f:
            names[f"z{l}"] = (layer.get_submodule(f["up"]), "out")
            names[f"a{l}"] = (layer.get_submodule(f["act"]), "out")
    if "final" in f:
        names["final"] = (model.get_submodule(f["final"]), "in")

    def keep(key, which):
        def hook(mod, args, output):
            t = args[0] if which == "in" else output
            got[key] = t.reshape(-1, t.shape[-1])                 # (n, *): OPT's MLP runs on (B*T, *)
        return hook

    handles = [m.register_forward_hook(keep(k, w)) for k, (m, w) in names.items()]
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return out, got, layers


# ------------------------------------------------------------------------------------------------ the references

def _rollout(mats):
    joint = mats[0]
    for m in mats[1:]:
        joint = m @ joint
    return joint


def _attention_parts(alpha, values, wo, H):
    """sum_h alpha_h[i, k] values[k, (j,) h] W_O^h: alpha (H, n, n), values (n, H, dh) or (n, m, H, dh),
    wo (H*dh, D) -> (n, n, D) or (n, m, D)."""
    dh = wo.shape[0] // H
    woh = wo.reshape(H, dh, -1)
    if values.dim() == 3:
        transformed = torch.einsum("shv,hvd->hsd", values, woh)
        return torch.einsum("hks,hsd->ksd", alpha, transformed)
    transformed = torch.einsum("sqhv,hvd->hsqd", values, woh)
    return torch.einsum("hks,hsqd->kqd", alpha, transformed)


@torch.no_grad()
def ref_globenc(family: str, model, ids, target: int):
    """GlobEnc's N_Enc norms of the attention + residual parts of each layer's input tokens (the value vectors as
    the model's linear gives them, b_O left out), rolled out raw; and the largest relative gap between the parts
    plus b_O and the model's real residual sum."""
    out, got, layers = _hooked(model, family, ids)
    H = model.config.num_attention_heads
    mats, gap = [], 0.0
    for l, layer in enumerate(layers):
        x = out.hidden_states[l][0]
        n = x.shape[0]
        v = _value_rows(family, model, got[f"v{l}"])
        v = v.repeat_interleave(H // v.shape[1], dim=1)                         # repeat_kv
        wo, bo = _out_weight(family, layer)
        parts = _attention_parts(out.attentions[l][0], v, wo, H) + torch.einsum("sk,sd->skd", torch.eye(n), x)
        real = got[f"r{l}"]
        gap = max(gap, float((parts.sum(1) + (0 if bo is None else bo) - real).abs().max() / real.abs().max()))
        mats.append(parts.norm(dim=-1))
    return _rollout(mats)[target], gap


def _decompose_bias(bias, parts, eps):
    """The authors' `bias_decomposer` ("absdot"); eps = 0: exact shares, equal ones where all products are 0."""
    if bias is None:
        return parts
    w = torch.einsum("...kd,...d->...k", parts, bias).abs()
    s = w.sum(-1, keepdim=True)
    w = w / (s + eps) if eps else torch.where(s > 0, w / s, torch.full_like(w, 1.0 / w.shape[-1]))
    return parts + w[..., None] * bias[..., None, :]


def _ln_decompose(parts, pre, norm, eps):
    """The authors' `ln_decomposer`: parts (n, m, D) of the real input pre (n, D)."""
    var = (pre - pre.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True)[:, :, None]
    post = (parts - parts.mean(-1, keepdim=True)) / (var + norm.eps) ** 0.5 * norm.weight
    return _decompose_bias(norm.bias, post, eps)


def _slope(pre, post, eps):
    return post / (pre + eps) if eps else torch.where(pre != 0, post / pre, torch.zeros_like(pre))


def _w(module):
    """A linear's weight as x W (Conv1D stores it so; Linear transposed)."""
    return module.weight if type(module).__name__ == "Conv1D" else module.weight.T


@torch.no_grad()
def ref_decompx(family: str, model, ids, target: int, eps=1e-12, row_sums=True):
    """DecompX of a pre-norm layer stack in the authors' arithmetic: per layer LN1 by `ln_decomposer` on the
    layer's input parts; the first layer's real value vectors (b_V inside), later layers' decomposed values with
    the bias W_O b_V + b_O; the attention + residual parts' bias split (the authors' code); LN2 by `ln_decomposer`;
    the FFN with `GeLU_ZO`; + the residual; the final LayerNorm and the score linear at the target -> the predicted
    class's part of each token, (n,), and the parts of all logits (n, C).

    row_sums: the value bias as the attention writes it, sum_k alpha_h[i, k] b_V^h W_O^h (bertology's; the
    authors' W_O b_V assumes rows summing to 1, which a float32 softmax rounds)."""
    f = FAMILY[family]
    out, got, layers = _hooked(model, family, ids)
    H = model.config.num_attention_heads
    X = None
    for l, layer in enumerate(layers):
        x = out.hidden_states[l][0]
        n, D = x.shape
        alpha = out.attentions[l][0]
        wo, bo = _out_weight(family, layer)
        ln1, ln2 = layer.get_submodule(f["ln1"]), layer.get_submodule(f["ln2"])
        if X is None:                                                    # the first layer: the real value vectors
            X = torch.einsum("sk,sd->skd", torch.eye(n, dtype=x.dtype), x)
            attn, bias = _attention_parts(alpha, _value_rows(family, model, got[f"v{l}"]), wo, H), bo
        else:
            wv, bv = _value_weight(family, model, layer)
            post_ln1 = _ln_decompose(X, x, ln1, eps)
            dec_values = (post_ln1 @ wv).view(n, n, H, -1)
            attn = _attention_parts(alpha, dec_values, wo, H)
            bvo = torch.einsum("hv,hvd->hd", bv.view(H, -1), wo.reshape(H, -1, D))            # (H, D)
            bias = (alpha.sum(-1).T @ bvo if row_sums else bvo.sum(0)) + bo
        res1 = _decompose_bias(bias, attn + X, eps)
        post_ln2 = _ln_decompose(res1, got[f"r{l}"], ln2, eps)
        up, down = layer.get_submodule(f["up"]), layer.get_submodule(f["down"])
        first = _decompose_bias(up.bias, post_ln2 @ _w(up), eps)
        act = first * _slope(got[f"z{l}"], got[f"a{l}"], eps)[:, None, :]
        X = res1 + _decompose_bias(down.bias, act @ _w(down), eps)
    final = _ln_decompose(X[target:target + 1], got["final"][target:target + 1], model.get_submodule(f["final"]), eps)
    logits = _decompose_bias(model.score.bias, final[0] @ model.score.weight.T, eps)              # (n, C)
    return logits[:, int(out.logits[0].argmax())], logits


# ------------------------------------------------------------------------------------------------------ the tests

@pytest.mark.parametrize("family", PLAIN + GATED)
def test_globenc_equals_its_authors_and_its_parts_add_up(family):
    model, parts, ids, out, pc, cap, ev, target = run(family)
    ref, gap = ref_globenc(family, model, ids, target)
    assert gap < 1e-12, "the attention + residual parts plus b_O are the model's residual sum"
    _same(ev.scores["globenc"], ref)
    assert ev.layers["globenc"].shape == (len(parts.layers), ids.shape[1])


@pytest.mark.parametrize("family", PLAIN)
def test_decompx_equals_its_authors(family):
    model, parts, ids, out, pc, cap, ev, target = run(family)
    ref, logit_parts = ref_decompx(family, model, ids, target)
    _same(ev.scores["decompx"], ref)
    assert ev.predicted == int(out.logits[0].argmax())
    torch.testing.assert_close(logit_parts.sum(0), out.logits[0], rtol=1e-9, atol=1e-9)
    # the authors' W_O b_V (rows summing to 1) departs from the row sums' by the softmax's rounding alone
    authors, _ = ref_decompx(family, model, ids, target, row_sums=False)
    rows_off = max(float((a[0].sum(-1) - 1).abs().max()) for a in out.attentions)
    assert float((authors - ref).abs().max() / ref.abs().max()) <= max(1e-9, 1e3 * rows_off)


@pytest.mark.parametrize("family", PLAIN)
@pytest.mark.parametrize("option", [{"decompx_epsilon": 0.0}, {"decompx_bias_split": "attention"},
                                    {"decompx_first_layer_value_bias": "split"}])
def test_decompx_adds_up_to_every_layer_and_the_logits(family, option):
    options = schema_section("analysis.mixing_views", **option)
    model, parts, ids, out, _, _, ev, target = run(family, options)
    eps = options.decompx_epsilon
    exact = dict(rtol=1e-9, atol=1e-9) if eps == 0 else dict(rtol=1e-6, atol=1e-6)
    n = ids.shape[1]
    X = torch.zeros(n, n, model.config.hidden_size, dtype=torch.float64)
    X[torch.arange(n), torch.arange(n)] = out.hidden_states[0][0]
    alphas = out.attentions
    with torch.no_grad(), nv.Capture(model, vectors=True, norms=False), \
            pn.PreNormCapture(model, parts, pn.head_candidates(model, parts)) as pc:
        model(input_ids=ids, output_attentions=True)
        for i, p in enumerate(parts.layers):
            r_in = pc.r[i][0]
            z, a = dp.mlp_activations(p, r_in)
            X, stages = dp.decompx_prenorm_layer(p, X, alphas[i][0], pc.x[i][0], r_in, z, a, first=i == 0,
                                                 options=options)
            torch.testing.assert_close(stages["res1"].sum(1), r_in, **exact)
            torch.testing.assert_close(X.sum(1), pc.out[i][0], **exact)
        final = dp.norm_parts(parts.final_norm, X, pc.final_in[0], eps)
        torch.testing.assert_close(final.sum(1), pc.final_out[0], **exact)
    assert ev.decompx_error < (1e-12 if eps == 0 else 1e-6)
    assert ev.scores["decompx"].shape == (n,) and np.isfinite(ev.scores["decompx"]).all()


def test_the_options_change_decompx():
    # each option moves the view on a model with every bias random (so the test above tells them apart)
    base = run("gpt2")[6].scores["decompx"]
    for option in ({"decompx_bias_split": "attention"}, {"decompx_first_layer_value_bias": "split"}):
        other = run("gpt2", schema_section("analysis.mixing_views", **option))[6].scores["decompx"]
        assert np.abs(other - base).max() > 1e-6 * np.abs(base).max(), option


@pytest.mark.parametrize("family", GATED)
def test_a_gated_mlp_is_left_out_of_decompx_with_its_reason(family):
    model, parts, ids, out, pc, cap, ev, target = run(family)
    assert "gated MLP" in dp.gated_reason(parts)
    assert set(ev.scores) == {"globenc"} and set(ev.layers) == {"globenc"}


def test_a_plain_mlp_is_decomposed():
    assert dp.gated_reason(run("gpt2")[1]) is None


def test_run_views_gives_globenc_and_decompx_on_a_decoder_from_its_padded_batch():
    import pandas as pd

    from bertology.norms.analysis import run_views
    from tests.test_norms_decoders import tiny_decoder

    model, tok = tiny_decoder("gpt2")
    texts = ["the cat sat on the mat .", "a dog barked at it , and the cat ran .", "one two three"]
    frame = pd.DataFrame({"idx": [0, 1, 2], "text_a": texts, "text_b": [None] * 3, "label": [0, 1, 0]})
    res = run_views(model, tok, frame, max_length=32, batch_size=3, flow_examples=None, mixing_examples=None)
    assert {"alti", "globenc", "decompx"} <= set(res.mixing_views) and "DecompX" not in (res.mixing_note or "")
    assert res.decompx_error < 1e-4                                    # float32: the parts add up to rounding
    assert {"globenc", "decompx"} <= set(res.layers["method"])
    # each example's views from the padded batch equal those of the example alone
    parts = pn.prenorm_parts(model)
    for idx, text in enumerate(texts):
        ids = tok(text, return_tensors="pt")["input_ids"]
        n = ids.shape[1]
        with torch.no_grad(), nv.Capture(model, vectors=True, norms=False) as cap, \
                pn.PreNormCapture(model, parts, pn.head_candidates(model, parts)) as pc:
            out = model(input_ids=ids, output_attentions=True)
            ev = mv.prenorm_example_views(model, parts, cap, pc, out.attentions, 0, n, out.logits[0], {}, n - 1)
        for view in ("globenc", "decompx"):
            got = res.scores[(res.scores["example_idx"] == idx) & (res.scores["method"] == view)]
            np.testing.assert_allclose(got.sort_values("position")["score"], ev.scores[view], rtol=1e-4, atol=1e-5)
    # the faithfulness ranking scores them like every view (AOPC by deletion on a decoder)
    from bertology.norms.analysis import run_faithfulness

    faith = run_faithfulness(model, tok, frame, res.scores, max_length=32, batch_size=3, confidence=0.9,
                             resamples=50, seed=0)
    aopc = faith.table[faith.table["importance"] == "aopc"]
    assert {"globenc", "decompx"} <= set(aopc["view"])

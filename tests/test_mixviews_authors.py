"""The four newer mixing views against independent re-implementations of their authors' arithmetic, written here from
the authors' code and papers without calling bertology's functions:

- ALTI: mt-upc/transformer-contributions src/contributions.py (`l_transform`, the resultant, -pairwise_distance p=1)
  and src/utils_contributions.py (`normalize_contributions(scaling="min_sum")`, `compute_joint_attention`);
- GlobEnc: mohsenfayyaz/GlobEnc src/modeling/modeling_bert.py (the N_Enc norms after LN1 and LN2, rolled out raw by
  `BertEncoder.forward`);
- DecompX: mohsenfayyaz/DecompX src/modeling_bert.py (`bias_decomposer` absdot with its 1e-12, `ln_decomposer`,
  `ffn_decomposer` with `GeLU_ZO`, the pooler's tanh `ZO`, the classifier; the first layer's values keep b_V) with the
  bias split of the code (by the attention + residual part) or of the paper's eq. 5-7 (by the attention part, the
  residual added after);
- Value Zeroing: hmohebbi/ValueZeroing (a forward with token j's value vectors zeroed in layer l, 1 - cosine,
  rows normalised, `compute_joint_attention(res=False)`).

On a tiny float64 BertForSequenceClassification with every bias and every LayerNorm weight and bias random (the
default initialisation's zero biases would hide how biases are handled); bertology's views come from its batched
pass (padding in the batch) and must equal the references to 1e-9 relative, with the same ranking of tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import rankdata

from bertology.pipeline.config import schema_section
from bertology.pipeline.errors import UserError
from bertology.norms import mixparts as mp
from bertology.norms import mixviews as mv
from bertology.norms import value_zeroing as vz
from bertology.norms import values as nv
from tests.builders.encoders import tokenizer_for

TEXTS = ["the cat sat on the mat , and the dog barked at it .", "a short one .", "is the cat on the mat ?"]
REL = 1e-9


@pytest.fixture(scope="module")
def setup():
    import transformers as tf

    tok = tokenizer_for("bert")
    config = tf.BertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, hidden_size=32, num_hidden_layers=3,
                           num_attention_heads=4, intermediate_size=48, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, initializer_range=0.3, max_position_embeddings=64,
                           num_labels=3)
    torch.manual_seed(0)
    model = tf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval().double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.bias.copy_(torch.randn(m.bias.shape, generator=g, dtype=torch.float64) * 0.5)
            elif isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + torch.randn(m.weight.shape, generator=g, dtype=torch.float64) * 0.3)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g, dtype=torch.float64) * 0.5)
    enc = tok(TEXTS, padding=True, return_tensors="pt", return_token_type_ids=True)
    lengths = enc["attention_mask"].sum(1)
    assert len(set(lengths.tolist())) == len(TEXTS), "examples of different lengths: padding in the batch"
    return model, enc, lengths


# ------------------------------------------------------------------------------------------------ the references

def _capture(model, ids):
    """One example alone (batch 1, no padding): the tensors the authors' code reads, by module name."""
    bert = model.bert
    names = {}
    for l, layer in enumerate(bert.encoder.layer):
        names.update({f"value{l}": layer.attention.self.value, f"ln1_{l}": layer.attention.output.LayerNorm,
                      f"z{l}": layer.intermediate.dense, f"a{l}": layer.intermediate,
                      f"ln2_{l}": layer.output.LayerNorm})
    names.update({"pool_pre": bert.pooler.dense, "pool_post": bert.pooler})
    got: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    handles = [m.register_forward_hook(lambda mod, a, o, k=k: got.__setitem__(k, (a[0], o))) for k, m in names.items()]
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return out, got


def _heads(model, l):
    layer = model.bert.encoder.layer[l]
    H = model.config.num_attention_heads
    dh = model.config.hidden_size // H
    return layer, H, dh, layer.attention.output.dense.weight.view(model.config.hidden_size, H, dh)


def _attention_parts(model, l, alpha, values):
    """sum_h alpha_h[i, j] v_h[j] W_O^h (the authors' transformed/weighted/summed layers): values (H, n, dh) or
    (H, n, n, dh) decomposed -> (n, n, D)."""
    _, H, dh, wo = _heads(model, l)
    if values.dim() == 3:
        transformed = torch.einsum("hsv,dhv->hsd", values, wo)
        return torch.einsum("hks,hsd->hksd", alpha, transformed).sum(0)
    transformed = torch.einsum("hsqv,dhv->hsqd", values, wo)
    return torch.einsum("hks,hsqd->hkqd", alpha, transformed).sum(0)


def _rollout(mats):
    joint = mats[0]
    for m in mats[1:]:
        joint = m @ joint
    return joint


@torch.no_grad()
def ref_alti(model, ids):
    out, got = _capture(model, ids)
    mats = []
    for l in range(model.config.num_hidden_layers):
        layer, H, dh, _ = _heads(model, l)
        x = out.hidden_states[l][0]
        n, D = x.shape
        alpha = out.attentions[l][0]
        value = got[f"value{l}"][1][0].view(n, H, dh).permute(1, 0, 2)
        resw = _attention_parts(model, l, alpha, value) + torch.einsum("sk,sd->skd", torch.eye(n, dtype=x.dtype), x)
        ln1 = layer.attention.output.LayerNorm
        w = ln1.weight
        transf = (torch.eye(D, dtype=x.dtype) - 1 / D) @ torch.diag(w)            # l_transform's two matrices
        pre = got[f"ln1_{l}"][0][0]
        coef = 1 / (pre + ln1.eps).std(-1, unbiased=False)[:, None]               # the authors' std (eps inside)
        resultant = ((resw @ transf).sum(1) + layer.attention.output.dense.bias @ transf) * coef + ln1.bias
        t = (resw @ transf) * coef[:, :, None]
        importance = -(t - resultant[:, None, :]).abs().sum(-1)                # pairwise_distance p=1, its eps aside
        c = (importance + resultant.abs().sum(-1)[:, None]).clip(min=0)         # min_sum with the resultant's L1 norm
        mats.append(c / c.sum(-1, keepdim=True))
    return _rollout(mats)[0]


@torch.no_grad()
def ref_globenc(model, ids, normalised=False):
    out, got = _capture(model, ids)
    mats = []
    for l in range(model.config.num_hidden_layers):
        layer, H, dh, _ = _heads(model, l)
        x = out.hidden_states[l][0]
        n, D = x.shape
        value = got[f"value{l}"][1][0].view(n, H, dh).permute(1, 0, 2)
        resw = _attention_parts(model, l, out.attentions[l][0], value) + \
            torch.einsum("sk,sd->skd", torch.eye(n, dtype=x.dtype), x)
        post = resw
        for norm, pre in ((layer.attention.output.LayerNorm, got[f"ln1_{l}"][0][0]),
                          (layer.output.LayerNorm, got[f"ln2_{l}"][0][0])):
            var = (pre - pre.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True)[:, :, None]
            post = (post - post.mean(-1, keepdim=True)) / (var + norm.eps) ** 0.5 * norm.weight
        norms = post.norm(dim=-1)
        mats.append(norms / norms.sum(-1, keepdim=True) if normalised else norms)
    return _rollout(mats)[0]


def _decompose_bias(bias, parts, eps):
    """The authors' `bias_decomposer` ("absdot"); eps = 0: exact shares, equal ones where all products are 0."""
    w = torch.einsum("...kd,d->...k", parts, bias).abs()
    s = w.sum(-1, keepdim=True)
    if eps:
        w = w / (s + eps)
    else:
        w = torch.where(s > 0, w / s, torch.full_like(w, 1.0 / w.shape[-1]))
    return parts + w[..., None] * bias


def _ln_decompose(parts, pre, norm, eps):
    var = (pre - pre.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True)[:, :, None]
    post = (parts - parts.mean(-1, keepdim=True)) / (var + norm.eps) ** 0.5 * norm.weight
    return _decompose_bias(norm.bias, post, eps)


def _slope(pre, post, eps):
    return post / (pre + eps) if eps else torch.where(pre != 0, post / pre, torch.zeros_like(pre))


@torch.no_grad()
def ref_decompx(model, ids, split="attention_residual", first_values=True, eps=1e-12):
    """split: "attention_residual" (the authors' code) or "attention" (the paper's eq. 5-7)."""
    out, got = _capture(model, ids)
    X = None
    for l in range(model.config.num_hidden_layers):
        layer, H, dh, _ = _heads(model, l)
        x = out.hidden_states[l][0]
        n, D = x.shape
        alpha = out.attentions[l][0]
        wo, bo = layer.attention.output.dense.weight, layer.attention.output.dense.bias
        wv, bv = layer.attention.self.value.weight, layer.attention.self.value.bias
        if X is None:                                                   # the first layer: the model's own values
            X = torch.einsum("sk,sd->skd", torch.eye(n, dtype=x.dtype), x)
            if first_values:
                value = got[f"value{l}"][1][0].view(n, H, dh).permute(1, 0, 2)     # x W_V + b_V
                attn, bias = _attention_parts(model, l, alpha, value), bo
            else:
                value = (x @ wv.T).view(n, H, dh).permute(1, 0, 2)
                attn, bias = _attention_parts(model, l, alpha, value), wo @ bv + bo
        else:
            dec_values = torch.einsum("ijd,vd->ijv", X, wv).view(n, n, H, dh).permute(2, 0, 1, 3)
            attn, bias = _attention_parts(model, l, alpha, dec_values), wo @ bv + bo
        if split == "attention_residual":
            res1 = _decompose_bias(bias, attn + X, eps)
        else:
            res1 = _decompose_bias(bias, attn, eps) + X
        post_ln = _ln_decompose(res1, got[f"ln1_{l}"][0][0], layer.attention.output.LayerNorm, eps)
        first = _decompose_bias(layer.intermediate.dense.bias,
                                torch.einsum("ld,bkd->bkl", layer.intermediate.dense.weight, post_ln), eps)
        act = first * _slope(got[f"z{l}"][1][0], got[f"a{l}"][1][0], eps)[:, None, :]
        ffn = _decompose_bias(layer.output.dense.bias, torch.einsum("bkl,dl->bkd", act, layer.output.dense.weight),
                              eps)
        X = _ln_decompose(post_ln + ffn, got[f"ln2_{l}"][0][0], layer.output.LayerNorm, eps)
    pool = model.bert.pooler.dense
    pooled = _decompose_bias(pool.bias, X[0] @ pool.weight.T, eps)
    pooled = pooled * _slope(got["pool_pre"][1][0], got["pool_post"][1][0], eps)
    logits = _decompose_bias(model.classifier.bias, pooled @ model.classifier.weight.T, eps)       # (n, C)
    predicted = int(out.logits[0].argmax())
    torch.testing.assert_close(logits.sum(0), out.logits[0], rtol=1e-9, atol=1e-9)
    return logits[:, predicted]


@torch.no_grad()
def ref_value_zeroing(model, ids):
    with torch.no_grad():
        intact = model(input_ids=ids, output_hidden_states=True).hidden_states
    n = ids.shape[1]
    mats = []
    for l, layer in enumerate(model.bert.encoder.layer):
        scores = torch.zeros(n, n, dtype=torch.float64)
        for j in range(n):
            def zero(mod, a, o, j=j):
                o = o.clone()
                o[0, j] = 0
                return o

            h = layer.attention.self.value.register_forward_hook(zero)
            try:
                with torch.no_grad():
                    zeroed = model(input_ids=ids, output_hidden_states=True).hidden_states[l + 1][0]
            finally:
                h.remove()
            cos = torch.nn.functional.cosine_similarity(zeroed, intact[l + 1][0], dim=-1)
            scores[:, j] = (1 - cos).clip(0, 2)                              # sklearn's cosine_distances
        mats.append(scores / scores.sum(-1, keepdim=True))
    return _rollout(mats)[0]


# ------------------------------------------------------------------------------------------------ bertology's views

def ours(model, enc, lengths, options=None, value_zeroing=False):
    """bertology's views of every example from one batched pass (padding in the batch)."""
    parts, head = mp.layer_parts(model), mp.head_linears(model)
    inputs = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
              "token_type_ids": enc["token_type_ids"]}
    res = []
    with torch.no_grad(), nv.Capture(model, vectors=True) as cap, mp.PartsCapture(model, parts, head) as pc:
        out = model(**inputs, output_attentions=True)
        for row in range(len(lengths)):
            n = int(lengths[row])
            ev = mv.example_views(model, parts, head, cap, pc, out.attentions, row, n, out.logits[row], {},
                                  options=options)
            res.append(ev.scores)
    if value_zeroing:
        for row, scores in enumerate(res):
            n = int(lengths[row])
            one = {k: v[row:row + 1, :n] for k, v in inputs.items()}
            scores["value_zeroing"] = vz.value_zeroing_view(model, parts, one, {})[0]
    return res


def _same(got, ref):
    ref = ref.detach().numpy()
    assert got.shape == ref.shape
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err <= REL, f"max relative difference {err:.3g}"
    assert (rankdata(got) == rankdata(ref)).all(), "the ranking of tokens differs"


def _examples(enc, lengths):
    return [enc["input_ids"][r:r + 1, :int(lengths[r])] for r in range(len(lengths))]


def test_the_four_views_equal_their_authors(setup):
    model, enc, lengths = setup
    got = ours(model, enc, lengths, value_zeroing=True)
    for scores, ids in zip(got, _examples(enc, lengths)):
        _same(scores["alti"], ref_alti(model, ids))
        _same(scores["globenc"], ref_globenc(model, ids))
        _same(scores["decompx"], ref_decompx(model, ids))                    # the code's split and b_V
        _same(scores["value_zeroing"], ref_value_zeroing(model, ids))


@pytest.mark.parametrize("option, reference", [
    ({"globenc_rows": "normalised"}, lambda m, ids: ref_globenc(m, ids, normalised=True)),
    ({"decompx_bias_split": "attention"}, lambda m, ids: ref_decompx(m, ids, split="attention")),
    ({"decompx_first_layer_value_bias": "split"}, lambda m, ids: ref_decompx(m, ids, first_values=False)),
    ({"decompx_epsilon": 0.0}, lambda m, ids: ref_decompx(m, ids, eps=0.0)),
])
def test_the_named_variants_equal_their_definitions(setup, option, reference):
    model, enc, lengths = setup
    view = next(iter(option)).split("_")[0]
    got = ours(model, enc, lengths, options=schema_section("analysis.mixing_views", **option))
    for scores, ids in zip(got, _examples(enc, lengths)):
        _same(scores[view], reference(model, ids))


def test_the_variants_are_not_the_default(setup):
    # each option changes its view on this model (so the tests above tell them apart)
    model, enc, lengths = setup
    ids = _examples(enc, lengths)[0]
    base = ref_decompx(model, ids).numpy()
    for kwargs in ({"split": "attention"}, {"first_values": False}):
        other = ref_decompx(model, ids, **kwargs).numpy()
        assert np.abs(other - base).max() > 1e-6 * np.abs(base).max()
    raw, normalised = ref_globenc(model, ids).numpy(), ref_globenc(model, ids, normalised=True).numpy()
    assert np.abs(raw / raw.sum() - normalised / normalised.sum()).max() > 1e-6


def test_a_misspelt_option_says_what_to_use():
    with pytest.raises(UserError, match="globenc_rows.*raw"):
        schema_section("analysis.mixing_views", globenc_rows="sum_one")

"""ALTI on pre-norm layers and ALTI-Logit against the authors' arithmetic (docs/reference.md#alti-prenorm,
#alti-logit): mt-upc/logit-explanations' ``ModelWrapper.get_logit_contributions`` (src/contributions.py, its module
names from src/config.yaml), ``compute_alti`` (src/utils_contributions.py) and ``track2input_tokens``
(extract_explanations.py) re-implemented here, on tiny random float64 GPT-2, OPT and BLOOM classifiers with every
bias and norm parameter random (the score head in the unembedding's place); the same arithmetic with the RMSNorm
linearised without the mean (Gemma's (1 + w)) on tiny Llama, Qwen2 and Gemma."""

from __future__ import annotations

from collections import defaultdict
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertology.norms import logit_views as lv
from bertology.norms.prenorm import PreNormCapture, head_candidates, prenorm_parts
from bertology.norms.values import Capture

# src/config.yaml's names (unembed: the classifier's score head here)
AUTHORS = {
    "opt": dict(layer="model.decoder.layers", ln1="self_attn_layer_norm", ln2="final_layer_norm",
                values="self_attn.v_proj", dense="self_attn.out_proj", lnf="model.decoder.final_layer_norm",
                fc2="fc2"),
    "bloom": dict(layer="transformer.h", ln1="input_layernorm", ln2="post_attention_layernorm",
                  values="self_attention.query_key_value", dense="self_attention.dense", lnf="transformer.ln_f",
                  fc2="mlp.dense_4h_to_h"),
    "gpt2": dict(layer="transformer.h", ln1="ln_1", ln2="ln_2", values="attn.c_attn", dense="attn.c_proj",
                 lnf="transformer.ln_f", fc2="mlp.c_proj"),
    # the RMSNorm models, named as the authors' config would name them
    "llama": dict(layer="model.layers", ln1="input_layernorm", ln2="post_attention_layernorm", values="self_attn.v_proj",
                  dense="self_attn.o_proj", lnf="model.norm", fc2="mlp.down_proj"),
}
AUTHORS["qwen2"] = AUTHORS["gemma"] = AUTHORS["llama"]
_MODELS: dict = {}


def tiny(model_type: str):
    """A tiny random float64 classifier (3 classes, 2 layers, 4 heads, hidden 32; grouped key/value heads where the
    type has them), every norm weight 1 + 0.3 N(0, 1) and every bias (norms' included) 0.3 N(0, 1)."""
    if model_type not in _MODELS:
        import transformers as T

        common = dict(vocab_size=100, pad_token_id=0, num_labels=3, initializer_range=0.3)
        rms = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                   intermediate_size=64, attention_dropout=0.0)
        config = {
            "gpt2": lambda: T.GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=64, resid_pdrop=0.0,
                                         embd_pdrop=0.0, attn_pdrop=0.0, **common),
            "opt": lambda: T.OPTConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, ffn_dim=64,
                                       max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0, **common),
            "bloom": lambda: T.BloomConfig(n_layer=2, n_head=4, hidden_size=32, hidden_dropout=0.0,
                                           attention_dropout=0.0, **common),
            "llama": lambda: T.LlamaConfig(**rms, **common),
            "qwen2": lambda: T.Qwen2Config(**rms, **common),
            "gemma": lambda: T.GemmaConfig(**rms, head_dim=8, **common),
        }[model_type]()
        torch.manual_seed(0)
        model = T.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").double().eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.ndim == 1:
                    is_norm_weight = name.endswith("weight")
                    p.copy_((1.0 if is_norm_weight else 0.0) + 0.3 * torch.randn_like(p))
        _MODELS[model_type] = model
    return _MODELS[model_type]


def batch():
    """Two examples, the second padded: (input_ids (2, 9), attention_mask, lengths)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 100, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = 0, 0
    return ids, mask, [9, 6]


def ours(model, ids, mask, lengths):
    """bertology's views of each row (:func:`bertology.norms.logit_views.prenorm_views`) from one padded pass."""
    parts = prenorm_parts(model)
    out = []
    with Capture(model, vectors=True) as cap, PreNormCapture(model, parts, head_candidates(model, parts)) as pc, \
            torch.no_grad():
        res = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        for row, n in enumerate(lengths):
            score, why = lv.score_head(pc, row, n - 1)
            assert why is None
            out.append(lv.prenorm_views(parts, cap, pc, res.attentions, row, n, n - 1, row, {}, score))
    return out, res.logits


# --------------------------------------------------------------------- the authors' arithmetic, as they wrote it

def _values(model, model_type, values_module, H, dh):
    """get_values_weights: W_V (D, H, dh) and b_V (H, dh); the RMSNorm models' grouped heads repeated to H."""
    if model_type == "gpt2":
        w_v = values_module.weight[:, -H * dh:].reshape(-1, H, dh)
        b_v = values_module.bias[-H * dh:].view(H, -1)
    elif model_type == "bloom":
        w_v_big = values_module.weight.transpose(0, 1)
        w_v = w_v_big.view(-1, H, 3, dh)[:, :, 2, :].reshape(-1, H * dh).view(-1, H, dh)
        b_v = values_module.bias.view(H, 3, dh)[:, 2, :]
    else:
        kv = values_module.weight.shape[0] // dh
        w_v = values_module.weight.transpose(0, 1).reshape(-1, kv, dh).repeat_interleave(H // kv, dim=1)
        b = values_module.bias if values_module.bias is not None else torch.zeros(kv * dh, dtype=w_v.dtype)
        b_v = b.view(kv, dh).repeat_interleave(H // kv, dim=0)
    return w_v, b_v


def _out_proj(model_type, dense, H, dh):
    """get_out_proj_weights: W_O (D, H, dh), b_O (D,)."""
    w = dense.weight.transpose(0, 1) if model_type == "gpt2" else dense.weight
    b = dense.bias if dense.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype)
    return w.reshape(-1, H, dh), b


def _norm(module):
    """(weight, eps, bias, rms, offset) of a norm module: the authors read ln.weight, ln.eps, ln.bias."""
    rms = not isinstance(module, torch.nn.LayerNorm)
    eps = module.eps if hasattr(module, "eps") else module.variance_epsilon
    offset = 1.0 if "Gemma" in type(module).__name__ else 0.0
    bias = getattr(module, "bias", None)
    return module.weight.detach() + offset, eps, (torch.zeros_like(module.weight) if bias is None else bias), rms


def l_transform(x, w_ln, ln_eps, pre_ln_states, rms=False):
    """The authors' l_transform (LayerNorm's centring, gamma, 1/sqrt(var + eps) of the real states); rms: the same
    without the centring and with 1/sqrt(mean(x^2) + eps)."""
    ln_param_transf = torch.diag(w_ln)
    D = w_ln.size(0)
    ln_mean_transf = torch.eye(D, dtype=w_ln.dtype) - (0.0 if rms else 1 / D) * torch.ones_like(ln_param_transf)
    if rms:
        var_pre_ln_states = pre_ln_states.pow(2).mean(-1)
    else:
        var_pre_ln_states = torch.var(pre_ln_states, unbiased=False, dim=-1)
    ln_std_coef = 1 / torch.sqrt(var_pre_ln_states + ln_eps)
    output = torch.einsum("... e , e f , f g -> ... g", x, ln_mean_transf, ln_param_transf)
    return output * ln_std_coef.view(-1, 1, 1)


@torch.no_grad()
def authors(model, model_type, ids, buffer=torch.float64):
    """get_logit_contributions + compute_alti + track2input_tokens of one unpadded example (1, n), output_pos -1,
    every class as a token: (ALTI's normalised per-layer matrices (L, n, n), their rollouts (L, n, n), logit_trans
    'aff_x_j_h' (L, H, n, C, n) and 'aff_x_j' (L, n, C, n), logits_modules). buffer: the normalisation buffer's
    dtype (theirs is float32: torch.zeros(size))."""
    cfg = AUTHORS[model_type]
    H = model.config.num_attention_heads
    D = model.config.hidden_size
    dh = getattr(model.config, "head_dim", None) or D // H
    L = model.config.num_hidden_layers
    func_inputs, func_outputs = defaultdict(list), defaultdict(list)

    def save_activation(name, mod, inp, out):
        func_inputs[name].append(inp)
        func_outputs[name].append(out)

    handles = [m.register_forward_hook(partial(save_activation, name)) for name, m in model.named_modules()]
    try:
        output = model(input_ids=ids, output_hidden_states=True, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    hidden_states, attentions = output["hidden_states"], output["attentions"]

    def name(key, layer):
        return f"{cfg['layer']}.{layer}.{cfg[key]}"

    def get(key, layer):
        return model.get_submodule(name(key, layer))

    last_pre_ln2_states = func_inputs[name("ln2", L - 1)][0][0].squeeze()
    last_fc2_out = func_outputs[name("fc2", L - 1)][0].squeeze()
    pre_lnf_states = last_pre_ln2_states + last_fc2_out
    lnf = model.get_submodule(cfg["lnf"])
    w_lnf, eps_lnf, b_lnf, rms = _norm(lnf)

    def run_final_ln(tensor_input, pre_lnf):
        return l_transform(tensor_input, w_lnf, eps_lnf, pre_lnf, rms)

    embed_matrix = model.score.weight.detach()
    modules = {"mlp_logit_layers": [], "b_o_logits_layers": []}
    heads_logits, layer_logits, importance, resultants = [], [], [], []
    for layer in range(L):
        hidden_states_layer = hidden_states[layer].detach()
        if layer == 0:
            initial_residual = hidden_states_layer.squeeze()[-1]
            lnf_initial_residual = run_final_ln(initial_residual, pre_lnf_states[-1]).squeeze()
            modules["init_logit"] = torch.einsum("vd,d->v", embed_matrix, lnf_initial_residual)
            modules["lnf_bias"] = torch.einsum("vd,d->v", embed_matrix, b_lnf)
        fc2_out = func_outputs[name("fc2", layer)][0].squeeze()
        l_fc2_out = run_final_ln(fc2_out.unsqueeze(-2), pre_lnf_states)
        modules["mlp_logit_layers"].append(torch.einsum("vd,td->tv", embed_matrix, l_fc2_out.squeeze())[-1])
        w_ln1, ln1_eps, b_ln1, rms1 = _norm(get("ln1", layer))
        a_mat = attentions[layer].squeeze()
        w_v, b_v = _values(model, model_type, get("values", layer), H, dh)
        w_o, b_o = _out_proj(model_type, get("dense", layer), H, dh)
        lnf_b_o = run_final_ln(b_o, pre_lnf_states)
        modules["b_o_logits_layers"].append(torch.einsum("vd,tsd->tv", embed_matrix, lnf_b_o)[-1])
        b_ln1_w_v = torch.einsum("d,dhz->hz", b_ln1, w_v) + b_v
        gamma_l_h = torch.einsum("hz,dhz->hd", b_ln1_w_v, w_o)
        biases_term_attn_heads = torch.einsum("hts,hd->htsd", a_mat, gamma_l_h)
        biases_term_src = biases_term_attn_heads.sum(0)
        layer_input = func_inputs[name("ln1", layer)][0][0].squeeze().unsqueeze(1)
        l_layer_input = l_transform(layer_input, w_ln1, ln1_eps, layer_input, rms1).squeeze()
        v_j_heads = torch.einsum("sd,dhz->hsz", l_layer_input, w_v).squeeze()
        lin_x_j_w_o_heads = torch.einsum("hsz,dhz->hsd", v_j_heads, w_o)
        lin_x_j_heads = torch.einsum("hsd,hts->htsd", lin_x_j_w_o_heads, a_mat)
        aff_x_j_heads = biases_term_attn_heads + lin_x_j_heads
        heads_logits.append(torch.einsum("htsd,vd->htvs", run_final_ln(aff_x_j_heads, pre_lnf_states), embed_matrix))
        lin_x_j = lin_x_j_heads.sum(0)
        aff_x_j = biases_term_src + lin_x_j
        layer_logits.append(torch.einsum("tsd,vd->tvs", run_final_ln(aff_x_j, pre_lnf_states), embed_matrix))
        n = hidden_states_layer.squeeze().shape[0]
        residual = torch.einsum("sk,sd->skd", torch.eye(n, dtype=hidden_states_layer.dtype), hidden_states_layer.squeeze())
        res_and_aff_x_j = aff_x_j + residual
        attn_res_output = res_and_aff_x_j.sum(1) + b_o
        real = func_inputs[name("ln2", layer)][0][0].reshape(attn_res_output.shape)
        assert torch.dist(attn_res_output, real).item() < 1e-3 * real.numel()
        importance.append(-F.pairwise_distance(res_and_aff_x_j, attn_res_output.unsqueeze(1), p=1))
        resultants.append(attn_res_output)
    # compute_alti: normalize_contributions(scaling='min_sum', resultant_norm) and compute_joint_attention
    model_contributions = torch.stack(importance)
    resultant_norm = torch.norm(torch.stack(resultants), p=1, dim=-1)
    normalized = torch.zeros(model_contributions.size(), dtype=buffer)
    for layer in range(L):
        normalized[layer] = model_contributions[layer] + torch.abs(resultant_norm[layer].unsqueeze(1))
        normalized[layer] = torch.clip(normalized[layer], min=0)
        normalized[layer] = normalized[layer] / normalized[layer].sum(dim=-1, keepdim=True)
    joint = normalized[0].unsqueeze(0)
    for i in range(1, L):
        joint = torch.cat([joint, torch.matmul(normalized[i], joint[i - 1]).unsqueeze(0)], dim=0)
    return normalized, joint, torch.stack(heads_logits), torch.stack(layer_logits), modules


def track2input_tokens(layerwise, joint, token):
    """extract_explanations.track2input_tokens of one class `token` and method aff_x_j: (L, n)."""
    rows = [layerwise[0, -1, token]]
    for layer in range(1, layerwise.shape[0]):
        rows.append(torch.matmul(layerwise[layer, -1, token], joint[layer - 1].to(layerwise.dtype)))
    return torch.stack(rows)


def close(got, want, rtol):
    got, want = torch.from_numpy(np.array(got, dtype=np.float64)), torch.from_numpy(np.array(want, dtype=np.float64))
    scale = want.abs().max().clamp(min=1e-300)
    assert float((got - want).abs().max() / scale) < rtol, float((got - want).abs().max() / scale)


def _compare(model_type, rtol):
    """Each example run alone (as the authors' code runs it) against their arithmetic, and the padded batch's views
    against the example's own (OPT's and BLOOM's attention softmax runs in float32: the padded pass's scores differ in
    their last bits, float32's rounding of the probabilities follows)."""
    model = tiny(model_type)
    ids, mask, lengths = batch()
    padded, _ = ours(model, ids, mask, lengths)
    for row, n in enumerate(lengths):
        (v,), logits = ours(model, ids[row:row + 1, :n], mask[row:row + 1, :n], [n])
        for view in ("alti", "alti_logit"):
            close(padded[row].scores[view], v.scores[view], 1e-6)
        close(padded[row].decision["logit"].to_numpy(), v.decision["logit"].to_numpy(), 1e-6)
        normalized, joint, heads, layers, modules = authors(model, model_type, ids[row:row + 1, :n])
        assert torch.isfinite(normalized).all(), "an all-zero row: the comparison needs the authors' 0/0 avoided"
        close(v.layers["alti"], normalized[:, -1], rtol)                         # C_l at the last token
        close(v.scores["alti"], joint[-1, -1], rtol)                             # rollout row
        d = v.decision
        pred, runner = int(d["predicted"].iloc[0]), int(d["runner_up"].iloc[0])
        assert pred == int(logits[0].argmax()) and runner != pred
        hd = d[d["part"] == "head"].sort_values(["layer", "head"])
        close(hd["logit"].to_numpy(), heads[:, :, -1, pred, :].sum(-1).reshape(-1), rtol)
        close(hd["contrast"].to_numpy(), (heads[:, :, -1, pred] - heads[:, :, -1, runner]).sum(-1).reshape(-1), rtol)
        for part, want in (("mlp", torch.stack(modules["mlp_logit_layers"])),
                           ("attention_bias", torch.stack(modules["b_o_logits_layers"]))):
            close(d[d["part"] == part].sort_values("layer")["logit"].to_numpy(), want[:, pred], rtol)
        close(d[d["part"] == "embedding"]["logit"].to_numpy(), modules["init_logit"][pred:pred + 1], rtol)
        close(d[d["part"] == "final_bias"]["logit"].to_numpy(), modules["lnf_bias"][pred:pred + 1], rtol)
        contrast = track2input_tokens(layers, joint, pred) - track2input_tokens(layers, joint, runner)
        close(v.layers["alti_logit"], contrast, rtol)
        close(v.scores["alti_logit"], contrast.sum(0), rtol)


@pytest.mark.parametrize("model_type", ["gpt2", "opt", "bloom"])
def test_alti_and_alti_logit_equal_the_authors_arithmetic(model_type):
    _compare(model_type, 1e-9)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "gemma"])
def test_the_rmsnorm_variant_equals_its_definition(model_type):
    """The authors' arithmetic with the RMSNorm linearised without the mean (transformers' RMSNorm runs in float32
    inside a float64 model: the real value vectors carry float32's rounding, hence 1e-5)."""
    _compare(model_type, 1e-5)


def test_the_float32_buffer_of_the_authors_is_a_rounding_departure():
    """Their normalisation buffer is float32: the same numbers to float32's rounding."""
    model = tiny("gpt2")
    ids, mask, lengths = batch()
    views, _ = ours(model, ids[:1], mask[:1], lengths[:1])
    normalized, joint, *_ = authors(model, "gpt2", ids[:1], buffer=torch.float32)
    close(views[0].layers["alti"], normalized[:, -1], 1e-5)
    close(views[0].scores["alti"], joint[-1, -1], 1e-5)


def test_a_change_the_arithmetic_must_follow_fails_the_comparison():
    """The comparison can fail: without the pairwise-distance eps, or with the LayerNorm's mean in an RMSNorm's
    linearisation, the numbers leave the tolerance."""
    import bertology.norms.alti_prenorm as ap

    model = tiny("gpt2")
    ids, mask, lengths = batch()
    old = ap.PAIRWISE_EPS
    try:
        ap.PAIRWISE_EPS = 0.0
        views, _ = ours(model, ids, mask, lengths)
    finally:
        ap.PAIRWISE_EPS = old
    normalized, *_ = authors(model, "gpt2", ids[:1])
    with pytest.raises(AssertionError):
        close(views[0].layers["alti"], normalized[:, -1], 1e-9)

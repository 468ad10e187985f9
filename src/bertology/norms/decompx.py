"""DecompX (Modarressi et al. 2023, docs/reference.md#newer-mixing-views): the decomposition X (n, m, D) of one
example's hidden states into the parts of each input token, through every post-LN layer (:func:`decompx_layer`) and
the classifier head (:func:`decompx_head`).

X[i, j] is token j's part of token i's representation, from X = diag(input of layer 1) through attention, residual,
LN1, FFN (activation as its zero-origin slope act(z)/(z + eps) at the real z), residual and LN2 of every layer, then
the classifier head at position 0 (each linear; activations by their zero-origin slope), every bias split over the
tokens by |<part, bias>| / (sum + eps) ("absdot", eps = 1e-12 as the authors' code): sum_j X[i, j] is the real hidden
state (to eps) and the head's parts sum to the logits. The attention block's bias b_V W_O + b_O is split by the
attention parts (the paper's eq. 5) or by attention + residual parts (the authors' code; config
analysis.mixing_views); in the first layer b_V stays inside the value vectors (spread by the attention, as the
authors' code) and only b_O is split. The layer's parts are :func:`bertology.norms.mixparts.layer_parts`.

Glossary: n tokens, m parts (= n), D hidden size, F the FFN's width, C classes, H heads, dh head size.
"""

from __future__ import annotations

import torch

from bertology.pipeline.config import MixingViewsConfig, schema_section
from bertology.norms.alti_globenc import ln_linear
from bertology.norms.mixparts import LayerParts


def split_bias(parts: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    """DecompX's "absdot" bias decomposition: parts (n, m, D) (or (m, D)), bias (D,) (or (n, D), one per row i)
    -> parts + w_ij bias with w_ij = |<parts_ij, bias>| / (sum_j |<parts_ij, bias>| + eps) (the authors' eps =
    1e-12: a bias whose products are all 0 is dropped); eps = 0: exact shares, equal shares where every product is
    0."""
    if bias is None:
        return parts
    b = bias.to(parts.dtype)
    if b.ndim > 1:
        b = b[..., None, :]                                                      # (n, 1, D): row i's own bias
        w = (parts * b).sum(-1).abs()
    else:
        w = (parts @ b).abs()
    s = w.sum(-1, keepdim=True)
    if eps > 0:
        w = w / (s + eps)
    else:
        m = parts.shape[-2]
        w = torch.where(s > 0, w / torch.where(s > 0, s, torch.ones_like(s)), torch.full_like(w, 1.0 / m))
    return parts + w[..., None] * b


def residual_parts(attn: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor, split: str,
                   eps: float) -> torch.Tensor:
    """The parts of attention + residual (n, m, D) from the attention's parts `attn` (n, m, D), the residual's parts
    `residual` (n, m, D) and the sublayer's bias (D,) or (n, D) (:func:`split_bias`): `split` ``attention_residual`` (the authors' code)
    splits the bias over the parts of the sum, ``attention`` (the paper's text) over the attention's parts alone."""
    if split == "attention_residual":
        return split_bias(attn + residual, bias, eps)
    return split_bias(attn, bias, eps) + residual


def zero_origin_slope(z: torch.Tensor, a: torch.Tensor, eps: float) -> torch.Tensor:
    """The zero-origin slope of an elementwise activation at its real input z: a / (z + eps) (the authors'
    `GeLU_ZO`, eps = 1e-12); eps = 0: a / z, 0 where z = 0."""
    if eps > 0:
        return a / (z + eps)
    return torch.where(z != 0, a / torch.where(z != 0, z, torch.ones_like(z)), torch.zeros_like(z))


def ln_parts(parts: torch.Tensor, norm: torch.nn.LayerNorm, real_in: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm through a decomposition (parts (n, m, D) summing to the real input real_in (n, D)): the linear part
    per part, beta split by absdot -> (n, m, D) summing to LN(real_in)."""
    out = ln_linear(parts, norm, real_in)
    return split_bias(out, norm.bias, eps)


@torch.no_grad()
def decompx_layer(parts: LayerParts, x: torch.Tensor, alpha: torch.Tensor, ln1_in: torch.Tensor, z: torch.Tensor,
                  a: torch.Tensor, ln2_in: torch.Tensor, first: bool = False,
                  options: MixingViewsConfig | None = None,
                  rows: slice | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One layer of DecompX: x (n, m, D) the decomposition of the layer's input (sum over m = the real input), alpha
    (H, n, n), the real LN1 input (n, D), FFN pre-activation z (n, F) and activation a (n, F), LN2 input (n, D) ->
    (the decomposition of the layer's output (r, m, D), its stages {"ln1": (r, m, D), "res2": (r, m, D)}).

    rows: the output positions to decompose (a slice; None: all n, r = n). Every position's input parts are the
    keys, so a layer below needs all rows; the last needs only the target's (row 0 of the top [CLS]).

    first: x is the model's input, diagonal (x[k, j] = 0 for k != j; m = n): the value projection then runs on the
    n diagonal vectors, not n x n parts, and the attention mixes them by broadcasting (the same numbers); with
    ``options.decompx_first_layer_value_bias == "values"`` b_V is added to each token's own value vector (the
    authors' first layer) and only b_O is split."""
    o = options or schema_section("analysis.mixing_views")
    eps = o.decompx_epsilon
    b = parts.block
    H, dh = b.heads, b.head_dim
    n, m, D = x.shape
    q = slice(None) if rows is None else rows
    wv, bv = b.value_weights()
    wo = b.output_weight().to(x.dtype)
    al = alpha.to(x.dtype)[:, q]                                                   # (H, r, n)
    bias = torch.zeros(D, dtype=x.dtype, device=x.device)
    if first:
        if m != n:
            raise ValueError(f"decompx_layer(first=True) needs the diagonal input decomposition (n, n, D), got "
                             f"{tuple(x.shape)}")
        idx = torch.arange(n, device=x.device)
        vd = x[idx, idx] @ wv.T.to(x.dtype)                                        # (n, H*dh): token j's own
        if bv is not None and o.decompx_first_layer_value_bias == "values":
            vd = vd + bv.to(x.dtype)                                  # token j's value x_j W_V + b_V, as the model's
        elif bv is not None:
            bias = bias + bv.to(x.dtype) @ wo.T                     # rows of alpha sum to 1: b_V reaches every token
        y = (al.permute(1, 2, 0)[..., None] * vd.view(n, H, dh)).reshape(-1, m, H * dh)   # alpha_h[i, j] v_jj
    else:
        v = (x @ wv.T.to(x.dtype)).view(n, m, H, dh)
        if bv is not None:
            bias = bias + bv.to(x.dtype) @ wo.T
        y = torch.einsum("hik,kjhc->ijhc", al, v).reshape(-1, m, H * dh)
    attn = y @ wo.T
    if b.output.bias is not None:
        bias = bias + b.output.bias.to(x.dtype)
    xr = x[q]
    res1 = residual_parts(attn, xr, bias, o.decompx_bias_split, eps)
    h = ln_parts(res1, b.post_norm, ln1_in[q], eps)
    zz = split_bias(h @ parts.ffn_in.weight.T.to(x.dtype), getattr(parts.ffn_in, "bias", None), eps)
    act = zz * zero_origin_slope(z[q].to(x.dtype), a[q].to(x.dtype), eps)[:, None, :]
    ff = split_bias(act @ parts.ffn_out.weight.T.to(x.dtype), getattr(parts.ffn_out, "bias", None), eps)
    res2 = ff + h
    return ln_parts(res2, parts.final_norm, ln2_in[q], eps), {"ln1": h, "res2": res2}


@torch.no_grad()
def decompx_head(head: list[torch.nn.Module], pooled: torch.Tensor, head_in: list[torch.Tensor],
                 head_out: list[torch.Tensor], eps: float) -> torch.Tensor:
    """The classifier head through DecompX: pooled (m, D) the decomposition of the top [CLS], each linear's real input
    and output at position 0 (head_in[k], head_out[k]: (F_k,), (G_k,)) -> (m, C) per-token logit parts (each linear's
    bias split by absdot; between linears the activation's zero-origin slope head_in[k+1] / (head_out[k] + eps), the
    authors' `tanh_approx_type="ZO"`)."""
    p = pooled
    for k, lin in enumerate(head):
        p = split_bias(p @ lin.weight.T.to(p.dtype), getattr(lin, "bias", None), eps)
        if k + 1 < len(head):
            p = p * zero_origin_slope(head_out[k].to(p.dtype), head_in[k + 1].to(p.dtype), eps)
    return p

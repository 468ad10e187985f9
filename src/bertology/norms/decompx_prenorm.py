"""DecompX (Modarressi et al. 2023) through pre-norm layers (docs/reference.md#newer-mixing-views): the decomposition X
(n, m, D) of one example's residual stream into the parts of each input token, carried through every layer
(:func:`decompx_prenorm_layer`) and the final norm (:func:`norm_parts`), then the classifier head
(:func:`bertology.norms.decompx.decompx_head`).

A pre-norm layer computes h = N1(x); r = x + Attn(h) + b_O; out = r + down(act(up(N2(r)))). DecompX's own steps,
each on every part X[i, j] (token j's part of position i), in the layer's order:

- a norm (N1, N2, the final norm; LayerNorm or RMSNorm, :class:`bertology.norms.prenorm.Norm`): its linear part at
  the scale of the position's real input (:func:`bertology.norms.prenorm.linear_part`), its bias split by absdot
  (DecompX's ``ln_decomposer``; an RMSNorm has no mean to subtract and usually no bias);
- attention: sum_h sum_k alpha_h[i, k] N1-part[k, j] W_V^h W_O^h, the bias b_V W_O + b_O split by absdot over the
  attention + residual parts (``decompx_bias_split: attention_residual``, the authors' code) or over the attention
  parts with the residual added after (``attention``); the first layer's N1 acts on each token's own vector, so its
  parts are diagonal and b_V stays inside each token's value vector (``decompx_first_layer_value_bias: values``);
- the residual around each sublayer: + the sublayer input's parts;
- the MLP: up, its bias split; the activation by its zero-origin slope act(z)/(z + eps) at the real pre-activation
  z (DecompX's ``GeLU_ZO``, any elementwise activation); down, its bias split.

sum_j X[i, j] is the real residual stream after every layer (up to the share eps / (sum + eps) of each bias the
authors' epsilon leaves out; exact with ``decompx_epsilon: 0``). A gated MLP (down(act(gate h) * up h)) multiplies two
functions of the same parts: the product's cross terms between tokens have no part of their own in DecompX, so such
layers are not decomposed (:func:`gated_reason`).

Glossary: n tokens, m parts (= n), r rows decomposed, D hidden size, F the MLP's width, H heads, KV key/value heads,
dh head size.
"""

from __future__ import annotations

import torch

from bertology.norms.decompx import residual_parts, split_bias, zero_origin_slope
from bertology.norms.prenorm import Norm, PreNormLayer, PreNormParts, apply_norm, linear_part, norm_scale
from bertology.norms.values import linear_weight
from bertology.pipeline.config import MixingViewsConfig, schema_section


def gated_reason(parts: PreNormParts) -> str | None:
    """Why DecompX does not decompose the model's layers (their MLP is gated), or None."""
    gated = [p.block.index for p in parts.layers if p.gated]
    if not gated:
        return None
    where = f"layer {gated[0]}" if len(gated) == 1 else f"layers {gated[0]}..{gated[-1]}"
    return (f"the pre-norm {where} have a gated MLP (down(act(gate h) * up h), SwiGLU/GeGLU): the product of two "
            f"functions of the same token parts has cross terms between tokens that DecompX assigns to none")


def norm_parts(norm: Norm, parts: torch.Tensor, real_in: torch.Tensor, eps: float) -> torch.Tensor:
    """A norm through a decomposition: parts (r, m, D) summing to the real input real_in (r, D) -> (r, m, D) summing
    to the norm's output: the linear part at the real input's scale, the bias split by absdot."""
    scale = norm_scale(norm, real_in.to(parts.dtype))[:, None]                          # (r, 1)
    return split_bias(linear_part(norm, parts, scale), norm.shift(parts), eps)


def _mlp(layer: PreNormLayer, h: torch.Tensor, z: torch.Tensor, a: torch.Tensor, eps: float) -> torch.Tensor:
    """The plain MLP through parts h (r, m, D) of its input, at the real pre-activation z (r, F) and activation
    a (r, F) -> (r, m, D)."""
    up, down = layer.up, layer.down
    zz = split_bias(h @ linear_weight(up).T.to(h.dtype), getattr(up, "bias", None), eps)
    act = zz * zero_origin_slope(z.to(h.dtype), a.to(h.dtype), eps)[:, None, :]
    return split_bias(act @ linear_weight(down).T.to(h.dtype), getattr(down, "bias", None), eps)


@torch.no_grad()
def mlp_activations(layer: PreNormLayer, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain MLP's pre-activation z = up(N2(r)) and activation a = act(z) (r, F) of the real residual sums r
    (r, D): N2 by its definition (:func:`bertology.norms.prenorm.apply_norm`), up by its weight and bias, the
    activation by the layer's own module (no hooked module is called: a capture's tensors stay as the forward pass
    left them)."""
    h = apply_norm(layer.mlp_norm, r)
    z = h @ linear_weight(layer.up).T.to(h.dtype)
    bias = getattr(layer.up, "bias", None)
    z = z if bias is None else z + bias.to(h.dtype)
    return z, layer.activation(z)


@torch.no_grad()
def decompx_prenorm_layer(layer: PreNormLayer, x: torch.Tensor, alpha: torch.Tensor, x_in: torch.Tensor,
                          r_in: torch.Tensor, z: torch.Tensor, a: torch.Tensor, first: bool = False,
                          options: MixingViewsConfig | None = None,
                          rows: slice | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One pre-norm layer of DecompX: x (n, m, D) the decomposition of the layer's input (sum over m = x_in (n, D),
    the real input), alpha (H, n, n), r_in (n, D) the real x + attention + b_O, the MLP's real pre-activation z and
    activation a (r, F) of the rows decomposed -> (the decomposition of the layer's output (r, m, D), its stages
    {"res1": (r, m, D), the parts of x + attention + b_O}).

    rows: the output positions to decompose (None: all n). first: x is the model's input, diagonal (x[k, j] = 0 for
    k != j, m = n): N1 and the value projection then run on the n diagonal vectors."""
    o = options or schema_section("analysis.mixing_views")
    eps = o.decompx_epsilon
    b = layer.block
    H, G, dh = b.heads, b.groups, b.head_dim
    n, m, D = x.shape
    q = slice(None) if rows is None else rows
    wv, bv = b.value_weights()
    wv = wv.to(x.dtype)
    wo = b.output_weight().to(x.dtype)
    al = alpha.to(x.dtype)[:, q]                                                        # (H, r, n)
    bias = torch.zeros(D, dtype=x.dtype, device=x.device)                        # (D,) or (r, D)
    if first:
        if m != n:
            raise ValueError(f"decompx_prenorm_layer(first=True) needs the diagonal input decomposition (n, n, D), "
                             f"got {tuple(x.shape)}")
        idx = torch.arange(n, device=x.device)
        h1 = norm_parts(layer.attention_norm, x[idx, idx][:, None], x_in, eps)[:, 0]  # (n, D): N1(x_j), token j's
        vd = h1 @ wv.T                                                                  # (n, KV*dh)
        if bv is not None and o.decompx_first_layer_value_bias == "values":
            vd = vd + bv.to(x.dtype)
        elif bv is not None:
            bias = bias + _value_bias(bv.to(x.dtype), wo, al, G, dh)
        vd = _heads(vd, G, H, dh)                                                       # (n, H, dh)
        y = al.permute(1, 2, 0)[..., None] * vd                                         # (r, n, H, dh)
    else:
        h1 = norm_parts(layer.attention_norm, x, x_in, eps)
        v = _heads(h1 @ wv.T, G, H, dh)                                                 # (n, m, H, dh)
        if bv is not None:
            bias = bias + _value_bias(bv.to(x.dtype), wo, al, G, dh)
        y = torch.einsum("hik,kjhc->ijhc", al, v)
    attn = y.reshape(y.shape[0], m, H * dh) @ wo.T
    if getattr(b.output, "bias", None) is not None:
        bias = bias + b.output.bias.to(x.dtype)
    xr = x[q]
    res1 = residual_parts(attn, xr, bias, o.decompx_bias_split, eps)
    h2 = norm_parts(layer.mlp_norm, res1, r_in[q], eps)
    return res1 + _mlp(layer, h2, z, a, eps), {"res1": res1}


def _value_bias(bv: torch.Tensor, wo: torch.Tensor, alpha: torch.Tensor, groups: int, dh: int) -> torch.Tensor:
    """The value bias as the attention writes it at each row: bv (KV*dh,), wo (D, H*dh) W_O, alpha (H, r, n) ->
    (r, D) sum_h (sum_k alpha_h[i, k]) b_V^h W_O^h (= b_V W_O where the rows sum to 1; transformers' eager attention
    rounds the softmax through float32 in many models, so a float64 model's rows sum to 1 only to ~1e-7)."""
    H = alpha.shape[0]
    D = wo.shape[0]
    per_head = torch.einsum("hc,dhc->hd", _heads(bv, groups, H, dh), wo.view(D, H, dh))      # (H, D)
    return alpha.sum(-1).T @ per_head


def _heads(v: torch.Tensor, groups: int, heads: int, dh: int) -> torch.Tensor:
    """v (..., KV*dh) key/value heads' features -> (..., H, dh), query head h reading key/value head
    h // (H / KV) (transformers' ``repeat_kv``)."""
    v = v.reshape(*v.shape[:-1], groups, dh)
    return v if groups == heads else v.repeat_interleave(heads // groups, dim=-2)

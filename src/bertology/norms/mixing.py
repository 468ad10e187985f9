"""Context mixing with the residual connection and LayerNorm (Kobayashi et al. 2021, *Incorporating Residual
and Normalization Layers into Analysis of Masked Language Models*; docs/reference.md#mixing).

One layer's attention block writes, for token i (sum over the keys j, f_h of :mod:`bertology.norms.values`):

  attention:            a_ij = sum_h alpha_h[i, j] f_h(x_j)
  + residual:           y_ij = a_ij + [i = j] x_i                    (x_i the residual stream entering the layer)
  + LayerNorm (post-LN): LN(sum_j y_ij + b_O) = sum_j g(y_ij) + g(b_O) + beta,
                         g(v) = gamma * (v - mean(v)) / sqrt(var(sum_j y_ij + b_O) + eps)

(g is LayerNorm's linear part: the mean is subtracted per vector, the variance is the whole sum's). The
context-mixing ratio of token i under a decomposition v_ij is ||sum_{j != i} v_ij|| / (||sum_{j != i} v_ij|| +
||v_ii||), as in the authors' code; the weight-based ratios are sum_{j != i} mean_h alpha_h[i, j] (attention)
and half of it (attention + residual, the residual weighing as much as the attention, Kobayashi et al.'s
AttnRes-W). Measures, in this order: :data:`MEASURES`. A pre-LN layer (ModernBERT) has no LayerNorm after the
residual: its ``attnresln_n`` is NaN. A layer whose residual layout bertology does not recognise (its
:class:`~bertology.norms.values.AttentionBlock` has no ``layer``: MPNet-like and BERT-like layouts, DistilBERT
and ModernBERT are recognised) gets the attention measures only (``attnres_n`` and ``attnresln_n`` NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bertology.norms.values import AttentionBlock, Capture, transformed_vectors

MEASURES = ("attn_w", "attn_n", "attnres_w", "attnres_n", "attnresln_n")


@dataclass
class Decomposition:
    """One example's layer as sums over keys: attn, attnres (n, n, D) = a_ij, y_ij; ln (n, n, D) = g(y_ij) or None
    (pre-LN); ln_rest (n, D) = g(b_O) + beta (what LayerNorm adds that no token contributes), None for pre-LN;
    bias (D,) b_O (zeros if the projection has none)."""

    attn: torch.Tensor
    attnres: torch.Tensor
    ln: torch.Tensor | None
    ln_rest: torch.Tensor | None
    bias: torch.Tensor


def decompose(alpha: torch.Tensor, f: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None,
              norm: torch.nn.LayerNorm | None) -> Decomposition:
    """alpha (H, n, n) probabilities, f (H, n, D) transformed vectors f_h(x_j), residual (n, D) x, bias (D,) b_O or
    None, norm: the post-LayerNorm (None for pre-LN) -> :class:`Decomposition` (float64)."""
    alpha, f, x = alpha.double(), f.double(), residual.double()
    n, D = x.shape
    b = torch.zeros(D, dtype=torch.float64, device=x.device) if bias is None else bias.double()
    attn = torch.einsum("hij,hjd->ijd", alpha, f)
    attnres = attn.clone()
    idx = torch.arange(n, device=x.device)
    attnres[idx, idx] += x
    if norm is None:
        return Decomposition(attn, attnres, None, None, b)
    pre = attnres.sum(1) + b                                                         # (n, D) = LayerNorm's input
    scale = (pre.var(-1, unbiased=False) + norm.eps).rsqrt()                         # (n,)
    gamma = norm.weight.double() if norm.weight is not None else torch.ones(D, dtype=torch.float64, device=x.device)
    beta = norm.bias.double() if norm.bias is not None else torch.zeros(D, dtype=torch.float64, device=x.device)
    ln = (attnres - attnres.mean(-1, keepdim=True)) * scale[:, None, None] * gamma
    ln_rest = (b - b.mean())[None, :] * scale[:, None] * gamma + beta
    return Decomposition(attn, attnres, ln, ln_rest, b)


def mixing_ratio(v: torch.Tensor) -> torch.Tensor:
    """v (n, n, D) decomposition -> (n,): ||sum_{j != i} v_ij|| / (||sum_{j != i} v_ij|| + ||v_ii||)."""
    n = v.shape[0]
    idx = torch.arange(n, device=v.device)
    keep = v[idx, idx]
    mix = v.sum(1) - keep
    m, k = mix.norm(dim=-1), keep.norm(dim=-1)
    return m / (m + k)


def layer_ratios(alpha: torch.Tensor, dec: Decomposition) -> torch.Tensor:
    """alpha (H, n, n) and the layer's :class:`Decomposition` -> (len(MEASURES), n) ratios (float64)."""
    n = alpha.shape[-1]
    attn_w = 1.0 - alpha.double().mean(0).diagonal()
    nan = torch.full((n,), float("nan"), dtype=torch.float64, device=alpha.device)
    return torch.stack([attn_w, mixing_ratio(dec.attn), attn_w / 2, mixing_ratio(dec.attnres),
                        nan if dec.ln is None else mixing_ratio(dec.ln)])


@torch.no_grad()
def example_decomposition(cap: Capture, block: AttentionBlock, alpha: torch.Tensor, row: int,
                          n: int) -> Decomposition:
    """The :class:`Decomposition` of layer `block` for row `row` (real length n) of the last forward pass.

    cap: a ``Capture(model, vectors=True)`` the forward ran in; alpha (B, H, T, T) the layer's attention."""
    if block.index not in cap.residual:
        raise RuntimeError("mixing needs Capture(model, vectors=True) around the forward pass")
    v = cap.values[block.index][row:row + 1, :n]                                     # (1, n, H, dh)
    f = transformed_vectors(block, v)[0]                                             # (H, n, D)
    return decompose(alpha[row, :, :n, :n], f, cap.residual[block.index][row, :n], block.output.bias,
                     block.post_norm)


def ratio_from_sums(total: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    """The mixing ratio from a decomposition's row sums: total (n, D) = sum_j v_ij, own (n, D) = v_ii -> (n,)
    ||total - own|| / (||total - own|| + ||own||) (:func:`mixing_ratio` without the (n, n, D) decomposition)."""
    m, k = (total - own).norm(dim=-1), own.norm(dim=-1)
    return m / (m + k)


def layer_ratios_fast(alpha: torch.Tensor, f: torch.Tensor, residual: torch.Tensor | None, bias: torch.Tensor | None,
                      norm: torch.nn.LayerNorm | None) -> torch.Tensor:
    """:func:`layer_ratios` of :func:`decompose` (same arguments; residual None: the layout is not recognised, the
    attention measures only) without the (n, n, D) decomposition -> (len(MEASURES), n) float64.

    Every measure needs only two vectors a token: the row sum sum_j v_ij and the own part v_ii. For the attention,
    sum_j a_ij = sum_h alpha_h f_h (the attention's output, b_O left out) and a_ii = sum_h alpha_h[i, i] f_h(x_i);
    the residual adds x_i to both; LayerNorm's linear part g commutes with the sum over j. O(H n^2 D) for the
    first (one matrix product a head) against the decomposition's O(n^2 D) memory: the same numbers to rounding."""
    alpha, f = alpha.double(), f.double()
    n, D = alpha.shape[-1], f.shape[-1]
    attn_w = 1.0 - alpha.mean(0).diagonal()
    nan = torch.full((n,), float("nan"), dtype=torch.float64, device=alpha.device)
    total = torch.matmul(alpha, f).sum(0)                                              # (n, D)
    own = torch.einsum("hi,hid->id", alpha.diagonal(dim1=-2, dim2=-1), f)              # (n, D)
    attn_n = ratio_from_sums(total, own)
    if residual is None:
        return torch.stack([attn_w, attn_n, attn_w / 2, nan, nan])
    x = residual.double()
    total, own = total + x, own + x
    attnres_n = ratio_from_sums(total, own)
    if norm is None:
        return torch.stack([attn_w, attn_n, attn_w / 2, attnres_n, nan])
    b = torch.zeros(D, dtype=torch.float64, device=x.device) if bias is None else bias.double()
    scale = ((total + b).var(-1, unbiased=False) + norm.eps).rsqrt()                 # LayerNorm's input's
    gamma = norm.weight.double() if norm.weight is not None else torch.ones(D, dtype=torch.float64, device=x.device)

    def g(v):
        return (v - v.mean(-1, keepdim=True)) * scale[:, None] * gamma
    return torch.stack([attn_w, attn_n, attn_w / 2, attnres_n, ratio_from_sums(g(total), g(own))])


@torch.no_grad()
def mixing_ratios(cap: Capture, attentions: tuple[torch.Tensor, ...], lengths: torch.Tensor) -> torch.Tensor:
    """Every layer's mixing ratios for the last forward pass: (B, L, len(MEASURES), T) float64, NaN at padding.

    attentions: the model's output_attentions, L tensors (B, H, T, T); lengths (B,) real lengths. Computed from
    each token's row sum and own part (:func:`layer_ratios_fast`), never the (n, n, D) decomposition.
    """
    B, T = attentions[0].shape[0], attentions[0].shape[-1]
    out = torch.full((B, len(cap.blocks), len(MEASURES), T), float("nan"), dtype=torch.float64)
    for block in cap.blocks:
        alpha = attentions[block.index]
        if block.layer is not None and block.index not in cap.residual:
            raise RuntimeError("mixing needs Capture(model, vectors=True) around the forward pass")
        f_all = transformed_vectors(block, cap.values[block.index])                     # (B, H, T, D)
        for row in range(B):
            n = int(lengths[row])
            residual = None if block.layer is None else cap.residual[block.index][row, :n]
            out[row, block.index, :, :n] = layer_ratios_fast(alpha[row, :, :n, :n], f_all[row, :, :n], residual,
                                                             block.output.bias, block.post_norm).cpu()
    return out

"""The newer context-mixing views of the top [CLS] (docs/reference.md#newer-mixing-views): ALTI (Ferrando et al.
2022), GlobEnc (Modarressi et al. 2022), DecompX (Modarressi et al. 2023) and Value Zeroing (Mohebbi et al. 2023).

All four need a post-LN layer whose parts bertology finds from the modules' structure (:func:`layer_parts`): the
attention block of :mod:`bertology.norms.values` with its post-LayerNorm LN1 (:mod:`bertology.norms.mixing`), then a
feed-forward block of two linears W1 (D -> F) and W2 (F -> D) with an elementwise activation between them, and a
second LayerNorm LN2 over (FFN + residual), whose output is the layer's output. A pre-LN layer (ModernBERT, a
pre-norm decoder) or a layout bertology does not recognise gets none of ALTI, GlobEnc and DecompX
(:class:`MixingViewsUnsupported`, said in one line). Value Zeroing needs only the layer whose output it compares
(:func:`zeroing_blocks`: the element of the layers' ModuleList holding each attention module), so it runs on those
too, decoders included (a grouped key/value head's value vector is zeroed, so for every query head of its group).

Per layer l, one example of n tokens (no padding), i the receiving token, j the contributing one:

- ALTI: T_i(x_j) = g1(y_ij), g1 LN1's linear part with the token's own scale (:func:`bertology.norms.mixing.decompose`),
  y_i = LN1's real output; c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised to sum 1;
- GlobEnc: ||g2(T_i(x_j))||_2 with g2 LN2's linear part at the real LN2 input's scale (the FFN left out, as the paper
  does), the raw norms rolled out as the authors' code does (``globenc_rows="normalised"``: rows normalised to sum 1
  first, a variant of bertology's own);
- Value Zeroing: 1 - cos(y_i, y_i^{-j}), y the layer's real output and y^{-j} its output with token j's value vectors
  zeroed in every head (the layers below as in the intact pass), rows normalised to sum 1;
- each of the three is aggregated by rollout: R = C_L ... C_1 (no identity added: the residual is in C), view = R[t]
  with t the views' target (0, [CLS]; a decoder's last token, :func:`bertology.norms.analysis.view_target`);
- DecompX: the decomposition X (n, n, D), X[i, j] token j's part of token i's representation, from X = diag(input of
  layer 1) through attention, residual, LN1, FFN (activation as its zero-origin slope act(z)/(z + eps) at the real z),
  residual and LN2 of every layer, then the classifier head at position 0 (each linear; activations by their
  zero-origin slope), every bias split over the tokens by |<part, bias>| / (sum + eps) ("absdot", eps = 1e-12 as the
  authors' code): sum_j X[i, j] is the real hidden state (to eps) and the head's parts sum to the logits. The
  attention block's bias b_V W_O + b_O is split by the attention parts (the paper's eq. 5) or by attention +
  residual parts (the authors' code; config analysis.mixing_views); in the first layer b_V stays inside the value vectors
  (spread by the attention, as the authors' code) and only b_O is split. View: the predicted class's logit part of
  each token (signed); on a bare encoder (no head) ||X_L[0, j]||.

Glossary: n tokens, D hidden size, F the FFN's width, C classes, L layers, H heads, dh head size.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np
import torch

from bertology.pipeline.config import MixingViewsConfig, schema_section
from bertology.pipeline.errors import UserError
from bertology.models.hooks import hooks, stop_forward
from bertology.norms.values import (
    AttentionBlock,
    Capture,
    is_linear,
    attention_blocks,
    transformed_vectors,
)

VIEWS = ("alti", "globenc", "decompx", "value_zeroing")
#: views whose scores are signed (a diverging colour scale around 0)
SIGNED = ("decompx",)


class MixingViewsUnsupported(UserError, ValueError):
    """The model's layers are not the post-LN layout the newer mixing views decompose."""


@dataclass(frozen=True)
class LayerParts:
    """One post-LN layer: its attention block (with LN1 = block.post_norm), the FFN's linears W1 (F x D) and W2
    (D x F) and LN2, the LayerNorm whose output is the layer's output."""

    block: AttentionBlock
    ffn_in: torch.nn.Module
    ffn_out: torch.nn.Module
    final_norm: torch.nn.LayerNorm


def _inside(module: torch.nn.Module, root: torch.nn.Module) -> bool:
    return any(m is module for m in root.modules())


def layer_parts(model: torch.nn.Module) -> list[LayerParts]:
    """Every layer's :class:`LayerParts`, in layer order, or :class:`MixingViewsUnsupported` saying why not."""
    blocks = attention_blocks(model)
    out = []
    for b in blocks:
        if b.layer is None or b.post_norm is None:
            kind = "a pre-LN layer (no LayerNorm after attention + residual)" if b.residual_sum is not None else \
                "a layer whose residual layout bertology does not recognise"
            raise MixingViewsUnsupported(
                f"{type(model).__name__} layer {b.index} is {kind}: ALTI, GlobEnc and DecompX decompose "
                f"post-LN layers (attention, residual, LayerNorm, feed-forward, residual, LayerNorm)")
        rest = [m for m in b.layer.modules() if is_linear(m) and m is not b.output and not _inside(m, b.attention)]
        norms = [m for m in b.layer.modules() if isinstance(m, torch.nn.LayerNorm) and m is not b.post_norm
                 and not _inside(m, b.attention)]
        D = b.output_weight().shape[0]
        ok = len(rest) == 2 and len(norms) == 1 and rest[0].weight.shape[1] == D and \
            rest[1].weight.shape == (D, rest[0].weight.shape[0])
        if not ok:
            raise MixingViewsUnsupported(
                f"{type(model).__name__} layer {b.index}: bertology finds {len(rest)} feed-forward linears and "
                f"{len(norms)} LayerNorms after the attention block, not the two linears (D -> F -> D) and one "
                f"LayerNorm the newer mixing views decompose")
        out.append(LayerParts(b, rest[0], rest[1], norms[0]))
    return out


def head_linears(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The linears that may belong to a classifier head: every linear outside the encoder layers that is not an
    embedding. Which of them the head is, and in which order, :class:`PartsCapture` finds from the forward pass: the
    ones called after the last layer's output (a pooler's and the classifier's, in call order)."""
    blocks = attention_blocks(model)
    layer_mods = {id(m) for b in blocks if b.layer is not None for m in b.layer.modules()}
    return [m for m in model.modules() if is_linear(m) and not isinstance(m, torch.nn.Embedding)
            and id(m) not in layer_mods]


class PartsCapture:
    """Forward hooks (a context manager, beside :class:`~bertology.norms.values.Capture`) keeping per layer the
    FFN's pre-activation z = W1 h + b1 (B, T, F) and activation a (W2's input), LN2's input and output (B, T, D), and
    the head: the calls of the `head` candidates after the last layer's output, in call order (module, input (B, *),
    output (B, *)). A module shared by several layers (ALBERT) serves them in call order."""

    def __init__(self, model: torch.nn.Module, parts: list[LayerParts], head: list[torch.nn.Module]):
        self.model, self.parts, self.head = model, parts, head
        self.z: dict[int, torch.Tensor] = {}
        self.a: dict[int, torch.Tensor] = {}
        self.ln2_in: dict[int, torch.Tensor] = {}
        self.ln2_out: dict[int, torch.Tensor] = {}
        self.head_calls: list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor]] = []
        self._after = False
        self._last = parts[-1].block.index if parts else -1
        self._calls: dict[int, int] = {}
        self._scope = ExitStack()

    def _rank(self, module, kind: str) -> int | None:
        users = [p.block.index for p in self.parts if getattr(p, kind) is module]
        k = self._calls.get(id(module), 0)
        self._calls[id(module)] = k + 1
        return users[k] if k < len(users) else None

    def __enter__(self) -> PartsCapture:
        def reset(*_):
            for d in (self.z, self.a, self.ln2_in, self.ln2_out, self._calls):
                d.clear()
            self.head_calls.clear()
            self._after = False

        fwd = []
        seen: set[int] = set()
        for p in self.parts:
            for kind in ("ffn_in", "ffn_out", "final_norm"):
                mod = getattr(p, kind)
                if (id(mod), kind) in seen:
                    continue
                seen.add((id(mod), kind))
                fwd.append((mod, self._hook(kind)))
        fwd += [(m, self._head_hook) for m in self.head]
        with ExitStack() as scope:
            scope.enter_context(hooks(self.model, fwd=fwd, pre=[(self.model, reset)]))
            self._scope = scope.pop_all()
        return self

    def _hook(self, kind: str):
        def hook(module, args, output):
            layer = self._rank(module, kind)
            if layer is None:
                return
            x = args[0].detach()
            out = (output[0] if isinstance(output, tuple) else output).detach()
            if kind == "ffn_in":
                self.z[layer] = out
            elif kind == "ffn_out":
                self.a[layer] = x
            else:
                self.ln2_in[layer], self.ln2_out[layer] = x, out
                self._after = self._after or layer == self._last
        return hook

    def _head_hook(self, module, args, output):
        if self._after:
            self.head_calls.append((module, args[0].detach(), output.detach()))

    def head_of(self, row: int, target: int = 0) -> tuple[list[torch.nn.Module], list[torch.Tensor],
                                                          list[torch.Tensor]]:
        """The head's linears in call order and their input and output of row `row` (position `target` where the
        head saw positions)."""
        def pick(t: torch.Tensor) -> torch.Tensor:
            return t[row] if t.ndim == 2 else t[row, target]

        return ([m for m, _, _ in self.head_calls], [pick(i) for _, i, _ in self.head_calls],
                [pick(o) for _, _, o in self.head_calls])

    def __exit__(self, *exc) -> bool | None:
        """Removes every hook (:func:`bertology.models.hooks.hooks`)."""
        return self._scope.__exit__(*exc)


# ------------------------------------------------------------------------------------------------ pure arithmetic

def normalise_rows(c: torch.Tensor) -> torch.Tensor:
    """c (..., n, n) >= 0 -> rows divided by their sums (a row summing to 0 stays 0, as Mohebbi et al.'s code)."""
    s = c.sum(-1, keepdim=True)
    return torch.where(s > 0, c / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(c))


def rollout(c: torch.Tensor) -> torch.Tensor:
    """c (L, n, n) per-layer mixing matrices -> (n, n) R = C_L ... C_1 (no identity added: the residual is in C)."""
    out = c[0]
    for layer in c[1:]:
        out = layer @ out
    return out


def alti_matrix(parts: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """ALTI (Ferrando et al. 2022, eq. 8-9): parts (n, n, D) T_i(x_j), y (n, D) the real output y_i (sum_j T_i(x_j)
    plus what no token contributes) -> (n, n) max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised."""
    dist = (y[:, None, :] - parts).abs().sum(-1)
    c = (y.abs().sum(-1)[:, None] - dist).clamp(min=0)
    return normalise_rows(c)


def ln_linear(parts: torch.Tensor, norm: torch.nn.LayerNorm, real_in: torch.Tensor) -> torch.Tensor:
    """LayerNorm's linear part on parts (n, m, D) of each token's input, at the scale of the token's real input
    real_in (n, D): gamma * (v - mean(v)) / sqrt(var(real_in) + eps) -> (n, m, D) (beta left out)."""
    real = real_in.to(parts.dtype)
    scale = (real.var(-1, unbiased=False) + norm.eps).rsqrt()
    gamma = norm.weight.to(parts.dtype) if norm.weight is not None else 1.0
    return (parts - parts.mean(-1, keepdim=True)) * scale[:, None, None] * gamma


def globenc_matrix(ln1_parts: torch.Tensor, norm2: torch.nn.LayerNorm, ln2_in: torch.Tensor,
                   rows: str = "raw") -> torch.Tensor:
    """GlobEnc (Modarressi et al. 2022, N_ENC): ln1_parts (n, n, D) the LN1 decomposition (beta1 and b_O left out),
    LN2 and its real input (n, D) -> (n, n) ||g2(parts)||_2 (the FFN is not decomposed: its output is left out;
    beta2 left out). rows: "raw" (the authors' code rolls these out as they are) or "normalised" (rows divided by
    their sums, bertology's variant)."""
    c = torch.linalg.vector_norm(ln_linear(ln1_parts, norm2, ln2_in), dim=-1)
    return normalise_rows(c) if rows == "normalised" else c


def alti_globenc_layer(alpha: torch.Tensor, f: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None,
                       norm1: torch.nn.LayerNorm, y: torch.Tensor, norm2: torch.nn.LayerNorm, ln2_in: torch.Tensor,
                       rows: str = "raw", chunk_elements: int = 1 << 20) -> tuple[torch.Tensor, torch.Tensor]:
    """One post-LN layer's ALTI and GlobEnc matrices (:func:`alti_matrix` and :func:`globenc_matrix` of the LN1
    decomposition of :func:`bertology.norms.mixing.decompose`) -> ((n, n), (n, n)) float64, the same numbers to
    rounding, without the (n, n, D) decomposition ever whole in memory.

    alpha (H, n, n), f (H, n, D) the transformed vectors f_h(x_j), residual (n, D) the layer's input x, bias (D,) b_O
    or None, norm1 the LayerNorm after the residual; y (n, D) that LayerNorm's real output; norm2 and its real input
    ln2_in (n, D) (GlobEnc); rows: GlobEnc's "raw" or "normalised"; chunk_elements: the most decomposition entries
    held at once (ALTI).

    LayerNorm's linear part g1 is linear, so T_i(x_j) = g1(sum_h alpha_h[i, j] f_h(x_j) + [i = j] x_i)
    = s1_i (sum_h alpha_h[i, j] f'_h(x_j) + [i = j] x'_i), with f' and x' centred and multiplied by gamma1 once and
    s1_i = 1 / sqrt(var(LN1's input_i) + eps).
    ALTI: ||y_i - T_i(x_j)||_1 for a block of rows at a time (one batched product over the keys, K = H, and one L1
    distance kernel). GlobEnc: ||g2(T_i(x_j))||_2 = s2_i s1_i ||sum_h alpha_h[i, j] w_hj + [i = j] u_i|| with
    w = g2's centring and gamma2 applied to f', u to x': a quadratic form of each key's H x H Gram matrix of w,
    O(n^2 H^2) instead of O(n^2 D)."""
    alpha, f, x = alpha.double(), f.double(), residual.double()
    H, n, D = f.shape
    dev = x.device
    b = torch.zeros(D, dtype=torch.float64, device=dev) if bias is None else bias.double()
    ones = torch.ones(D, dtype=torch.float64, device=dev)
    g1 = norm1.weight.double() if norm1.weight is not None else ones
    g2 = norm2.weight.double() if norm2.weight is not None else ones
    s1 = ((torch.matmul(alpha, f).sum(0) + x + b).var(-1, unbiased=False) + norm1.eps).rsqrt()      # (n,)
    s2 = (ln2_in.double().var(-1, unbiased=False) + norm2.eps).rsqrt()
    fc = ((f - f.mean(-1, keepdim=True)) * g1).transpose(0, 1).contiguous()                       # (n_j, H, D)
    xc = (x - x.mean(-1, keepdim=True)) * g1                                                      # (n, D)
    keys_first = alpha.permute(2, 1, 0)                                                           # (n_j, n_i, H)
    # ALTI, a block of rows at a time
    y = y.double()
    y_l1 = y.abs().sum(-1)
    alti = torch.empty(n, n, dtype=torch.float64, device=dev)
    step = max(1, chunk_elements // max(n * D, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        t = torch.bmm(keys_first[:, lo:hi].contiguous(), fc).transpose(0, 1).contiguous()        # (c, n_j, D)
        t[:, lo:hi].diagonal(dim1=0, dim2=1).add_(xc[lo:hi].T)                                    # + x'_i at j = i
        t *= s1[lo:hi, None, None]
        alti[lo:hi] = (y_l1[lo:hi, None] - torch.cdist(y[lo:hi, None], t, p=1)[:, 0]).clamp(min=0)
    # GlobEnc from the Gram matrices
    w = (fc - fc.mean(-1, keepdim=True)) * g2                                                      # (n_j, H, D)
    u = (xc - xc.mean(-1, keepdim=True)) * g2                                                      # (n, D)
    gram = torch.bmm(w, w.transpose(1, 2))                                                         # (n_j, H, H)
    sq = (torch.bmm(keys_first, gram) * keys_first).sum(-1)                                        # (n_j, n_i)
    own = alpha.diagonal(dim1=-2, dim2=-1).T                                                       # (n, H) alpha_h[i, i]
    sq.diagonal().add_(2 * (own * torch.einsum("ihd,id->ih", w, u)).sum(-1) + (u * u).sum(-1))
    glob = sq.clamp(min=0).sqrt().T * (s1 * s2)[:, None]
    return normalise_rows(alti), (normalise_rows(glob) if rows == "normalised" else glob)


def split_bias(parts: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    """DecompX's "absdot" bias decomposition: parts (n, m, D) (or (m, D)), bias (D,) -> parts + w_ij bias with
    w_ij = |<parts_ij, bias>| / (sum_j |<parts_ij, bias>| + eps) (the authors' eps = 1e-12: a bias whose products
    are all 0 is dropped); eps = 0: exact shares, equal shares where every product is 0."""
    if bias is None:
        return parts
    b = bias.to(parts.dtype)
    w = (parts @ b).abs()
    s = w.sum(-1, keepdim=True)
    if eps > 0:
        w = w / (s + eps)
    else:
        m = parts.shape[-2]
        w = torch.where(s > 0, w / torch.where(s > 0, s, torch.ones_like(s)), torch.full_like(w, 1.0 / m))
    return parts + w[..., None] * b


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


def cosine_distance_matrix(intact: torch.Tensor, zeroed: torch.Tensor) -> torch.Tensor:
    """Value Zeroing (Mohebbi et al. 2023): intact (n, D) the layer's output, zeroed (n_j, n, D) its output with token
    j's value vectors zeroed -> (n, n) float64 C[i, j] = 1 - cos(intact_i, zeroed_j,i), rows normalised. The cosine
    is taken in float64 whatever the model's dtype: 1 - cos of vectors that differ little cancels, and in float32 its
    rounding (about 6e-8) is a sizeable part of the distances of a small effect."""
    cos = torch.nn.functional.cosine_similarity(zeroed.double(), intact[None].double(), dim=-1)  # (n_j, n_i)
    return normalise_rows((1 - cos).T.clamp(min=0))


# ------------------------------------------------------------------------------------------------ DecompX

def _dt(model) -> torch.dtype:
    return next(model.parameters()).dtype


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
    if o.decompx_bias_split == "attention_residual":
        res1 = split_bias(attn + xr, bias, eps)
    else:
        res1 = split_bias(attn, bias, eps) + xr
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


# ------------------------------------------------------------------------------------------------ Value Zeroing

def _first(output) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def _expand(output, copies: int):
    """A layer's output of one example (batch 1) repeated `copies` times along the batch."""
    if isinstance(output, torch.Tensor):
        return output.expand(copies, *output.shape[1:]).contiguous() if output.shape[0] == 1 else output
    if isinstance(output, (tuple, list)):
        return type(output)(_expand(o, copies) for o in output)
    return output


def _zero_values(block: AttentionBlock, out: torch.Tensor) -> torch.Tensor:
    """The value projection's output (n copies, n positions, *) with copy j's value vector at position j zeroed
    (every head)."""
    out = out.clone()
    n, T = out.shape[:2]
    H, dh = block.heads, block.head_dim
    j = torch.arange(n, device=out.device)
    if block.layout == "blocks":
        start, stop = block.value_columns()
        out[j, j, start:stop] = 0
    elif block.layout == "per_head":
        view = out.view(n, T, H, 3 * dh)
        view[j, j, :, 2 * dh:] = 0
    else:
        out[j, j] = 0
    return out


def zeroing_blocks(model: torch.nn.Module) -> list[AttentionBlock]:
    """The attention blocks Value Zeroing runs on: every one whose layer (``enclosing``, the element of the layers'
    ModuleList holding the attention module; its output is the layer's output) is found, whatever its residual and
    normalisation layout; else :class:`MixingViewsUnsupported`."""
    blocks = attention_blocks(model)
    missing = [b.index for b in blocks if b.enclosing is None]
    if missing:
        raise MixingViewsUnsupported(f"{type(model).__name__}: the layer holding the attention of layers {missing} is "
                                     f"not found: Value Zeroing compares a layer's outputs")
    return blocks


def removed_parts(alpha: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """What zeroing token j's value vectors takes from the attention output at position i: alpha (H, n, n), f (H, n, D)
    f_h(x_j) (value vectors through W_O^h, b_V included, b_O not) -> (n_j, n_i, D) sum_h alpha_h[i, j] f_h(x_j)."""
    return torch.bmm(alpha.permute(2, 1, 0).contiguous(), f.transpose(0, 1).contiguous())


@torch.no_grad()
def value_zeroing(model, parts: list[LayerParts] | list[AttentionBlock], inputs: dict[str, torch.Tensor],
                  method: str = "subtract") -> torch.Tensor:
    """Value Zeroing matrices of one example (inputs: model inputs of batch 1, no padding, n tokens) -> (L, n, n).

    parts: :func:`layer_parts` or :func:`zeroing_blocks` (only each block's ``enclosing`` layer, value and output
    projections are used). Grouped key/value heads: token j's key/value vectors are zeroed, which zeroes it for every
    query head (removed = sum over the H query heads of alpha_h[i, j] f_h(x_j), f_h from the group's vector). A
    causal layer's C_l is lower-triangular (token j changes no output before it).

    One intact forward keeps every layer's output, attention and value vectors. Then one more forward pass zeroes,
    in each layer l, token j's value vectors in copy j only: its attention output at position i is the intact one less
    sum_h alpha_h[i, j] f_h(x_j) (the attention weights are not renormalised: a zeroed value vector adds nothing).
    Forward hooks (:func:`bertology.models.hooks.hooks`) take layer l's output (n copies, n, D) to its distances and hand
    the next layer layer l's kept intact output in its place (repeated along the batch to the copies), so each
    layer runs on its intact input; the pass stops at the last layer's output (:func:`bertology.models.hooks.stop_forward`).

    method "subtract" (the default): each layer runs once on the intact input (batch 1) and W_O's output o (1, n, D)
    becomes o - removed (n copies, n, D), broadcast through the rest of the layer (residual, LayerNorm,
    feed-forward): the queries, keys, values and attention of the n copies, which are the intact ones, are not
    computed again, nor W_O on them. "forward": the n copies run each whole layer with the value projection's output
    zeroed at (copy j, token j) (the literal definition; about 4/3 the cost). They agree to rounding."""
    if method not in ("subtract", "forward"):
        raise ValueError(f"value_zeroing method must be 'subtract' or 'forward', got {method!r}")
    blocks = [getattr(p, "block", p) for p in parts]
    layers = []
    for b in blocks:
        if not any(b.enclosing is m for m in layers):
            layers.append(b.enclosing)
    kept: list = []

    def record(module, args, output):
        kept.append(output)

    with hooks(model, fwd=[(m, record) for m in layers]), Capture(model, vectors=True, norms=False) as cap:
        intact = model(**inputs, output_attentions=method == "subtract")
    if len(kept) != len(blocks):
        raise RuntimeError(f"value zeroing: {len(kept)} layer calls in the intact pass for {len(blocks)} layers")
    n = inputs["input_ids"].shape[1]
    removed: dict[int, torch.Tensor] = {}
    if method == "subtract":
        for b in blocks:
            f = transformed_vectors(b, cap.values[b.index])[0]                          # (H, n, D)
            removed[b.index] = removed_parts(intact.attentions[b.index][0].to(f.dtype), f)
    copies = 1 if method == "subtract" else n
    big = {k: v.expand(copies, *v.shape[1:]) for k, v in inputs.items()}
    scores: list[torch.Tensor] = []
    state = {"call": 0}                              # layer calls entered; the k-th is blocks[k - 1]'s layer

    def enter(module, args):
        state["call"] += 1

    def zero_hook(module, args, output):
        return _zero_values(blocks[state["call"] - 1], output)

    def subtract_hook(module, args, output):
        return output - removed[blocks[state["call"] - 1].index].to(output.dtype)

    def leave(module, args, output):
        l = state["call"] - 1
        zeroed = _first(output)                                                     # (n copies, n, D)
        if zeroed.shape[:2] != (n, n):
            raise RuntimeError(f"value zeroing: layer {blocks[l].index} gave {tuple(zeroed.shape)} for {n} copies "
                               f"of {n} tokens (method={method!r}; 'forward' runs the copies whole)")
        scores.append(cosine_distance_matrix(_first(kept[l])[0], zeroed))
        if l == len(blocks) - 1:
            stop_forward()
        return _expand(kept[l], copies)

    zeroed_at: list = []
    for b in blocks:
        module = b.output if method == "subtract" else b.value
        if not any(module is m for m in zeroed_at):
            zeroed_at.append(module)
    fwd = [(m, subtract_hook if method == "subtract" else zero_hook) for m in zeroed_at]
    with hooks(model, pre=[(m, enter) for m in layers], fwd=fwd + [(m, leave) for m in layers]) as scope:
        model(**big)
    if not scope.stopped:
        raise RuntimeError(f"value zeroing: the forward pass reached {len(scores)} of {len(blocks)} layers")
    return torch.stack(scores)


# ------------------------------------------------------------------------------------------------ one example

@dataclass
class ExampleViews:
    """One example's views: scores {view: (n,) float64} (the top [CLS] row of the aggregated matrix; DecompX's logit
    parts) and per layer {view: (L, n) float64} (row 0 of each layer's own matrix; DecompX: ||X_l[0, j]||)."""

    scores: dict[str, np.ndarray]
    layers: dict[str, np.ndarray]
    predicted: int | None = None
    #: max over layers of max |sum_j X_l[i, j] - h_l[i]| / max |h_l| (the decomposition against the real hidden
    #: states, every row i below the top layer and the target's row in it: rounding only, ~1e-6 in float32, where
    #: the layer is the layout DecompX follows)
    decompx_error: float = 0.0


@torch.no_grad()
def example_views(model, parts: list[LayerParts], head: list[torch.nn.Module], cap: Capture, pc: PartsCapture,
                  attentions, row: int, n: int, logits: torch.Tensor | None, seconds: dict[str, float],
                  inputs: dict[str, torch.Tensor] | None = None, target: int = 0,
                  options: MixingViewsConfig | None = None) -> ExampleViews:
    """ALTI, GlobEnc and DecompX of row `row` (real length n) of the last forward pass (run inside `cap` =
    ``Capture(model, vectors=True)`` and `pc`), and Value Zeroing from `inputs` (this example alone, batch 1, no
    padding; None: no Value Zeroing). logits: (C,) the row's real logits (None: a bare encoder). seconds: adds each
    view's time. options: how GlobEnc and DecompX are computed (config analysis.mixing_views; None: the schema's
    defaults, the authors' choices)."""
    options = options or schema_section("analysis.mixing_views")
    t0 = time.perf_counter()
    alti, glob = [], []
    for p in parts:
        b = p.block
        f = transformed_vectors(b, cap.values[b.index][row:row + 1, :n])[0]
        a, g = alti_globenc_layer(attentions[b.index][row, :, :n, :n], f, cap.residual[b.index][row, :n],
                                  b.output.bias, b.post_norm, cap.sum_out[b.index][row, :n], p.final_norm,
                                  pc.ln2_in[b.index][row, :n], options.globenc_rows)
        alti.append(a)
        glob.append(g)
    t1 = time.perf_counter()                        # ALTI's time holds the one pass both views share
    A, G = torch.stack(alti), torch.stack(glob)
    scores = {"alti": rollout(A)[target].cpu().numpy()}
    layers = {"alti": A[:, target].cpu().numpy(), "globenc": G[:, target].cpu().numpy()}
    t2 = time.perf_counter()
    scores["globenc"] = rollout(G)[target].cpu().numpy()
    t1, t2 = t2, time.perf_counter()
    seconds["alti"] = seconds.get("alti", 0.0) + (t1 - t0)
    seconds["globenc"] = seconds.get("globenc", 0.0) + (t2 - t1)

    t0 = time.perf_counter()
    dt = torch.float64 if _dt(model) == torch.float64 else torch.float32
    first = parts[0].block.index
    x0 = cap.residual[first][row, :n].to(dt)
    X = torch.zeros(n, n, x0.shape[-1], dtype=dt, device=x0.device)
    X[torch.arange(n), torch.arange(n)] = x0
    dx_layers, err = [], 0.0
    for k, p in enumerate(parts):
        i = p.block.index
        last = k == len(parts) - 1
        keep = slice(target, target + 1) if last else slice(None)       # the top layer: the target's row alone
        X, _ = decompx_layer(p, X, attentions[i][row, :, :n, :n], cap.sum_in[i][row, :n], pc.z[i][row, :n],
                             pc.a[i][row, :n], pc.ln2_in[i][row, :n], first=i == first, options=options, rows=keep)
        real = pc.ln2_out[i][row, :n][keep].to(X.dtype)
        err = max(err, float((X.sum(1) - real).abs().max() / real.abs().max().clamp(min=1e-30)))
        dx_layers.append(torch.linalg.vector_norm(X[0 if last else target], dim=-1).double().cpu().numpy())
    top = X[0]                                                                       # (n, D): the target's parts
    predicted = None
    mods, hin, hout = pc.head_of(row, target)
    if mods and logits is not None and mods[-1].weight.shape[0] == logits.shape[-1]:
        parts_logits = decompx_head(mods, top, hin, hout, options.decompx_epsilon)  # (n, C)
        predicted = int(logits.argmax())
        scores["decompx"] = parts_logits[:, predicted].double().cpu().numpy()
    else:
        scores["decompx"] = torch.linalg.vector_norm(top, dim=-1).double().cpu().numpy()
    layers["decompx"] = np.stack(dx_layers)
    seconds["decompx"] = seconds.get("decompx", 0.0) + (time.perf_counter() - t0)
    if inputs is not None:
        scores["value_zeroing"], layers["value_zeroing"] = value_zeroing_view(model, parts, inputs, seconds, target)
    return ExampleViews(scores, layers, predicted, err)


def value_zeroing_view(model, parts: list[LayerParts] | list[AttentionBlock], inputs: dict[str, torch.Tensor], seconds: dict[str, float],
                       target: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Value Zeroing of one example (inputs: batch 1, no padding) -> (row `target` of the rollout (n,), each layer's
    own row (L, n)). Its forwards reset a :class:`~bertology.norms.values.Capture` open on the model: run it after
    the capture's tensors are used."""
    t0 = time.perf_counter()
    V = value_zeroing(model, parts, inputs).double()
    seconds["value_zeroing"] = seconds.get("value_zeroing", 0.0) + (time.perf_counter() - t0)
    return rollout(V)[target].cpu().numpy(), V[:, target].cpu().numpy()

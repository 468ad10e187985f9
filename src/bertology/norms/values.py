"""Value norms (Kobayashi et al. 2020, *Attention is Not Only a Weight*; docs/reference.md#value-norms).

A head's output at token i is sum_j alpha_ij f_h(x_j) with f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h: the head's
value vector through the head's own columns of the attention output projection (the projection's bias b_O is
shared by the heads and left out, as in the paper). :class:`Capture` registers forward hooks on the model's
own modules, so the norms come out of the same forward pass that gives the attention (``output_attentions``):

    with Capture(model) as cap:
        out = model(input_ids=..., attention_mask=..., output_attentions=True)
    norms = cap.value_norms(lengths)            # (B, L, H, T), NaN at t >= length

The norm is computed from the value projection's output v (B, T, H, dh) and the Gram matrices
G_h = W_O^h^T W_O^h (dh x dh) as ||f_h(x_j)||^2 = v_j^T G_h v_j: dh/D of the cost of forming f.
With ``vectors=True`` the capture also keeps what the mixing analysis needs (the value vectors, the residual
stream entering each layer, and the post-LayerNorm's input and output).

Architectures (:func:`attention_blocks`, found from the modules' structure, never from the model's name):
BERT, RoBERTa, ELECTRA (``attention.self.value``, ``attention.output.dense``, ``attention.output.LayerNorm``),
DeBERTa-v2 (``value_proj``), DistilBERT (``v_lin``, ``out_lin``, ``sa_layer_norm``), ModernBERT (the fused
``Wqkv``, whose last third is V; ``Wo``; pre-LayerNorm: no LayerNorm after the residual).

Glossary: B rows of a batch, L layers, H heads, T positions, dh head size, D hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bertology.errors import UserError


class NormsUnsupported(UserError, ValueError):
    """The model's attention blocks cannot be found (an architecture bertology does not know)."""


@dataclass(frozen=True)
class AttentionBlock:
    """One layer's attention block, as modules of the model.

    layer: the encoder layer (its input is the residual stream x); value: the linear whose output holds V in
    its columns `value_cols` (B, T, H*dh after slicing); output: the output projection W_O (D x H*dh), b_O;
    post_norm: the LayerNorm applied to (attention output + residual) in a post-LN layer, None in a pre-LN
    layer (ModernBERT); residual_sum: in a pre-LN layer, the module whose input is x + attention (ModernBERT's
    ``mlp_norm``), None otherwise.
    """

    index: int
    layer: torch.nn.Module
    value: torch.nn.Linear
    value_cols: slice
    output: torch.nn.Linear
    post_norm: torch.nn.LayerNorm | None
    residual_sum: torch.nn.Module | None
    heads: int
    head_dim: int

    def head_weights(self) -> torch.Tensor:
        """W_O split per head: (H, D, dh), W_O^h = the columns of head h."""
        w = self.output.weight                                   # (D, H*dh)
        return w.view(w.shape[0], self.heads, self.head_dim).permute(1, 0, 2)

    def grams(self) -> torch.Tensor:
        """(H, dh, dh): G_h = W_O^h^T W_O^h, so that ||v W_O^h^T||^2 = v^T G_h v."""
        w = self.head_weights().double()
        return (w.transpose(1, 2) @ w).to(self.output.weight.dtype)


def _block(index: int, module: torch.nn.Module, heads: int) -> AttentionBlock | None:
    """The attention block of `module` if it is an encoder layer of a known structure, else None."""
    att = getattr(module, "attention", None)
    if att is not None and hasattr(att, "self") and hasattr(att, "output"):       # BERT, RoBERTa, ELECTRA, DeBERTa
        value = getattr(att.self, "value", None) or getattr(att.self, "value_proj", None)
        out, norm = getattr(att.output, "dense", None), getattr(att.output, "LayerNorm", None)
        if isinstance(value, torch.nn.Linear) and isinstance(out, torch.nn.Linear):
            return AttentionBlock(index, module, value, slice(None), out, norm, None, heads, out.in_features // heads)
    if att is not None and hasattr(att, "v_lin") and hasattr(att, "out_lin"):      # DistilBERT
        out = att.out_lin
        return AttentionBlock(index, module, att.v_lin, slice(None), out, getattr(module, "sa_layer_norm", None), None,
                              heads, out.in_features // heads)
    attn = getattr(module, "attn", None)
    if attn is not None and hasattr(attn, "Wqkv") and hasattr(attn, "Wo"):         # ModernBERT (pre-LN, fused qkv)
        d = attn.Wo.in_features
        if attn.Wqkv.out_features != 3 * d:
            return None
        return AttentionBlock(index, module, attn.Wqkv, slice(2 * d, 3 * d), attn.Wo, None,
                              getattr(module, "mlp_norm", None), heads, d // heads)
    return None


def attention_blocks(model: torch.nn.Module) -> list[AttentionBlock]:
    """Every layer's :class:`AttentionBlock`, in layer order (model: an encoder or a classifier around one)."""
    heads = int(model.config.num_attention_heads)
    blocks: list[AttentionBlock] = []
    for module in model.modules():
        block = _block(len(blocks), module, heads)
        if block is not None:
            blocks.append(block)
    n_layers = int(model.config.num_hidden_layers)
    if len(blocks) != n_layers:
        raise NormsUnsupported(
            f"found {len(blocks)} attention blocks in {type(model).__name__} for {n_layers} layers: bertology computes "
            f"value norms for BERT, RoBERTa, ELECTRA, DistilBERT, DeBERTa-v2 and ModernBERT layers; leave the norm "
            f"analyses out for this model (analysis.norms.enabled: false)")
    return blocks


def norms_unsupported(name_or_path: str) -> str | None:
    """Why value norms cannot be computed on the config's `model`, or None when they can (or it cannot be told
    yet): its classifier built on the meta device (:func:`bertology.models.meta_classifier`), searched for the
    attention blocks :func:`attention_blocks` needs, so the workflow can leave the norm analyses out before any
    job runs."""
    from bertology.models import meta_classifier

    model = meta_classifier(name_or_path)
    if model is None:
        return None
    try:
        attention_blocks(model)
    except NormsUnsupported as err:
        return str(err).split("; leave the norm")[0]
    return None


def head_values(block: AttentionBlock, value_out: torch.Tensor) -> torch.Tensor:
    """The value projection's output (B, T, *) -> the value vectors (B, T, H, dh) of every head (bias included)."""
    v = value_out[..., block.value_cols]
    if v.ndim != 3:
        raise NormsUnsupported(f"layer {block.index}'s value projection gave a {v.ndim}-d output (unpadded "
                               f"sequences?); value norms need (batch, positions, features)")
    return v.reshape(v.shape[0], v.shape[1], block.heads, block.head_dim)


def norms_from_values(v: torch.Tensor, grams: torch.Tensor) -> torch.Tensor:
    """v (B, T, H, dh), grams (H, dh, dh) -> ||f_h(x_t)|| (B, H, T) = sqrt(v^T G_h v)."""
    sq = (torch.einsum("bthi,hij->bthj", v, grams.to(v.dtype)) * v).sum(-1)      # (B, T, H)
    return sq.clamp_min(0).sqrt().transpose(1, 2)


def transformed_vectors(block: AttentionBlock, v: torch.Tensor) -> torch.Tensor:
    """v (B, T, H, dh) -> f_h(x_t) (B, H, T, D) = v_h W_O^h^T (b_O left out)."""
    return torch.einsum("bthi,hdi->bhtd", v, block.head_weights().to(v.dtype))


def mask_padding(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    """x (B, ..., T) float with NaN at positions t >= lengths[b] (lengths (B,) ints; None: unchanged)."""
    if lengths is None:
        return x
    t = torch.arange(x.shape[-1], device=x.device)
    pad = t[None, :] >= lengths.to(x.device)[:, None]                         # (B, T)
    shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (x.shape[-1],)
    return x.masked_fill(pad.view(shape), float("nan"))


def weighted_attention(alpha: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Norm-weighted attention ||alpha_ij f(x_j)|| = alpha_ij ||f(x_j)||.

    alpha (..., H, Q, K) attention probabilities; norms (..., H, K) value norms -> (..., H, Q, K).
    """
    return alpha * norms[..., None, :]


class Capture:
    """Forward hooks on every attention block of `model` while the block is entered (a context manager).

    Always kept, per layer: the value norms ||f_h(x_t)|| (B, H, T) float32. With ``vectors=True`` also: the
    value vectors (B, T, H, dh), the residual stream entering the layer (B, T, D), and the post-LayerNorm's
    input and output (B, T, D) (pre-LN layers: the input of ``residual_sum``, i.e. x + attention). Each
    forward pass overwrites what the previous one left (a module called twice in one pass keeps its last call).
    """

    def __init__(self, model: torch.nn.Module, *, vectors: bool = False):
        self.model, self.vectors = model, vectors
        self.blocks = attention_blocks(model)
        self._handles: list = []
        self.norms: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.residual: dict[int, torch.Tensor] = {}
        self.sum_in: dict[int, torch.Tensor] = {}
        self.sum_out: dict[int, torch.Tensor] = {}

    def __enter__(self) -> "Capture":
        for block in self.blocks:
            grams = block.grams().detach()
            self._handles.append(block.value.register_forward_hook(self._value_hook(block, grams)))
            if self.vectors:
                self._handles.append(block.layer.register_forward_pre_hook(self._residual_hook(block),
                                                                           with_kwargs=True))
                after = block.post_norm if block.post_norm is not None else block.residual_sum
                if after is not None:
                    self._handles.append(after.register_forward_hook(self._sum_hook(block)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _value_hook(self, block: AttentionBlock, grams: torch.Tensor):
        def hook(module, args, output):
            v = head_values(block, output).detach()
            self.norms[block.index] = norms_from_values(v, grams).float()
            if self.vectors:
                self.values[block.index] = v
        return hook

    def _residual_hook(self, block: AttentionBlock):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
            self.residual[block.index] = x.detach()
        return hook

    def _sum_hook(self, block: AttentionBlock):
        def hook(module, args, output):
            self.sum_in[block.index] = args[0].detach()
            self.sum_out[block.index] = output.detach()
        return hook

    def value_norms(self, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The last forward pass's value norms: (B, L, H, T) float32, NaN at t >= lengths[b] (lengths (B,))."""
        missing = [b.index for b in self.blocks if b.index not in self.norms]
        if missing:
            raise RuntimeError(f"no value projection output was captured for layers {missing}: run the forward "
                               f"pass inside the Capture block")
        out = torch.stack([self.norms[b.index] for b in self.blocks], dim=1)
        return mask_padding(out, lengths)

"""Value norms (Kobayashi et al. 2020, *Attention is Not Only a Weight*; docs/reference.md#value-norms).

A head's output at token i is sum_j alpha_ij f_h(x_j) with f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h: the head's
value vector through the head's own columns of the attention output projection (the projection's bias b_O is
shared by the heads and left out, as in the paper). :class:`Capture` registers forward hooks on the model's
own modules, so the norms come out of the same forward pass that gives the attention (``output_attentions``):

    with Capture(model) as cap:
        out = model(input_ids=..., attention_mask=..., output_attentions=True)
    norms = cap.value_norms(lengths)            # (B, L, H, T), NaN at t >= length

The norm is computed from the value projection's output v (B, T, H, dh) and the triangular factor R_h of
W_O^h = Q_h R_h (dh x dh, once per capture) as ||f_h(x_j)|| = ||R_h v_j||: dh/D of the cost of forming f.
With ``vectors=True`` the capture also keeps what the mixing analysis needs (the value vectors, the residual
stream entering each layer, and the post-LayerNorm's input and output).

Architectures (:func:`attention_blocks`), found from the modules' structure, never from the model's name: an
attention module is one with a value projection among its children (a linear named ``value``, ``v``,
``v_proj``, ``v_lin`` or ``value_proj``; or a fused query-key-value linear: ``Wqkv``, whose last third is V,
ModernBERT's layout, or ``in_proj``, whose per-head thirds [q_h k_h v_h] hold V last plus a separate ``v_bias``
parameter, DeBERTa v1's, or ``query_key_value``, the same per-head thirds, BLOOM's and GPT-NeoX's), and its output projection W_O is the linear that takes the heads' concatenated
outputs: a child of that module (``o``, ``o_proj``, ``out_lin``, ``out_proj``, ``Wo``, ``dense``) or of its
sibling ``output`` (BERT's ``attention.output.dense``). A linear is anything with a 2-d ``weight`` (I-BERT's
QuantLinear included). Modules shared by several layers (ALBERT: ``num_hidden_groups`` groups) serve each of
their layers: a call's layer is its rank among the calls of the forward pass (the encoder runs its layers in
order), and :meth:`Capture.value_norms` checks that every layer was seen once.

For the mixing analysis a block also names, where its layout is recognised, the layer whose input is the
residual stream (the enclosing element of a ModuleList), and either the post-LayerNorm applied to
(attention + residual) (a LayerNorm beside the output projection, BERT's and ALBERT's; the LayerNorm of the
attention module's wrapper when the projection is inside the attention module, MPNet's; DistilBERT's
``sa_layer_norm``) or, in a pre-LN layer, the module whose input is x + attention (ModernBERT's ``mlp_norm``).
Elsewhere ``layer`` is None and the mixing analysis gives only the attention measures.

Glossary: B rows of a batch, L layers, H heads, T positions, dh head size, D hidden size.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import torch

from bertology.models.layers import CallRank, layer_modules
from bertology.pipeline.errors import UserError
from bertology.models.hooks import hooks

VALUE_NAMES = ("value", "v", "v_proj", "v_lin", "value_proj")
# V's columns: the last (the key/value heads' share of the) block; each head's last third (``query_key_value``:
# BLOOM's and GPT-NeoX's per-head [q_h k_h v_h])
FUSED_NAMES = {"Wqkv": "blocks", "c_attn": "blocks", "in_proj": "per_head", "query_key_value": "per_head"}
OUTPUT_NAMES = ("o", "o_proj", "out_lin", "out_proj", "Wo", "dense", "c_proj")
# a child of the attention module that normalises the heads' outputs before W_O (DiffLlama's differential attention)
HEAD_NORM_NAMES = ("groupnorm",)
# a pre-norm decoder layer (Llama, Qwen2, Mistral, Gemma, ...): the norm before attention, the norm whose input is
# x + attention
PRE_NORM_NAMES = ("input_layernorm", "post_attention_layernorm")


class NormsUnsupported(UserError, ValueError):
    """The model's attention blocks cannot be found (an architecture bertology does not know)."""


def is_linear(module) -> bool:
    """A linear layer: a module with a 2-d ``weight`` (torch's Linear, I-BERT's QuantLinear, GPT-2's Conv1D, ...)."""
    w = getattr(module, "weight", None)
    return isinstance(module, torch.nn.Module) and isinstance(w, torch.Tensor) and w.ndim == 2


def is_conv1d(module) -> bool:
    """GPT-2's ``Conv1D`` (transformers.pytorch_utils): a linear whose weight is stored (in, out), y = x W + b,
    told by its ``nx`` (in) and ``nf`` (out features) and a weight of shape (nx, nf)."""
    nf, nx = getattr(module, "nf", None), getattr(module, "nx", None)
    return is_linear(module) and isinstance(nf, int) and isinstance(nx, int) and tuple(module.weight.shape) == (nx, nf)


def linear_weight(module) -> torch.Tensor:
    """A linear's weight as torch's Linear holds it, (out, in), y = x W^T + b: Conv1D's (in, out) transposed (a
    view)."""
    return module.weight.T if is_conv1d(module) else module.weight


@dataclass(frozen=True)
class AttentionBlock:
    """One layer's attention block, as modules of the model.

    attention: the module holding the value projection; value: the linear whose output holds V (layout
    "plain": all of its columns; "blocks": the last KV*dh of the fused [q (H*dh) | k (KV*dh) | v (KV*dh)]
    columns, the last third where KV = H; "per_head": the last third of each head's 3*dh columns, plus
    `value_bias` (H*dh,) added after); output: the output projection W_O (D x H*dh), b_O (a Conv1D's (H*dh, D)
    weight is read transposed, :func:`linear_weight`); layer: the encoder layer whose input is the residual
    stream x (None: not recognised, no mixing); post_norm: the LayerNorm applied to (attention output +
    residual) in a post-LN layer, None otherwise; residual_sum: in a pre-LN layer, the module whose input is
    x + attention (ModernBERT's ``mlp_norm``, a pre-norm decoder's ``post_attention_layernorm``).
    kv_heads: KV, the key/value heads (grouped-query attention: KV < H, KV divides H; query head h reads the
    value of key/value head h // (H / KV), transformers' ``repeat_kv``); enclosing: the element of the layers'
    ModuleList that holds the attention module (None: not found), whether or not its residual layout is
    recognised.
    """

    index: int
    attention: torch.nn.Module
    layer: torch.nn.Module | None
    value: torch.nn.Module
    layout: str
    output: torch.nn.Module
    post_norm: torch.nn.LayerNorm | None
    residual_sum: torch.nn.Module | None
    heads: int
    head_dim: int
    value_bias: torch.Tensor | None = None
    kv_heads: int | None = None
    enclosing: torch.nn.Module | None = None

    @property
    def groups(self) -> int:
        """KV, the key/value heads (H where the attention does not group them)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    def output_weight(self) -> torch.Tensor:
        """W_O as (D, H*dh), whatever the module stores (Conv1D: (H*dh, D))."""
        return linear_weight(self.output)

    def head_weights(self) -> torch.Tensor:
        """W_O split per head: (H, D, dh), W_O^h = the columns of (query) head h."""
        w = self.output_weight()                                 # (D, H*dh)
        return w.reshape(w.shape[0], self.heads, self.head_dim).permute(1, 0, 2)

    def factors(self) -> torch.Tensor:
        """(H, dh, dh): M_h = R_h^T with W_O^h = Q_h R_h (reduced QR), so that ||v W_O^h^T|| = ||v M_h||."""
        w = self.head_weights().double()                          # (H, D, dh)
        r = torch.linalg.qr(w, mode="r").R                         # (H, min(D, dh), dh)
        return r.transpose(1, 2).contiguous().to(self.output.weight.dtype)

    def value_columns(self) -> tuple[int, int]:
        """(start, stop) of V's KV*dh features in a "blocks" layout's fused output [q | k | v] (its last KV*dh)."""
        width = linear_weight(self.value).shape[0]
        return width - self.groups * self.head_dim, width

    def value_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(W_V (KV*dh, D_in), b_V (KV*dh,) or None): the rows of the value linear that make V, key/value head after
        key/value head (KV = H without grouped-query attention; query head h reads rows of head h // (H / KV))."""
        w, b = linear_weight(self.value), getattr(self.value, "bias", None)
        hd = self.groups * self.head_dim
        if self.layout == "blocks":
            rows = torch.arange(*self.value_columns(), device=w.device)
        elif self.layout == "per_head":
            rows = (torch.arange(self.heads, device=w.device)[:, None] * 3 * self.head_dim + 2 * self.head_dim
                    + torch.arange(self.head_dim, device=w.device)[None, :]).reshape(-1)
        else:
            rows = torch.arange(hd, device=w.device)
        bias = None if b is None else b[rows]
        if self.value_bias is not None:
            bias = self.value_bias if bias is None else bias + self.value_bias
        return w[rows], bias


def _children(module: torch.nn.Module) -> dict[str, torch.nn.Module]:
    return dict(module.named_children())


def _value(module: torch.nn.Module) -> tuple[torch.nn.Module, str] | None:
    kids = _children(module)
    for name in VALUE_NAMES:
        if is_linear(kids.get(name)):
            return kids[name], "plain"
    for name, layout in FUSED_NAMES.items():
        if is_linear(kids.get(name)):
            return kids[name], layout
    return None


def _output(module: torch.nn.Module, parent: torch.nn.Module | None, width: int):
    """(W_O, its container) taking `width` inputs: a child of the attention module, or of its sibling ``output``."""
    places = [module]
    if parent is not None and isinstance(getattr(parent, "output", None), torch.nn.Module):
        places.append(parent.output)
    for place in places:
        kids = _children(place)
        for name in OUTPUT_NAMES:
            m = kids.get(name)
            if is_linear(m) and m is not module and linear_weight(m).shape[1] == width:
                return m, place
    return None


def _layer_norms(module: torch.nn.Module) -> list[torch.nn.LayerNorm]:
    return [m for m in module.children() if isinstance(m, torch.nn.LayerNorm)]


def enclosing_layer(module: torch.nn.Module, names: dict, modules: dict) -> torch.nn.Module | None:
    """The element of a ModuleList (the model's layers) that holds `module`, or None."""
    name = names[module]
    while name:
        up = name.rsplit(".", 1)[0] if "." in name else ""
        if isinstance(modules.get(up), torch.nn.ModuleList):
            return modules[name]
        name = up
    return None


def _is_norm(module) -> bool:
    """A normalisation module: torch's LayerNorm or RMSNorm, or a model's own class named ``*Norm``/``*NormNd``
    (LlamaRMSNorm, GemmaRMSNorm, ...)."""
    return isinstance(module, (torch.nn.LayerNorm, getattr(torch.nn, "RMSNorm", torch.nn.LayerNorm))) or \
        "Norm" in type(module).__name__


def _pre_norm_sum(attention, layer, config) -> torch.nn.Module | None:
    """A pre-norm decoder layer's module whose input is x + attention: its ``post_attention_layernorm``, where the
    layer holds the attention module and exactly two norms, ``input_layernorm`` and ``post_attention_layernorm``
    (Llama, Qwen2, Mistral, Gemma, ...), and the config does not run attention and feed-forward in parallel
    (``use_parallel_residual``/``parallel_attn``: both read x, GPT-NeoX). Else None: a sandwich layer (Gemma 2's
    four norms) or a post-norm one (OLMo 2 normalises the attention's output before the residual)."""
    kids = _children(layer)
    norms = [n for n, m in kids.items() if _is_norm(m)]
    if sorted(norms) != sorted(PRE_NORM_NAMES) or not any(m is attention for m in kids.values()):
        return None
    if getattr(config, "use_parallel_residual", False) or getattr(config, "parallel_attn", False):
        return None
    return kids["post_attention_layernorm"]


def _residual_layout(attention, parent, container, names, modules, config=None):
    """(layer, post_norm, residual_sum) of the mixing analysis where the layout is recognised, else Nones."""
    layer = enclosing_layer(attention, names, modules)
    if layer is None:
        return None, None, None
    if container is not attention and len(_layer_norms(container)) == 1:             # BERT: output.LayerNorm
        return layer, _layer_norms(container)[0], None
    if container is attention:
        if len(_layer_norms(attention)) == 1:                                         # ALBERT
            return layer, _layer_norms(attention)[0], None
        if parent is not None and parent is not layer and len(_layer_norms(parent)) == 1 and \
                not any(is_linear(m) for m in parent.children()):                      # MPNet: a wrapper with a LN
            return layer, _layer_norms(parent)[0], None
        if isinstance(getattr(layer, "sa_layer_norm", None), torch.nn.LayerNorm):     # DistilBERT
            return layer, layer.sa_layer_norm, None
        if getattr(layer, "attn", None) is attention and isinstance(getattr(layer, "mlp_norm", None), torch.nn.Module):
            return layer, None, layer.mlp_norm                                        # ModernBERT (pre-LN)
        pre = _pre_norm_sum(attention, layer, config)
        if pre is not None:
            return layer, None, pre                                                   # a pre-norm decoder
    return None, None, None


def _widths(value: torch.nn.Module, layout: str, heads: int, kv: int) -> tuple[int, int] | None:
    """(V's width KV*dh, W_O's input width H*dh) of a value linear, or None where its features do not split so."""
    out = linear_weight(value).shape[0]
    if layout == "per_head":
        return (out // 3, out // 3) if out % 3 == 0 else None
    if layout == "blocks":                                     # [q (H dh) | k (KV dh) | v (KV dh)]
        if out % (heads + 2 * kv):
            return None
        dh = out // (heads + 2 * kv)
        return kv * dh, heads * dh
    if out % kv:
        return None
    return out, out // kv * heads


def attention_blocks(model: torch.nn.Module) -> list[AttentionBlock]:
    """Every layer's :class:`AttentionBlock`, in layer order (model: an encoder, a decoder or a classifier around
    one).

    Grouped-query attention (``config.num_key_value_heads`` KV < H, KV dividing H): the value projection has
    KV*dh outputs and W_O takes H*dh inputs. A module shared by several layers (ALBERT's ``num_hidden_groups``
    groups of consecutive layers) gives one block per layer, the same modules under each layer's index."""
    heads = int(model.config.num_attention_heads)
    kv = int(getattr(model.config, "num_key_value_heads", None) or heads)
    if kv <= 0 or heads % kv:
        kv = heads
    modules = dict(model.named_modules())
    names = {m: n for n, m in modules.items()}
    found = []
    for name, module in modules.items():
        value = _value(module)
        if value is None:
            continue
        v, layout = value
        parent = modules.get(name.rsplit(".", 1)[0] if "." in name else "")
        widths = _widths(v, layout, heads, kv if layout != "per_head" else heads)
        if widths is None:
            continue
        width, out_width = widths
        out = _output(module, parent, out_width)
        if out is None or out_width % heads:
            continue
        extra = getattr(module, "v_bias", None) if layout == "per_head" else None
        layer, post_norm, residual_sum = _residual_layout(module, parent, out[1], names, modules, model.config)
        groups = width // (out_width // heads)
        found.append((module, layer, v, layout, out[0], post_norm, residual_sum, out_width // heads,
                      extra if isinstance(extra, torch.Tensor) else None, None if groups == heads else groups,
                      enclosing_layer(module, names, modules)))
    n_layers = int(model.config.num_hidden_layers)
    layers = layer_modules(model, [f[0] for f in found])       # shared (ALBERT): each group's for its layers
    if layers is None:
        raise NormsUnsupported(
            f"found {len(found)} attention blocks in {type(model).__name__} for {n_layers} layers: bertology computes "
            f"value norms for attention modules with a value projection and an output projection it can find "
            f"(docs/reference.md#value-norms); leave the norm analyses out for this model "
            f"(analysis.norms.enabled: false)")
    mixed = [b for b in found if any(n in _children(b[0]) for n in HEAD_NORM_NAMES)]
    if mixed:
        raise NormsUnsupported(f"{type(model).__name__}'s attention normalises each head's output before the output "
                               f"projection ({type(mixed[0][0]).__name__}: differential attention): a head's output is "
                               f"not sum_j alpha_ij f_h(x_j); leave the norm analyses out for this model "
                               f"(analysis.norms.enabled: false)")
    quant = getattr(model.config, "quant_mode", False)
    if quant:
        raise NormsUnsupported(f"{type(model).__name__} runs in integer mode (quant_mode: true): its value vectors "
                               f"are quantised after the projection; leave the norm analyses out for this model "
                               f"(analysis.norms.enabled: false)")
    by_module = {id(f[0]): f for f in found}
    return [AttentionBlock(i, *by_module[id(m)][:7], heads, *by_module[id(m)][7:]) for i, m in enumerate(layers)]


def norms_unsupported(name_or_path: str) -> str | None:
    """Why value norms cannot be computed on the config's `model`, or None when they can (or it cannot be told
    yet): its classifier built on the meta device (:func:`bertology.models.loading.meta_classifier`), searched for the
    attention blocks :func:`attention_blocks` needs, so the workflow can leave the norm analyses out before any
    job runs."""
    from bertology.models.loading import meta_classifier

    model = meta_classifier(name_or_path)
    if model is None:
        return None
    try:
        attention_blocks(model)
    except NormsUnsupported as err:
        return str(err).split("; leave the norm")[0]
    return None


def head_values(block: AttentionBlock, value_out) -> torch.Tensor:
    """The value projection's output (B, T, *) -> the value vectors (B, T, H, dh) of every (query) head, bias
    included.

    Grouped-query attention (KV < H key/value heads): the KV vectors (B, T, KV, dh) repeated to the H query heads,
    query head h taking key/value head h // (H / KV) (transformers' ``repeat_kv`` order; a view, no copy until
    used). A tuple output (I-BERT's QuantLinear: (output, scale)) gives its first element."""
    if isinstance(value_out, (tuple, list)):
        value_out = value_out[0]
    if value_out.ndim != 3:
        raise NormsUnsupported(f"layer {block.index}'s value projection gave a {value_out.ndim}-d output (unpadded "
                               f"sequences?); value norms need (batch, positions, features)")
    B, T, _ = value_out.shape
    H, G, dh = block.heads, block.groups, block.head_dim
    if block.layout == "blocks":
        start, stop = block.value_columns()
        v = value_out[..., start:stop].reshape(B, T, G, dh)
    elif block.layout == "per_head":
        v = value_out.reshape(B, T, H, 3 * dh)[..., 2 * dh:]
    else:
        v = value_out.reshape(B, T, G, dh)
    if block.value_bias is not None:
        v = v + block.value_bias.view(H, dh).to(v.dtype)
    if G != H:
        v = v[:, :, :, None, :].expand(B, T, G, H // G, dh).reshape(B, T, H, dh)
    return v


def norms_from_values(v: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """v (B, T, H, dh), factors (H, dh, r) (:meth:`AttentionBlock.factors`) -> ||f_h(x_t)|| (B, H, T) = ||v_h M_h||
    (one batched matrix product per layer: dh/D of the cost of forming f)."""
    B, T, H, dh = v.shape
    x = v.permute(2, 0, 1, 3).reshape(H, B * T, dh)
    return torch.linalg.vector_norm(torch.bmm(x, factors.to(v.dtype)), dim=-1).view(H, B, T).transpose(0, 1)


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

    Kept per layer: the value norms ||f_h(x_t)|| (B, H, T) float32 (unless ``norms=False``: the caller has
    them already, e.g. from the store's `value_norm`). With ``vectors=True`` also: the
    value vectors (B, T, H, dh), the residual stream entering the layer (B, T, D), and the post-LayerNorm's
    input and output (B, T, D) (pre-LN layers: the input of ``residual_sum``, i.e. x + attention), for the
    blocks whose ``layer`` is known. Each forward pass of `model` starts afresh (a forward pre-hook on it);
    within one, a module's k-th call belongs to the k-th layer that uses it (ALBERT's shared module).
    """

    def __init__(self, model: torch.nn.Module, *, vectors: bool = False, norms: bool = True):
        self.model, self.vectors, self.keep_norms = model, vectors, norms
        self.blocks = attention_blocks(model)
        self._scope = ExitStack()
        self.norms: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.residual: dict[int, torch.Tensor] = {}
        self.sum_in: dict[int, torch.Tensor] = {}
        self.sum_out: dict[int, torch.Tensor] = {}
        self._rank = CallRank([b.value for b in self.blocks])

    def _reset(self) -> None:
        self._rank.reset()
        for kept in (self.norms, self.values, self.residual, self.sum_in, self.sum_out):
            kept.clear()

    def _layers_of(self, module: torch.nn.Module, field: str) -> list[AttentionBlock]:
        return [b for b in self.blocks if getattr(b, field) is module]

    def __enter__(self) -> "Capture":
        pre = [(self.model, lambda *_: self._reset())]
        fwd = []
        seen: set[int] = set()
        for block in self.blocks:
            if id(block.value) in seen:
                continue
            seen.add(id(block.value))
            users = self._layers_of(block.value, "value")
            fwd.append((block.value, self._value_hook(users, block.factors().detach())))
            if self.vectors and block.layer is not None:
                pre.append((block.layer, self._residual_hook(users)))
                after = block.post_norm if block.post_norm is not None else block.residual_sum
                if after is not None:
                    fwd.append((after, self._sum_hook(users)))
        with ExitStack() as scope:               # the pre-hooks take keyword arguments, the forward hooks do not
            scope.enter_context(hooks(self.model, pre=pre, with_kwargs=True))
            scope.enter_context(hooks(self.model, fwd=fwd))
            self._scope = scope.pop_all()
        return self

    def __exit__(self, *exc) -> bool | None:
        """Removes every hook (:func:`bertology.models.hooks.hooks`)."""
        return self._scope.__exit__(*exc)

    def _next(self, kind: str, users: list[AttentionBlock]) -> AttentionBlock | None:
        """The block of this call of a module used by the layers `users` (its k-th call: the k-th user;
        :class:`bertology.models.layers.CallRank`)."""
        layer = self._rank.next(users[0].value, kind)
        return None if layer is None else self.blocks[layer]

    def _value_hook(self, users: list[AttentionBlock], factors: torch.Tensor):
        def hook(module, args, output):
            block = self._next("value", users)
            if block is None:
                return
            v = head_values(block, output).detach()
            if self.keep_norms:
                self.norms[block.index] = norms_from_values(v, factors).float()
            if self.vectors:
                self.values[block.index] = v
        return hook

    def _residual_hook(self, users: list[AttentionBlock]):
        def hook(module, args, kwargs):
            block = self._next("residual", users)
            if block is not None:
                x = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
                self.residual[block.index] = x.detach()
        return hook

    def _sum_hook(self, users: list[AttentionBlock]):
        def hook(module, args, output):
            block = self._next("sum", users)
            if block is not None:
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

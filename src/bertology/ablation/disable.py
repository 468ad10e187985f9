"""The disabling mechanism (Kovaleva et al. 2019, section 4.6; DESIGN section 6).

A *disabled* head attends uniformly to the real tokens of its input: A[t, s] = 1/n for every key s < n
(n = real length, specials included) and 0 on padding, applied to the attention probabilities inside
the forward pass, so its output is the mean of the value vectors of the real tokens.

Whatever the layer's own mask (a sliding window in ModernBERT's local layers, DeBERTa's masked padded
queries), a disabled head is uniform over the example's real tokens (:func:`real_keys`).

transformers 5 has no ``head_mask``. Two ways into the attention, chosen by :func:`enable_disabling`:

- models whose attention follows ``transformers.AttentionInterface`` (BERT, RoBERTa, ELECTRA, DistilBERT,
  ModernBERT, ...): an attention function registered under :data:`ATTN_IMPLEMENTATION` computes the eager
  attention and overwrites the probabilities of the disabled heads; the eager padding-mask builder is
  registered under the same name with ``AttentionMaskInterface`` (a custom name otherwise gets *no* mask);
- DeBERTa-v2, whose DisentangledSelfAttention computes its attention itself: a forward hook rewrites the
  disabled heads' contexts (and probabilities) from the module's own value projection.

Which heads are disabled: ``with disabled_heads(model, mask): model(...)`` on every architecture, or the
forward keyword ``model(..., bertology_disabled=mask)`` where the model hands keywords down to its
attention; mask (L, H) or (L, N, H) bool. Each attention module knows its layer (set by
:func:`enable_disabling`, as DistilBERT's has no ``layer_idx``). Load a model with
``bertology.models.load_encoder(path, classifier=True)`` and switch it over with :func:`enable_disabling`.

Glossary: N rows of a batch, L layers, H heads, Q query positions, K key positions, dh head size.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

ATTN_IMPLEMENTATION = "bertology_disable"
DISABLED_KWARG = "bertology_disabled"
_STATE = "_bertology_disable_state"   # the model's DisableState, also set on each attention module
_LAYER = "_bertology_layer"           # an attention module's layer index


def key_keep_mask(attention_mask: torch.Tensor | None, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Which keys each query may see: (N, 1, Q, K) bool (or (1, 1, Q, K) all True without a mask).

    attention_mask: None, a boolean mask (True = keep) or an additive float mask (0 = keep, dtype
    minimum = masked), (N, 1, Q', K) with Q' >= Q (only its first Q query rows are used).
    """
    q_len, k_len = query.shape[-2], key.shape[-2]
    if attention_mask is None:
        return torch.ones(1, 1, q_len, k_len, dtype=torch.bool, device=query.device)
    mask = attention_mask[:, :, :q_len, :k_len]
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


def real_keys(attention_mask: torch.Tensor | None, key: torch.Tensor) -> torch.Tensor:
    """The example's real tokens as keys: (N, 1, 1, K) bool (or (1, 1, 1, K) all True without a mask).

    attention_mask: a layer's mask (bool, or additive float), (N, 1, Q', K) with every query row. A key is real
    when some query may see it: padding is hidden from every query, while a real token is seen at least by
    itself, whatever else the layer's own mask hides (a sliding window, DeBERTa's padded query rows).
    """
    if attention_mask is None:
        return torch.ones(1, 1, 1, key.shape[-2], dtype=torch.bool, device=key.device)
    mask = attention_mask[..., : key.shape[-2]]
    keep = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
    return keep.any(dim=-2, keepdim=True)


def uniform_weights(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(N, 1, Q|1, K) bool keep-mask -> weights of the same shape: 1/n on the n visible keys, 0 elsewhere."""
    keep_f = keep.to(dtype)
    return keep_f / keep_f.sum(dim=-1, keepdim=True).clamp_min(1.0)


@dataclass
class AttentionParts:
    """One layer's attention computed once, from which any set of disabled heads is assembled.

    weights: (N, H, Q, K) softmax probabilities; context: (N, H, Q, dh) = weights @ V;
    uniform: (N|1, 1, 1, K) uniform weights over the real keys (the same for every query);
    uniform_context: (N, H, 1, dh) = uniform @ V (broadcast over the queries).
    """

    weights: torch.Tensor
    context: torch.Tensor
    uniform: torch.Tensor
    uniform_context: torch.Tensor

    def context_for(self, disabled: torch.Tensor | None) -> torch.Tensor:
        """disabled: (N, H) bool or None -> context (N, Q, H, dh) with the disabled heads uniform."""
        if disabled is None:
            return self.context.transpose(1, 2).contiguous()
        context = torch.where(disabled[:, :, None, None], self.uniform_context, self.context)
        return context.transpose(1, 2).contiguous()

    def weights_for(self, disabled: torch.Tensor | None) -> torch.Tensor:
        """disabled: (N, H) bool or None -> probabilities (N, H, Q, K) with the disabled heads uniform."""
        if disabled is None:
            return self.weights
        return torch.where(disabled[:, :, None, None], self.uniform.expand_as(self.weights), self.weights)


def attention_parts(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, scaling: float, *, dropout: float = 0.0,
                    training: bool = False, with_uniform: bool = True) -> AttentionParts:
    """Eager attention (as transformers' BERT computes it) plus the uniform alternative.

    query: (N, H, Q, dh); key, value: (N, H, K, dh); attention_mask: additive (N, 1, Q, K) or None.
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, : query.shape[-2], : key.shape[-2]]
    weights = torch.nn.functional.softmax(scores, dim=-1)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=training)
    context = torch.matmul(weights, value)
    if not with_uniform:
        return AttentionParts(weights, context, weights[:, :1], context)
    uniform = uniform_weights(real_keys(attention_mask, key), weights.dtype)
    uniform_context = torch.matmul(uniform, value)
    return AttentionParts(weights, context, uniform, uniform_context)


def layer_rows(disabled: torch.Tensor | None, layer: int | None, n_rows: int, n_heads: int) -> torch.Tensor | None:
    """The (N, H) bool rows of one layer from a model-wide mask (L, H) or (L, N, H); None if none."""
    if disabled is None:
        return None
    if layer is None:
        raise ValueError("the attention module has no layer index; call enable_disabling(model) first")
    if not isinstance(disabled, torch.Tensor) or disabled.dtype != torch.bool:
        raise ValueError(f"{DISABLED_KWARG} must be a bool tensor of shape (L, H) or (L, N, H)")
    if disabled.ndim == 2 and disabled.shape[1] == n_heads:
        rows = disabled[layer][None].expand(n_rows, n_heads)
    elif disabled.ndim == 3 and disabled.shape[1:] == (n_rows, n_heads):
        rows = disabled[layer]
    else:
        raise ValueError(f"{DISABLED_KWARG} has shape {tuple(disabled.shape)}; expected (L, {n_heads}) or "
                         f"(L, {n_rows}, {n_heads}) for a batch of {n_rows}")
    return rows if bool(rows.any()) else None


class DisableState:
    """The heads disabled in the model's next forward passes, shared by its attention modules.

    mask: None or bool (L, H) / (L, N, H); set with :func:`disabled_heads`. A forward keyword
    ``bertology_disabled=`` takes precedence where the model passes keywords down to its attention.
    """

    def __init__(self) -> None:
        self.mask: torch.Tensor | None = None
        self.gates: torch.Tensor | None = None   # float (L, H) / (L, N, H): head outputs times gates (importance)


def module_layer(module: torch.nn.Module) -> int | None:
    """The layer index of an attention module (set by :func:`enable_disabling`, else its own ``layer_idx``)."""
    layer = getattr(module, _LAYER, None)
    return getattr(module, "layer_idx", None) if layer is None else layer


def module_state(module: torch.nn.Module) -> DisableState | None:
    """The model's :class:`DisableState` as seen from one of its attention modules (None before enabling)."""
    return getattr(module, _STATE, None)


def _module_rows(module: torch.nn.Module, kwargs: dict, n_rows: int, n_heads: int) -> torch.Tensor | None:
    """(N, H) disabled rows of the layer of an attention module (its index set by :func:`enable_disabling`)."""
    mask = kwargs.get(DISABLED_KWARG)
    if mask is None:
        state = module_state(module)
        mask = None if state is None else state.mask
    return layer_rows(mask, module_layer(module), n_rows, n_heads)


def disabling_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                value: torch.Tensor, attention_mask: torch.Tensor | None,
                                scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """The registered attention function: eager attention with the disabled heads made uniform.

    query: (N, H, Q, dh); key, value: (N, H, K, dh) -> (context (N, Q, H, dh), weights (N, H, Q, K)).
    attention_mask: the layer's own mask (padding, and a sliding window where the layer has one); a
    disabled head is uniform over the example's real tokens whatever that mask hides (see :func:`real_keys`).
    The disabled heads of this layer come from ``kwargs[DISABLED_KWARG]`` or :func:`disabled_heads`.
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rows = _module_rows(module, kwargs, query.shape[0], query.shape[1])
    parts = attention_parts(query, key, value, attention_mask, scaling, dropout=dropout,
                            training=module.training, with_uniform=rows is not None)
    return parts.context_for(rows), parts.weights_for(rows)


def _disentangled_hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: tuple):
    """Forward hook of DeBERTa(-v2)'s DisentangledSelfAttention (it computes its attention itself).

    output: (context (N, T, H*dh), probabilities (N, H, T, T) or None). The disabled heads' contexts and
    probabilities are replaced by the uniform ones over the real tokens: value = value_proj(hidden_states),
    the real tokens from the module's boolean (N, 1, T, T) attention mask.
    """
    hidden = args[0] if args else kwargs["hidden_states"]
    mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
    n, t = hidden.shape[:2]
    n_heads = module.num_attention_heads
    rows = _module_rows(module, {}, n, n_heads)
    state = module_state(module)
    gates = None if state is None or state.gates is None else state.gates
    if rows is None and gates is None:
        return output
    context, probs = output[0], output[1]
    dh = context.shape[-1] // n_heads
    heads = context.view(n, -1, n_heads, dh)
    if rows is not None:
        value = module.value_proj(hidden).view(n, t, n_heads, dh).transpose(1, 2)     # (N, H, T, dh)
        uniform = uniform_weights(real_keys(None if mask is None else mask.bool(), value), value.dtype)
        uniform_context = torch.matmul(uniform, value)                                  # (N, H, 1, dh)
        heads = torch.where(rows[:, None, :, None], uniform_context.transpose(1, 2), heads)
        if probs is not None:
            probs = torch.where(rows[:, :, None, None], uniform.expand_as(probs), probs)
    if gates is not None:
        from bertology.ablation.importance import layer_gates

        g = layer_gates(gates, module_layer(module), n, n_heads)
        heads = heads * g[:, None, :, None].to(heads.dtype)
    return (heads.reshape(context.shape), probs, *output[2:])


def register() -> None:
    """Register the attention function and its padding-mask builder (idempotent)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, disabling_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, eager_mask)


def _hooked_classes() -> tuple[type, ...]:
    """Attention modules that bypass AttentionInterface but whose output a forward hook can rewrite."""
    classes = []
    try:
        from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

        classes.append(DisentangledSelfAttention)
    except ImportError:  # pragma: no cover - every supported transformers has it
        pass
    return tuple(classes)


def attention_modules(model: torch.nn.Module) -> tuple[list[torch.nn.Module], str]:
    """The self-attention module of every layer, in layer order, and how disabling reaches it.

    Returns (modules, mechanism): "attention_interface" when the model's attention goes through transformers'
    AttentionInterface (found by the class the model records attentions from, ``_can_record_outputs``),
    "forward_hook" for DeBERTa-v2's DisentangledSelfAttention. Raises DisablingUnsupported otherwise.
    """
    hooked = _hooked_classes()
    modules = [m for m in model.modules() if isinstance(m, hooked)]
    if modules:
        return modules, "forward_hook"
    recorded = (getattr(model, "_can_record_outputs", None) or {}).get("attentions")
    target = getattr(recorded, "target_class", recorded)
    if getattr(model, "_supports_attention_backend", False) and isinstance(target, type):
        modules = [m for m in model.modules() if isinstance(m, target)]
        if modules:
            return modules, "attention_interface"
    raise DisablingUnsupported(
        f"cannot disable heads of {type(model).__name__}: its attention neither follows transformers' "
        f"AttentionInterface nor is one bertology knows how to hook (DeBERTa-v2)")


class DisablingUnsupported(ValueError):
    """The model's attention cannot be reached to disable heads."""


def enable_disabling(model: torch.nn.Module) -> torch.nn.Module:
    """Make a loaded model's heads disableable (it behaves as eager while nothing is disabled).

    Every self-attention module learns its layer index and the model's :class:`DisableState`; models whose
    attention follows AttentionInterface switch to :data:`ATTN_IMPLEMENTATION`, DeBERTa-v2 gets a forward
    hook on each DisentangledSelfAttention. Idempotent. The mechanism is in ``model.bertology_disabling``.
    """
    modules, mechanism = attention_modules(model)
    n_layers = int(model.config.num_hidden_layers)
    if len(modules) != n_layers:
        raise DisablingUnsupported(f"{type(model).__name__} has {len(modules)} attention modules for {n_layers} "
                                   f"layers; cannot tell which heads to disable")
    state = getattr(model, _STATE, None) or DisableState()
    for layer, module in enumerate(modules):
        setattr(module, _LAYER, layer)
        setattr(module, _STATE, state)
        if mechanism == "forward_hook" and not getattr(module, "_bertology_hooked", False):
            module.register_forward_hook(_disentangled_hook, with_kwargs=True)
            module._bertology_hooked = True
    setattr(model, _STATE, state)
    if mechanism == "attention_interface":
        register()
        model.set_attn_implementation(ATTN_IMPLEMENTATION)
        if model.config._attn_implementation != ATTN_IMPLEMENTATION:
            raise DisablingUnsupported(f"{type(model).__name__} did not accept a custom attention implementation")
    model.bertology_disabling = mechanism
    return model


@contextmanager
def _state_set(model: torch.nn.Module, field: str, value, enabler: str):
    """Within the block, the model's shared disabling state has `field` set to `value` (restored after)."""
    state = getattr(model, _STATE, None)
    if state is None:
        raise ValueError(f"call {enabler}(model) first")
    previous = getattr(state, field)
    setattr(state, field, value)
    try:
        yield
    finally:
        setattr(state, field, previous)


@contextmanager
def head_gates(model: torch.nn.Module, gates: torch.Tensor | None):
    """Within the block, each head's output is multiplied by its gate: float (L, H) or (L, N, H) (Michel et al.;
    :mod:`bertology.ablation.importance`). Works on every architecture :func:`enable_disabling` accepts, once
    the model's gates are enabled (:func:`bertology.ablation.importance.enable_gates`)."""
    with _state_set(model, "gates", gates, "enable_gates"):
        yield model


@contextmanager
def disabled_heads(model: torch.nn.Module, mask: torch.Tensor | None):
    """Within the block, the model's forward passes run with the heads of `mask` disabled.

    mask: None (nothing) or bool (L, H), or (L, N, H) per row of the batch. The model must have been
    passed through :func:`enable_disabling`. Works on every supported architecture (the forward keyword
    ``bertology_disabled=`` only where the model hands keywords down to its attention).
    """
    with _state_set(model, "mask", mask, "enable_disabling"):
        yield model


def disabling_unsupported(name_or_path: str) -> str | None:
    """Why heads of the config's `model` cannot be disabled, or None when they can (or it cannot be told yet).

    Builds the model's sequence classifier on the meta device (no weights read) and looks for its attention
    modules as :func:`enable_disabling` does, so the workflow can say so before any job runs.
    """
    from pathlib import Path

    from transformers import AutoConfig, AutoModelForSequenceClassification

    from bertology.models import resolve_model

    try:
        path = resolve_model(name_or_path)
        config = AutoConfig.from_pretrained(path, local_files_only=Path(path).is_dir(), trust_remote_code=False)
        with torch.device("meta"):
            model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    except Exception:  # noqa: BLE001 - the jobs that load the model report their own errors
        return None
    try:
        modules, _ = attention_modules(model)
    except DisablingUnsupported as err:
        return str(err)
    if len(modules) != int(model.config.num_hidden_layers):
        return (f"{type(model).__name__} has {len(modules)} attention modules for {model.config.num_hidden_layers} "
                f"layers")
    return None

"""Interventions on attention heads: disabling (Kovaleva et al. 2019, section 4.6; docs/reference.md#disabling)
and gates (Michel et al. 2019, section 4.1), one mechanism for both.

A *disabled* head attends uniformly to the real tokens of its input: A[t, s] = 1/n for every key s < n
(n = real length, specials included) and 0 on padding, applied to the attention probabilities inside
the forward pass, so its output is the mean of the value vectors of the real tokens. Whatever the layer's
own mask (a sliding window in ModernBERT's local layers, DeBERTa's masked padded queries), a disabled head is
uniform over the example's real tokens (:func:`real_keys`). A *gate* xi_h multiplies a head's output (its
context vector, before the output projection); with all gates at 1 the model is unchanged (head importance,
:mod:`bertology.ablation.importance`; pruning by zeroing, :mod:`bertology.ablation.pruning`).

One state per model, :class:`HeadState` (``mask``: which heads are disabled; ``gates``: the heads' gates),
shared by its attention modules; one per-layer selector (:func:`layer_selection`); one way in,
:func:`enable_heads`, which reaches the attention in one of two ways:

- models whose attention follows ``transformers.AttentionInterface`` (BERT, RoBERTa, ELECTRA, DistilBERT,
  ModernBERT, ...): the attention function :func:`head_attention_forward`, registered under
  :data:`ATTN_IMPLEMENTATION`, computes the eager attention, makes the disabled heads uniform and multiplies
  each head's context by its gate; the eager padding-mask builder is registered under the same name with
  ``AttentionMaskInterface`` (a custom name otherwise gets *no* mask);
- DeBERTa-v2, whose DisentangledSelfAttention computes its attention itself: the forward hook
  :func:`head_hook` rewrites the disabled heads' contexts (and probabilities) from the module's own value
  projection and multiplies the contexts by the gates.

Which heads: ``with disabled_heads(model, mask), head_gates(model, gates): model(...)`` on every architecture,
or the forward keywords ``model(..., bertology_disabled=mask, bertology_gates=gates)`` where the model hands
keywords down to its attention; mask bool (L, H) or (L, N, H), gates float (L, H) or (L, N, H). Each attention
module knows its layer (set by :func:`enable_heads`, as DistilBERT's has no ``layer_idx``). Load a model with
``bertology.models.load_encoder(path, classifier=True)`` and switch it over with :func:`enable_heads`.

Glossary: N rows of a batch, L layers, H heads, Q query positions, K key positions, dh head size.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from bertology.errors import UserError

ATTN_IMPLEMENTATION = "bertology_heads"
DISABLED_KWARG = "bertology_disabled"
GATES_KWARG = "bertology_gates"
_STATE = "_bertology_head_state"      # the model's HeadState, also set on each attention module
_LAYER = "_bertology_layer"           # an attention module's layer index


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


def layer_selection(values: torch.Tensor | None, layer: int | None, n_rows: int, n_heads: int,
                    kwarg: str) -> torch.Tensor | None:
    """The (N, H) rows of one layer from a model-wide mask or gates, (L, H) or (L, N, H); None if none given.

    kwarg: :data:`DISABLED_KWARG` (values must be bool) or :data:`GATES_KWARG` (values must be float); it
    names the values in errors.
    """
    if values is None:
        return None
    if layer is None:
        raise ValueError("the attention module has no layer index; call enable_heads(model) first")
    kind = "bool" if kwarg == DISABLED_KWARG else "float"
    if not isinstance(values, torch.Tensor) or (values.dtype != torch.bool if kind == "bool"
                                                else not values.is_floating_point()):
        raise ValueError(f"{kwarg} must be a {kind} tensor of shape (L, H) or (L, N, H)")
    if values.ndim == 2 and values.shape[1] == n_heads:
        return values[layer][None].expand(n_rows, n_heads)
    if values.ndim == 3 and values.shape[1:] == (n_rows, n_heads):
        return values[layer]
    raise ValueError(f"{kwarg} has shape {tuple(values.shape)}; expected (L, {n_heads}) or "
                     f"(L, {n_rows}, {n_heads}) for a batch of {n_rows}")


@dataclass
class HeadState:
    """The interventions on the model's heads in its next forward passes, shared by its attention modules.

    mask: None or bool (L, H) / (L, N, H), the disabled heads (:func:`disabled_heads`); gates: None or float
    (L, H) / (L, N, H), each head's output times its gate (:func:`head_gates`). The forward keywords
    ``bertology_disabled=`` / ``bertology_gates=`` take precedence where the model passes keywords down to its
    attention.
    """

    mask: torch.Tensor | None = None
    gates: torch.Tensor | None = None


def module_layer(module: torch.nn.Module) -> int | None:
    """The layer index of an attention module (set by :func:`enable_heads`, else its own ``layer_idx``)."""
    layer = getattr(module, _LAYER, None)
    return getattr(module, "layer_idx", None) if layer is None else layer


def module_state(module: torch.nn.Module) -> HeadState | None:
    """The model's :class:`HeadState` as seen from one of its attention modules (None before enabling)."""
    return getattr(module, _STATE, None)


def module_selection(module: torch.nn.Module, kwargs: dict, n_rows: int,
                     n_heads: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(disabled, gates) of the layer of an attention module: (N, H) bool (None when no head of the layer is
    disabled) and (N, H) float (None when no gates are set), from the forward keywords or the model's state."""
    state = module_state(module)
    layer = module_layer(module)
    selected = []
    for kwarg, field in ((DISABLED_KWARG, "mask"), (GATES_KWARG, "gates")):
        values = kwargs.get(kwarg)
        if values is None and state is not None:
            values = getattr(state, field)
        selected.append(layer_selection(values, layer, n_rows, n_heads, kwarg))
    rows, gates = selected
    return (rows if rows is not None and bool(rows.any()) else None), gates


def head_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                           **kwargs):
    """The registered attention function: eager attention, the disabled heads made uniform, each head's
    context times its gate.

    query: (N, H, Q, dh); key, value: (N, H, K, dh) -> (context (N, Q, H, dh), weights (N, H, Q, K)).
    attention_mask: the layer's own mask (padding, and a sliding window where the layer has one); a
    disabled head is uniform over the example's real tokens whatever that mask hides (see :func:`real_keys`).
    The returned weights are the (possibly disabled) attention probabilities, not gated: the gate acts on
    the head's output. Disabled heads and gates of this layer: :func:`module_selection`.
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rows, gates = module_selection(module, kwargs, query.shape[0], query.shape[1])
    parts = attention_parts(query, key, value, attention_mask, scaling, dropout=dropout,
                            training=module.training, with_uniform=rows is not None)
    context = parts.context_for(rows)
    if gates is not None:
        context = context * gates[:, None, :, None].to(context.dtype)
    return context, parts.weights_for(rows)


def head_hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: tuple):
    """Forward hook of DeBERTa(-v2)'s DisentangledSelfAttention (it computes its attention itself).

    output: (context (N, T, H*dh), probabilities (N, H, T, T) or None). The disabled heads' contexts and
    probabilities are replaced by the uniform ones over the real tokens: value = value_proj(hidden_states),
    the real tokens from the module's boolean (N, 1, T, T) attention mask; then each head's context is
    multiplied by its gate.
    """
    hidden = args[0] if args else kwargs["hidden_states"]
    mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
    n, t = hidden.shape[:2]
    n_heads = module.num_attention_heads
    rows, gates = module_selection(module, {}, n, n_heads)
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
        heads = heads * gates[:, None, :, None].to(heads.dtype)
    return (heads.reshape(context.shape), probs, *output[2:])


def register() -> None:
    """Register the attention function and its padding-mask builder (idempotent)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, head_attention_forward)
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
    """The self-attention module of every layer, in layer order, and how interventions reach it.

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


class DisablingUnsupported(UserError, ValueError):
    """The model's attention cannot be reached to disable or gate heads (the config's `model` cannot be ablated)."""


def enable_heads(model: torch.nn.Module) -> torch.nn.Module:
    """Make a loaded model's heads disableable and gateable (it behaves as eager while nothing is set).

    Every self-attention module learns its layer index and the model's :class:`HeadState`; models whose
    attention follows AttentionInterface switch to :data:`ATTN_IMPLEMENTATION`, DeBERTa-v2 gets the forward
    hook :func:`head_hook` on each DisentangledSelfAttention. Idempotent. The mechanism is in
    ``model.bertology_heads``.
    """
    modules, mechanism = attention_modules(model)
    n_layers = int(model.config.num_hidden_layers)
    if len(modules) != n_layers:
        raise DisablingUnsupported(f"{type(model).__name__} has {len(modules)} attention modules for {n_layers} "
                                   f"layers; cannot tell which heads to disable")
    state = getattr(model, _STATE, None) or HeadState()
    for layer, module in enumerate(modules):
        setattr(module, _LAYER, layer)
        setattr(module, _STATE, state)
        if mechanism == "forward_hook" and not getattr(module, "_bertology_hooked", False):
            module.register_forward_hook(head_hook, with_kwargs=True)
            module._bertology_hooked = True
    setattr(model, _STATE, state)
    if mechanism == "attention_interface":
        register()
        model.set_attn_implementation(ATTN_IMPLEMENTATION)
        if model.config._attn_implementation != ATTN_IMPLEMENTATION:
            raise DisablingUnsupported(f"{type(model).__name__} did not accept a custom attention implementation")
    model.bertology_heads = mechanism
    return model


@contextmanager
def _state_set(model: torch.nn.Module, field: str, value):
    """Within the block, the model's :class:`HeadState` has `field` set to `value` (restored after)."""
    state = getattr(model, _STATE, None)
    if state is None:
        raise ValueError("call enable_heads(model) first")
    previous = getattr(state, field)
    setattr(state, field, value)
    try:
        yield
    finally:
        setattr(state, field, previous)


@contextmanager
def head_gates(model: torch.nn.Module, gates: torch.Tensor | None):
    """Within the block, each head's output is multiplied by its gate: float (L, H) or (L, N, H) (Michel et al.;
    :mod:`bertology.ablation.importance`). The model must have been passed through :func:`enable_heads`."""
    with _state_set(model, "gates", gates):
        yield model


@contextmanager
def disabled_heads(model: torch.nn.Module, mask: torch.Tensor | None):
    """Within the block, the model's forward passes run with the heads of `mask` disabled.

    mask: None (nothing) or bool (L, H), or (L, N, H) per row of the batch. The model must have been
    passed through :func:`enable_heads`. Works on every supported architecture (the forward keyword
    ``bertology_disabled=`` only where the model hands keywords down to its attention).
    """
    with _state_set(model, "mask", mask):
        yield model


def disabling_unsupported(name_or_path: str) -> str | None:
    """Why heads of the config's `model` cannot be disabled, or None when they can (or it cannot be told yet).

    Builds the model's sequence classifier on the meta device (no weights read) and looks for its attention
    modules as :func:`enable_heads` does, so the workflow can say so before any job runs.
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

"""Interventions on attention heads: disabling (Kovaleva et al. 2019, section 4.6; docs/reference.md#disabling)
and gates (Michel et al. 2019, section 4.1), one mechanism for both.

A *disabled* head attends uniformly to the real tokens of its input: A[t, s] = 1/n for every key s < n
(n = real length, specials included) and 0 on padding, applied to the attention probabilities inside
the forward pass, so its output is the mean of the value vectors of the real tokens. Whatever the layer's
own mask (a sliding window in ModernBERT's local layers, DeBERTa's masked padded queries), a disabled head is
uniform over the example's real tokens (the maths: :mod:`bertology.ablation.uniform`). A *gate* xi_h multiplies
a head's output (its context vector, before the output projection); with all gates at 1 the model is unchanged
(head importance, :mod:`bertology.ablation.importance`; pruning by zeroing, :mod:`bertology.ablation.pruning`).

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
  projection and multiplies the contexts by the gates;
- attention modules that compute their own eager attention and pass the probabilities (N, H, Q, K) through
  their ``dropout`` submodule just before multiplying the values (MPNet, DeBERTa v1; :data:`PROBABILITY_HOOKED`):
  the forward hook :func:`probability_hook` on that dropout rewrites the probabilities (a disabled head
  uniform over the real tokens, every head times its gate: context = probabilities @ V is linear in them).

Layers that share one attention module (ALBERT): the module serves every layer of its group, and the layer of
a call is its rank among the module's calls in the forward pass (the encoder's loop runs the layers in order;
each layer's module and the ranks: :mod:`bertology.models.layers`, the lookup the value norms use too; a
forward pre-hook on the base model resets the count, its forward hook checks that every layer was seen once).

Which heads: ``with disabled_heads(model, mask), head_gates(model, gates): model(...)`` on every architecture,
or the forward keywords ``model(..., bertology_disabled=mask, bertology_gates=gates)`` where the model hands
keywords down to its attention; mask bool (L, H) or (L, N, H), gates float (L, H) or (L, N, H). Each attention
module knows its layer (set by :func:`enable_heads`, as DistilBERT's has no ``layer_idx``). Load a model with
``bertology.models.loading.load_encoder(path, classifier=True)`` and switch it over with :func:`enable_heads`.

Glossary: N rows of a batch, L layers, H heads, Q query positions, K key positions, dh head size.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from bertology.ablation.uniform import attention_parts, real_keys, uniform_weights
from bertology.models.layers import CallRank, layer_modules
from bertology.pipeline.errors import UserError
from bertology.models.hooks import register_hooks

ATTN_IMPLEMENTATION = "bertology_heads"
DISABLED_KWARG = "bertology_disabled"
GATES_KWARG = "bertology_gates"
_STATE = "_bertology_head_state"      # the model's HeadState, also set on each attention module
_LAYER = "_bertology_layer"           # an attention module's layer index
_CAUSAL = "_bertology_causal"         # whether a module's layer is causal (a decoder's, or ``is_causal``)


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
    rank: CallRank | None = None          # the layer of each call of a shared module (ALBERT) in the forward pass
    keys: torch.Tensor | None = None      # (N, K) the forward pass's attention_mask (probability hooks)


def module_layer(module: torch.nn.Module) -> int | None:
    """The layer index of an attention module (set by :func:`enable_heads`, else its own ``layer_idx``).

    A module shared by several layers (ALBERT) has no fixed index: its layer is the rank of the call among the
    module's calls in the forward pass (:func:`next_call`)."""
    layer = getattr(module, _LAYER, None)
    return getattr(module, "layer_idx", None) if layer is None else layer


SHARED = -1   # the _LAYER of a module that serves several layers (its layer is the call's rank)


def next_call(module: torch.nn.Module) -> int | None:
    """The layer of this call of an attention module: its fixed index, or for a shared module (ALBERT) the
    layer of its k-th call in the forward pass (:class:`bertology.models.layers.CallRank`, in the model's
    :class:`HeadState`)."""
    layer = module_layer(module)
    if layer != SHARED:
        return layer
    layer = module_state(module).rank.next(module)
    if layer is None:
        raise DisablingUnsupported(f"{type(module).__name__}, shared by several layers, ran more often than it has "
                                   f"layers; cannot tell which layer a call belongs to")
    return layer


def module_state(module: torch.nn.Module) -> HeadState | None:
    """The model's :class:`HeadState` as seen from one of its attention modules (None before enabling)."""
    return getattr(module, _STATE, None)


def module_selection(module: torch.nn.Module, kwargs: dict, n_rows: int,
                     n_heads: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(disabled, gates) of the layer of an attention module: (N, H) bool (None when no head of the layer is
    disabled) and (N, H) float (None when no gates are set), from the forward keywords or the model's state."""
    state = module_state(module)
    layer = next_call(module)
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
    disabled head is uniform over the example's real tokens whatever that mask hides (see
    :func:`~bertology.ablation.uniform.real_keys`), in a causal layer (a decoder's, see :func:`enable_heads`) over
    each query's real tokens up to itself.
    The keywords ``softcap`` (Gemma 2) and ``s_aux`` (GPT-OSS's sinks) of transformers' eager functions apply.
    The returned weights are the (possibly disabled) attention probabilities, not gated: the gate acts on
    the head's output. Disabled heads and gates of this layer: :func:`module_selection`.
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rows, gates = module_selection(module, kwargs, query.shape[0], query.shape[1])
    causal = getattr(module, _CAUSAL, None)
    parts = attention_parts(query, key, value, attention_mask, scaling, dropout=dropout,
                            training=module.training, with_uniform=rows is not None,
                            causal=bool(getattr(module, "is_causal", False)) if causal is None else causal,
                            softcap=kwargs.get("softcap"), sinks=kwargs.get("s_aux"))
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


def probability_hook(attention: torch.nn.Module, dropout: torch.nn.Module, args: tuple, output: torch.Tensor):
    """Forward hook on the dropout an attention module applies to its probabilities (:data:`PROBABILITY_HOOKED`).

    output: probabilities (N, H, Q, K) about to be multiplied by the values. A disabled head's rows become
    uniform over the real keys (the forward pass's attention_mask, captured by :func:`_capture_keys`; all
    keys without one); then every head's rows are multiplied by its gate, which multiplies its context.
    """
    probs = output
    n, n_heads = probs.shape[:2]
    rows, gates = module_selection(attention, {}, n, n_heads)
    if rows is None and gates is None:
        return output
    if rows is not None:
        state = module_state(attention)
        keys = state.keys if state is not None else None
        if keys is None or keys.shape[0] != n:
            keep = torch.ones(1, 1, 1, probs.shape[-1], dtype=torch.bool, device=probs.device)
        else:
            keep = keys[:, None, None, : probs.shape[-1]].to(device=probs.device, dtype=torch.bool)
        probs = torch.where(rows[:, :, None, None], uniform_weights(keep, probs.dtype).expand_as(probs), probs)
    if gates is not None:
        probs = probs * gates[:, :, None, None].to(probs.dtype)
    return probs


def _capture_keys(model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    """Forward pre-hook of the base model: a new forward pass (the count of attention calls restarts for shared
    modules; the attention_mask (N, T) is kept for :func:`probability_hook`)."""
    state = getattr(model, _STATE, None)
    if state is None:
        return
    if state.rank is not None:
        state.rank.reset()
    mask = kwargs.get("attention_mask")
    if mask is None and len(args) > 1 and isinstance(args[1], torch.Tensor):
        mask = args[1]
    state.keys = mask.bool() if isinstance(mask, torch.Tensor) and mask.ndim == 2 else None


def _check_calls(model: torch.nn.Module, args: tuple, kwargs: dict, output) -> None:
    """Forward hook of a base model with shared attention modules: every layer was run once, in order."""
    state = getattr(model, _STATE, None)
    n_layers = int(model.config.num_hidden_layers)
    calls = state.rank.total if state is not None and state.rank is not None else n_layers
    if calls != n_layers:
        raise DisablingUnsupported(f"{type(model).__name__} ran its shared attention modules {calls} times "
                                   f"for {n_layers} layers; cannot tell which layer a call belongs to")


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


# Attention modules (transformers module, class) that compute eager attention themselves and apply their
# ``dropout`` submodule to the probabilities (N, H, Q, K) once, right before multiplying the values: MPNet's
# self-attention, DeBERTa v1's DisentangledSelfAttention (without talking heads, which mix the heads after it),
# and the BERT-copies that kept their own eager code (Megatron-BERT, RemBERT, RoFormer, LUKE's word attention).
PROBABILITY_HOOKED = (("transformers.models.mpnet.modeling_mpnet", "MPNetSelfAttention"),
                      ("transformers.models.deberta.modeling_deberta", "DisentangledSelfAttention"),
                      ("transformers.models.megatron_bert.modeling_megatron_bert", "MegatronBertSelfAttention"),
                      ("transformers.models.rembert.modeling_rembert", "RemBertSelfAttention"),
                      ("transformers.models.roformer.modeling_roformer", "RoFormerSelfAttention"),
                      ("transformers.models.luke.modeling_luke", "LukeSelfAttention"))


def _calls_interface(cls: type) -> bool:
    """Whether an attention class's forward looks its attention function up in AttentionInterface (LayoutLM's
    does without the model declaring ``_supports_attention_backend``)."""
    import inspect

    try:
        return "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(cls.forward)
    except (OSError, TypeError):  # pragma: no cover - no source available
        return False


def _probability_classes() -> tuple[type, ...]:
    import importlib

    classes = []
    for module_name, class_name in PROBABILITY_HOOKED:
        try:
            classes.append(getattr(importlib.import_module(module_name), class_name))
        except (ImportError, AttributeError):  # pragma: no cover - an older or newer transformers
            continue
    return tuple(classes)


def attention_modules(model: torch.nn.Module) -> tuple[list[torch.nn.Module], str]:
    """The self-attention module of every layer, in layer order, and how interventions reach it.

    Returns (modules, mechanism): "attention_interface" when the model's attention goes through transformers'
    AttentionInterface (found by the class the model records attentions from, ``_can_record_outputs``),
    "forward_hook" for DeBERTa-v2's DisentangledSelfAttention, "probability_hook" for the modules of
    :data:`PROBABILITY_HOOKED`. Raises DisablingUnsupported otherwise.
    """
    hooked = _hooked_classes()
    modules = [m for m in model.modules() if isinstance(m, hooked)]
    if modules:
        return modules, "forward_hook"
    probability = _probability_classes()
    modules = [m for m in model.modules() if isinstance(m, probability)]
    if modules:
        for m in modules:
            if getattr(m, "head_weights_proj", None) is not None or getattr(m, "head_logits_proj", None) is not None:
                raise DisablingUnsupported(f"cannot disable heads of {type(model).__name__}: its talking heads "
                                           f"(talking_head: true) mix the heads' attention")
            if not isinstance(getattr(m, "dropout", None), torch.nn.Module):
                raise DisablingUnsupported(f"cannot disable heads of {type(model).__name__}: {type(m).__name__} "
                                           f"has no dropout on its probabilities to hook")
        return modules, "probability_hook"
    recorded = (getattr(model, "_can_record_outputs", None) or {}).get("attentions")
    if isinstance(recorded, (list, tuple)) and recorded:   # ESM: [OutputRecorder(self-attention), ...]
        recorded = recorded[0]
    target = getattr(recorded, "target_class", recorded)
    if isinstance(target, type) and (getattr(model, "_supports_attention_backend", False) or _calls_interface(target)):
        modules = [m for m in model.modules() if isinstance(m, target)]
        if modules:
            return modules, "attention_interface"
    raise DisablingUnsupported(
        f"cannot disable heads of {type(model).__name__}: its attention neither follows transformers' "
        f"AttentionInterface nor is one bertology knows how to hook (DeBERTa v1/v2, MPNet)")


class DisablingUnsupported(UserError, ValueError):
    """The model's attention cannot be reached to disable or gate heads (the config's `model` cannot be ablated)."""


def enable_heads(model: torch.nn.Module) -> torch.nn.Module:
    """Make a loaded model's heads disableable and gateable (it behaves as eager while nothing is set).

    Every self-attention module learns its layer index, the model's :class:`HeadState` and whether it is causal
    (every layer of a decoder, :func:`bertology.models.kinds.model_kind`, whether its module says ``is_causal`` or not:
    Doge's does not; else the module's ``is_causal``); models whose
    attention follows AttentionInterface switch to :data:`ATTN_IMPLEMENTATION`, DeBERTa-v2 gets the forward
    hook :func:`head_hook` on each DisentangledSelfAttention, MPNet and DeBERTa v1 :func:`probability_hook` on
    their attention's probability dropout. Fewer modules than layers (ALBERT's layers share one): each module
    is marked shared and a call's layer is its rank in the forward pass (:func:`next_call`). Idempotent. The
    mechanism is in ``model.bertology_heads``. Its hooks (and the base model's pre-hook :func:`_capture_keys`)
    stay for the model's lifetime (:func:`bertology.models.hooks.register_hooks`; no handle is kept).
    """
    import functools

    from bertology.models.kinds import model_kind

    modules, mechanism = attention_modules(model)
    decoder = model_kind(model.config) == "decoder"
    n_layers = int(model.config.num_hidden_layers)
    layers = layer_modules(model, modules)
    if layers is None:
        raise DisablingUnsupported(f"{type(model).__name__} has {len(modules)} attention modules for {n_layers} "
                                   f"layers; cannot tell which heads to disable")
    shared = len(modules) < n_layers
    state = getattr(model, _STATE, None) or HeadState()
    state.rank = CallRank(layers)
    for layer, module in enumerate(modules):
        setattr(module, _LAYER, SHARED if shared else layer)
        setattr(module, _STATE, state)
        setattr(module, _CAUSAL, decoder or bool(getattr(module, "is_causal", False)))
        if mechanism == "forward_hook" and not getattr(module, "_bertology_hooked", False):
            register_hooks(model, fwd=[(module, head_hook)], with_kwargs=True)
            module._bertology_hooked = True
        if mechanism == "probability_hook" and not getattr(module, "_bertology_hooked", False):
            register_hooks(model, fwd=[(module.dropout, functools.partial(probability_hook, module))])
            module._bertology_hooked = True
    base = model.base_model
    if not getattr(base, "_bertology_hooked", False):
        register_hooks(model, pre=[(base, _capture_keys)], fwd=[(base, _check_calls)] if shared else [],
                       with_kwargs=True)
        base._bertology_hooked = True
    setattr(model, _STATE, state)
    setattr(base, _STATE, state)
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
    from bertology.models.loading import meta_classifier

    model = meta_classifier(name_or_path)
    if model is None:
        return None
    try:
        modules, _ = attention_modules(model)
    except DisablingUnsupported as err:
        return str(err)
    if layer_modules(model, modules) is None:
        return (f"{type(model).__name__} has {len(modules)} attention modules for {model.config.num_hidden_layers} "
                f"layers")
    return None

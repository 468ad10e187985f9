"""The disabling mechanism (Kovaleva et al. 2019, section 4.6; DESIGN section 6).

A *disabled* head attends uniformly to the real tokens of its input: A[t, s] = 1/n for every key s < n
(n = real length, specials included) and 0 on padding, applied to the attention probabilities inside
the forward pass, so its output is the mean of the value vectors of the real tokens.

transformers 5 has no ``head_mask``. We register an attention function under the name
:data:`ATTN_IMPLEMENTATION` with ``transformers.AttentionInterface`` (it computes the eager attention,
then overwrites the probabilities of the disabled heads), and the eager padding-mask builder under the
same name with ``transformers.AttentionMaskInterface`` (a custom name otherwise gets *no* padding mask).
Which heads are disabled travels as a forward keyword, ``model(..., bertology_disabled=mask)`` with mask
(L, H) or (L, N, H) bool; BERT passes extra keywords down to the attention function, which reads the
row of its own layer (``module.layer_idx``). Load a model with ``bertology.models.load_encoder(path,
classifier=True)`` and switch it over with :func:`enable_disabling`.

Glossary: N rows of a batch, L layers, H heads, Q query positions, K key positions, dh head size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ATTN_IMPLEMENTATION = "bertology_disable"
DISABLED_KWARG = "bertology_disabled"


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


def uniform_weights(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(N, 1, Q, K) bool keep-mask -> (N, 1, Q, K) weights: 1/n on the n visible keys, 0 elsewhere."""
    keep_f = keep.to(dtype)
    return keep_f / keep_f.sum(dim=-1, keepdim=True).clamp_min(1.0)


@dataclass
class AttentionParts:
    """One layer's attention computed once, from which any set of disabled heads is assembled.

    weights: (N, H, Q, K) softmax probabilities; context: (N, H, Q, dh) = weights @ V;
    uniform: (N|1, 1, Q, K) uniform weights over real keys; uniform_context: (N, H, Q, dh) = uniform @ V.
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
    uniform = uniform_weights(key_keep_mask(attention_mask, query, key), weights.dtype)
    uniform_context = torch.matmul(uniform, value)
    return AttentionParts(weights, context, uniform, uniform_context)


def layer_rows(disabled: torch.Tensor | None, layer: int | None, n_rows: int, n_heads: int) -> torch.Tensor | None:
    """The (N, H) bool rows of one layer from a model-wide mask (L, H) or (L, N, H); None if none."""
    if disabled is None:
        return None
    if layer is None:
        raise ValueError("the attention module has no layer_idx; cannot tell which heads to disable")
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


def disabling_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                value: torch.Tensor, attention_mask: torch.Tensor | None,
                                scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """The registered attention function: eager attention with the disabled heads made uniform.

    query: (N, H, Q, dh); key, value: (N, H, K, dh) -> (context (N, Q, H, dh), weights (N, H, Q, K)).
    The disabled heads of this layer come from ``kwargs[DISABLED_KWARG]`` (see :func:`layer_rows`).
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rows = layer_rows(kwargs.get(DISABLED_KWARG), getattr(module, "layer_idx", None), query.shape[0], query.shape[1])
    parts = attention_parts(query, key, value, attention_mask, scaling, dropout=dropout,
                            training=module.training, with_uniform=rows is not None)
    return parts.context_for(rows), parts.weights_for(rows)


def register() -> None:
    """Register the attention function and its padding-mask builder (idempotent)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, disabling_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, eager_mask)


def enable_disabling(model: torch.nn.Module) -> torch.nn.Module:
    """Switch a loaded model to the disabling attention (behaves as eager while nothing is disabled)."""
    register()
    model.set_attn_implementation(ATTN_IMPLEMENTATION)
    if model.config._attn_implementation != ATTN_IMPLEMENTATION:
        raise RuntimeError(f"{type(model).__name__} did not accept a custom attention implementation; "
                           f"it must follow transformers' AttentionInterface (BERT-family models do)")
    return model

"""The attention of a disabled head: uniform over the real tokens of its input (Kovaleva et al. 2019, section 4.6;
docs/reference.md#disabling).

A disabled head's weights are A[t, s] = 1/n for every real key s (n = real length, specials included) and 0 on
padding, whatever the layer's own mask hides (a sliding window in ModernBERT's local layers, DeBERTa's masked padded
queries: :func:`real_keys`); in a causal layer, over each query's real keys up to itself
(:func:`causal_real_keys`). :func:`attention_parts` computes one layer's eager attention and its uniform
alternative once (:class:`AttentionParts`), from which any set of disabled heads is assembled; the attention
function and hooks of :mod:`bertology.ablation.heads` and the fast sweep (:mod:`bertology.ablation.sweep_fast`)
use it.

Glossary: N rows of a batch, H heads, G key/value heads, Q query positions, K key positions, dh head size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


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


def causal_real_keys(attention_mask: torch.Tensor | None, key: torch.Tensor, n_queries: int) -> torch.Tensor:
    """A causal layer's keys that each query may see if it looked at every earlier real token: (N|1, 1, Q, K)
    bool, :func:`real_keys` and key position <= query position (the queries are the last Q positions)."""
    k = key.shape[-2]
    rows = torch.arange(k - n_queries, k, device=key.device)[:, None]
    tril = torch.arange(k, device=key.device)[None, :] <= rows                       # (Q, K)
    return real_keys(attention_mask, key) & tril[None, None]


def uniform_weights(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(N, 1, Q|1, K) bool keep-mask -> weights of the same shape: 1/n on the n visible keys, 0 elsewhere."""
    keep_f = keep.to(dtype)
    return keep_f / keep_f.sum(dim=-1, keepdim=True).clamp_min(1.0)


@dataclass
class AttentionParts:
    """One layer's attention computed once, from which any set of disabled heads is assembled.

    weights: (N, H, Q, K) softmax probabilities; context: (N, H, Q, dh) = weights @ V;
    uniform: (N|1, 1, 1, K) uniform weights over the real keys (the same for every query), or (N|1, 1, Q, K)
    over each query's real keys up to itself in a causal layer;
    uniform_context: (N, H, 1|Q, dh) = uniform @ V (broadcast over the queries).
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
                    training: bool = False, with_uniform: bool = True, causal: bool = False,
                    softcap: float | None = None, sinks: torch.Tensor | None = None) -> AttentionParts:
    """Eager attention (as transformers' BERT computes it) plus the uniform alternative.

    query: (N, H, Q, dh); key, value: (N, H|G, K, dh), G key/value heads each shared by H/G query heads
    (grouped-query attention: repeated as transformers' ``repeat_kv`` does); attention_mask: additive
    (N, 1, Q, K) or None. causal: the uniform alternative of query i covers the real keys 0..i only (a decoder's
    disabled head must not see the future), else every real key. softcap: scores capped to
    softcap * tanh(scores / softcap) before the mask (Gemma 2's attention logit soft-capping); sinks: (H,) one
    extra logit per head in each softmax, dropped after it (GPT-OSS's attention sinks: rows sum to less than 1).
    """
    if key.shape[1] != query.shape[1]:
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, : query.shape[-2], : key.shape[-2]]
    if sinks is not None:
        sink = sinks.reshape(1, -1, 1, 1).to(scores.dtype).expand(scores.shape[0], -1, scores.shape[2], 1)
        combined = torch.cat([scores, sink], dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        weights = torch.nn.functional.softmax(combined, dim=-1)[..., :-1]
    else:
        weights = torch.nn.functional.softmax(scores, dim=-1)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=training)
    context = torch.matmul(weights, value)
    if not with_uniform:
        return AttentionParts(weights, context, weights[:, :1], context)
    keep = (causal_real_keys(attention_mask, key, query.shape[-2]) if causal else real_keys(attention_mask, key))
    uniform = uniform_weights(keep, weights.dtype)
    uniform_context = torch.matmul(uniform, value)
    return AttentionParts(weights, context, uniform, uniform_context)

"""The fast sweep: reuse everything below the disabled layer, stack configurations along the batch (BERT-layer
encoders: BERT, RoBERTa, ELECTRA; :func:`fast_plan` states the rule).

A head disabled in layer l changes nothing below l: per batch the sweep runs the layers once, and for every
configuration of layer l (each head alone, then all heads) it resumes from layer l's cached queries/keys/values,
replaces the disabled heads' contexts by the uniform ones, and runs the rest of the network with several
configurations stacked along the batch dimension. The last layer only computes the [CLS] query (the classifier
reads nothing else). Results equal the naive sweep's up to float rounding (checked in tests and in
bench/bench_ablation.py). Pruning (:mod:`bertology.ablation.pruning`) reuses :func:`layer_attention` and
:func:`finish_layer`. The model must have been passed through :func:`bertology.ablation.heads.enable_heads`.

Shapes: the glossary of :mod:`bertology.ablation.sweep`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from bertology.ablation.stacking import effective_config_batch, n_outputs, plan_or_raise, repeat_rows
from bertology.ablation.uniform import AttentionParts, attention_parts
from bertology.models.encoding import Batch


@dataclass(frozen=True)
class FastPlan:
    """How the fast sweep runs a model piece by piece: encoders of BERT layers (:func:`fast_plan` states the rule).

    layers: the encoder's layers (each with attention.self query/key/value, attention.output and
    feed_forward_chunk); classify: final hidden states (N, Q, d), position 0 = the first token -> (N, K).
    """

    model: torch.nn.Module
    layers: Sequence[torch.nn.Module]
    pooled: bool          # the head reads the base model's pooler output (BERT), else the first token (RoBERTa)

    def embed(self, batch: Batch) -> torch.Tensor:
        """(N, T) inputs -> (N, T, d) input of the first layer (ELECTRA's projection included)."""
        base = self.model.base_model
        hidden = base.embeddings(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids)
        project = getattr(base, "embeddings_project", None)
        return project(hidden) if project is not None else hidden

    def classify(self, hidden: torch.Tensor) -> torch.Tensor:
        model = self.model
        if self.pooled:
            return model.classifier(model.dropout(model.base_model.pooler(hidden)))
        return model.classifier(hidden)  # RoBERTa's and ELECTRA's heads read hidden[:, 0]


def _children(module) -> set[str]:
    return {name for name, _ in module.named_children()}


def _is_bert_layer(layer) -> bool:
    """A post-LayerNorm BERT layer: attention = self (query, key, value) + output (dense, LayerNorm, dropout),
    then intermediate + output through feed_forward_chunk, nothing else (no pre-LayerNorm, no cross-attention)."""
    from torch import nn

    attention = getattr(layer, "attention", None)
    sa = getattr(attention, "self", None)
    return (attention is not None and _children(layer) <= {"attention", "intermediate", "output"}
            and _children(attention) == {"self", "output"}
            and _children(attention.output) <= {"dense", "LayerNorm", "dropout"}
            and _children(getattr(layer, "output", attention)) <= {"dense", "LayerNorm", "dropout"}
            and all(isinstance(getattr(sa, n, None), nn.Linear) for n in ("query", "key", "value"))
            and hasattr(sa, "scaling") and hasattr(sa, "attention_head_size") and hasattr(layer, "feed_forward_chunk"))


def fast_plan(model) -> FastPlan | str:
    """The fast sweep's plan for `model`, or why it cannot run it (then use the naive sweep: same outputs).

    The rule: the fast sweep re-runs the layers one by one, so it runs a sequence classifier whose base model is
    embeddings (of input_ids and token_type_ids, other inputs only optional ``*_ids``, not LayoutLM's bbox;
    ELECTRA's projection after them) -> encoder.layer, a list of
    post-LayerNorm BERT layers (:func:`_is_bert_layer`), one per config layer, nothing between them -> a head that
    reads the first token: the base model's pooler and a Linear classifier (BERT), or a classification head
    with ``out_proj`` (RoBERTa, ELECTRA). BERT, RoBERTa, ELECTRA, CamemBERT, XLM-RoBERTa, Data2Vec-text, ERNIE,
    ... qualify; DistilBERT, ModernBERT, DeBERTa-v2, decoders, pre-LayerNorm layers and others run the prefix
    sweep where :func:`~bertology.ablation.sweep_prefix.prefix_plan` admits them (ALBERT's shared layers: the
    naive sweep).
    tests/test_matrix.py checks that both sweeps agree on every architecture the rule admits.
    """
    import inspect

    from torch import nn

    name = type(model).__name__
    if getattr(model.config, "is_decoder", False) or getattr(model.config, "add_cross_attention", False):
        return f"{name} is configured as a decoder"
    base = model.base_model
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    embeddings = getattr(base, "embeddings", None)
    if layers is None or len(layers) != model.config.num_hidden_layers or embeddings is None or \
            not all(_is_bert_layer(layer) for layer in layers):
        return (f"the fast sweep runs encoders of post-LayerNorm BERT layers one by one; {name}'s layers are "
                f"not BERT layers")
    params = inspect.signature(embeddings.forward).parameters
    others = [p for p in params if p not in ("input_ids", "token_type_ids", "position_ids", "inputs_embeds",
                                             "past_key_values_length") and not p.endswith("_ids")]
    if not {"input_ids", "token_type_ids"} <= set(params) or others:
        return (f"{name}'s embeddings take inputs the fast sweep does not give ({', '.join(others)})" if others
                else f"{name}'s embeddings do not take input_ids and token_type_ids")
    extra = _children(base) - {"embeddings", "embeddings_project", "encoder", "pooler"}
    if extra:
        return f"{name}'s base model has parts the fast sweep does not run ({', '.join(sorted(extra))})"
    classifier = getattr(model, "classifier", None)
    pooled = isinstance(classifier, nn.Linear) and getattr(base, "pooler", None) is not None and \
        isinstance(getattr(model, "dropout", None), nn.Dropout)
    if not pooled and not hasattr(classifier, "out_proj"):
        return f"{name} has a classification head the fast sweep does not know"
    return FastPlan(model, layers, pooled)



def check_fast_supported(model) -> FastPlan:
    """The fast sweep's plan of `model`; ValueError saying why (and to use the naive sweep) if it has none."""
    return plan_or_raise(fast_plan(model))


def layer_attention(layer, hidden: torch.Tensor, mask: torch.Tensor | None, cls_only: bool,
                    with_uniform: bool = True) -> AttentionParts:
    """The self-attention of one BertLayer on its input hidden (N, T, d): its queries, keys and values run through
    :func:`~bertology.ablation.heads.attention_parts` (contexts, and the uniform ones if `with_uniform`), with Q = 1
    query ([CLS]) if cls_only else T."""
    sa = layer.attention.self
    n, t, _ = hidden.shape
    q_in = hidden[:, :1] if cls_only else hidden
    dh = sa.attention_head_size
    query = sa.query(q_in).view(n, q_in.shape[1], -1, dh).transpose(1, 2)
    key = sa.key(hidden).view(n, t, -1, dh).transpose(1, 2)
    value = sa.value(hidden).view(n, t, -1, dh).transpose(1, 2)
    return attention_parts(query, key, value, mask, sa.scaling, with_uniform=with_uniform)


def finish_layer(layer, context: torch.Tensor, hidden_in: torch.Tensor) -> torch.Tensor:
    """Output projection + residual/LayerNorm + feed-forward. context (N, Q, H, dh), hidden_in (N, Q, d)."""
    from transformers.pytorch_utils import apply_chunking_to_forward

    attn_out = layer.attention.output(context.reshape(*context.shape[:2], -1), hidden_in)
    return apply_chunking_to_forward(layer.feed_forward_chunk, layer.chunk_size_feed_forward, layer.seq_len_dim,
                                     attn_out)


def _run_from(plan: FastPlan, start: int, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Run layers start..L-1 with nothing disabled (the last one for [CLS] only) -> (N, K) logits.

    hidden: (N, T, d) input of layer `start`, or (N, 1, d) when start == L (already the final [CLS]).
    """
    layers = plan.layers
    for l in range(start, len(layers)):
        last = l == len(layers) - 1
        parts = layer_attention(layers[l], hidden, mask, cls_only=last, with_uniform=False)
        context = parts.context_for(None)
        hidden = finish_layer(layers[l], context, hidden[:, : context.shape[1]])
    return plan.classify(hidden)



@torch.no_grad()
def fast_batch_logits(model, batch: Batch, config_batch: int) -> torch.Tensor:
    """Logits of every configuration of :func:`~bertology.ablation.sweep.sweep_configurations` on one batch:
    (1 + L*H + L, N, K).

    Runs embeddings and each layer once for the baseline; for layer l, its H single-head configurations
    and the whole-layer one reuse layer l's attention (cached Q/K/V, softmax and uniform contexts), and
    are stacked `config_batch` at a time along the batch dimension through layers l..L-1.
    """
    from transformers.masking_utils import create_bidirectional_mask

    plan = check_fast_supported(model)
    layers = plan.layers
    n_layers, n_heads = len(layers), model.config.num_attention_heads
    n = batch.input_ids.shape[0]
    hidden = plan.embed(batch)
    mask = create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=batch.attention_mask)
    out = torch.empty(1 + n_layers * n_heads + n_layers, n, n_outputs(model), dtype=torch.float64)
    # configurations of one layer: row j < H disables head j alone, row H disables every head
    per_layer = torch.cat([torch.eye(n_heads, dtype=torch.bool), torch.ones(1, n_heads, dtype=torch.bool)])
    per_layer = per_layer.to(hidden.device)
    config_batch = effective_config_batch(config_batch, n, batch.input_ids.shape[1], hidden.device)
    for l in range(n_layers):
        last = l == n_layers - 1
        parts = layer_attention(layers[l], hidden, mask, cls_only=last)
        hidden_in = hidden[:, : parts.context.shape[2]]
        targets = [1 + l * n_heads + h for h in range(n_heads)] + [1 + n_layers * n_heads + l]
        for start in range(0, n_heads + 1, config_batch):
            sel = per_layer[start:start + config_batch]                       # (k, H)
            k = sel.shape[0]
            # (k, N, H, Q, dh) by broadcasting (no replicas of the contexts), then one copy to (k*N, Q, H, dh)
            stacked = torch.where(sel[:, None, :, None, None], parts.uniform_context[None], parts.context[None])
            context = stacked.transpose(2, 3).reshape(k * n, stacked.shape[3], n_heads, -1)
            h_next = finish_layer(layers[l], context, repeat_rows(hidden_in, k))
            logits = _run_from(plan, l + 1, h_next, repeat_rows(mask, k))
            out[targets[start:start + k]] = logits.view(k, n, -1).double().cpu()
        hidden = finish_layer(layers[l], parts.context_for(None), hidden_in)
    out[0] = plan.classify(hidden).double().cpu()
    return out


def fast_sweep(model, batches: Sequence[Batch], n_examples: int, config_batch: int,
               progress: bool = True) -> np.ndarray:
    """(C, E, K) logits for :func:`~bertology.ablation.sweep.sweep_configurations`, equal to
    :func:`~bertology.ablation.sweep.naive_sweep` up to rounding."""
    from tqdm.auto import tqdm

    check_fast_supported(model)
    if model.training:
        raise ValueError("call model.eval() first: the sweep measures the deterministic model")
    device = next(model.parameters()).device
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = np.zeros((1 + n_layers * n_heads + n_layers, n_examples, n_outputs(model)))
    for batch in tqdm(batches, desc="fast sweep", unit="batch", disable=not progress):
        out[:, batch.rows] = fast_batch_logits(model, batch.to(device), config_batch).numpy()
    return out

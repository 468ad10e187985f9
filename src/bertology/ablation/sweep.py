"""Disabling sweeps: every head alone, then every layer, over an evaluation set (Kovaleva et al. 4.6).

The *naive* sweep runs one full forward pass over the eval set per configuration. The *fast* sweep uses
that a head disabled in layer l changes nothing below l: per batch it runs the layers once, and for every
configuration of layer l (each head alone, then all heads) it resumes from layer l's cached
queries/keys/values, replaces the disabled heads' contexts by the uniform ones, and runs the rest of the
network with several configurations stacked along the batch dimension. The last layer only computes the
[CLS] query (the classifier reads nothing else). Results equal the naive sweep's up to float rounding
(checked in tests and in bench/bench_ablation.py). The fast sweep runs BERT-layer encoders (BERT,
RoBERTa, ELECTRA: :func:`fast_plan`).

The *prefix* sweep runs every other model whose layers are one list called in order (decoders such as Llama,
GPT-2, Qwen; DistilBERT, ModernBERT, DeBERTa-v2, ...: :func:`prefix_plan`): per batch one forward pass keeps
each layer's output; the configurations of layer l then run the model's own forward, stacked along the batch,
with layers 0..l-1 swapped for stand-ins that return their kept outputs (:func:`prefix_batch_logits`), which
saves about half the layer passes. :func:`resolve_sweep` picks "fast", else "prefix", else the naive sweep.
The model must have been passed through :func:`bertology.ablation.heads.enable_heads`.

Glossary: E examples, N rows of a batch, T padded length, L layers, H heads, dh head size, d hidden
size, C configurations, K logits per example (classes, or 1 for regression), Q query positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from bertology.ablation.heads import AttentionParts, attention_parts, disabled_heads
from bertology.pipeline.config import ConfigError
from bertology.models.encoding import Batch, encode_frame, pad_rows
from bertology.models.hooks import hooks

SWEEPS = ("fast", "naive")                 # the config's ablation.sweep
RUNNABLE = ("fast", "prefix", "naive")     # what resolve_sweep gives and run_sweep runs


@dataclass(frozen=True)
class Configuration:
    """What is disabled: nothing (baseline), one head (layer, head), or a whole layer (layer, None)."""

    layer: int | None = None
    head: int | None = None

    @property
    def kind(self) -> str:
        if self.layer is None:
            return "baseline"
        return "layer" if self.head is None else "head"

    def mask(self, n_layers: int, n_heads: int) -> torch.Tensor:
        """(L, H) bool: True where a head is disabled."""
        m = torch.zeros(n_layers, n_heads, dtype=torch.bool)
        if self.layer is not None:
            if self.head is None:
                m[self.layer] = True
            else:
                m[self.layer, self.head] = True
        return m


def sweep_configurations(n_layers: int, n_heads: int) -> list[Configuration]:
    """Baseline, then every head alone (layer-major), then every layer: 1 + L*H + L configurations."""
    return ([Configuration()]
            + [Configuration(l, h) for l in range(n_layers) for h in range(n_heads)]
            + [Configuration(l, None) for l in range(n_layers)])


def make_batches(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]], pad_id: int,
                 batch_size: int) -> list[Batch]:
    """Group examples by length (longest first) into padded batches (:func:`bertology.models.encoding.pad_rows`);
    every sweep uses the same batches."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    lengths = np.array([len(x) for x in input_ids])
    order = np.argsort(-lengths, kind="stable")
    return [pad_rows(input_ids, token_type_ids, order[start:start + batch_size], pad_id)
            for start in range(0, len(order), batch_size)]


# --------------------------------------------------------------------------------------------------
# The naive sweep: one full forward pass per configuration
# --------------------------------------------------------------------------------------------------

def n_outputs(model) -> int:
    """K: the logits per example of a sequence classifier (its num_labels)."""
    return int(model.config.num_labels)


def model_inputs(model, batch: Batch) -> dict[str, torch.Tensor]:
    """The keyword inputs of a forward pass: token_type_ids only for models whose forward takes them."""
    from bertology.models.loading import takes_token_type_ids

    out = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
    if takes_token_type_ids(model):
        out["token_type_ids"] = batch.token_type_ids
    return out


@torch.no_grad()
def forward_logits(model, batches: Sequence[Batch], disabled: torch.Tensor | None, n_examples: int) -> np.ndarray:
    """Full forward passes over all batches with the given (L, H) heads disabled -> (E, K) float64 logits."""
    device = next(model.parameters()).device
    out = np.zeros((n_examples, n_outputs(model)))
    mask = None if disabled is None or not bool(disabled.any()) else disabled.to(device)
    with disabled_heads(model, mask):
        for batch in batches:
            logits = model(**model_inputs(model, batch.to(device))).logits
            out[batch.rows] = logits.double().cpu().numpy()
    return out


def naive_sweep(model, batches: Sequence[Batch], configs: Sequence[Configuration], n_examples: int,
                progress: bool = True) -> np.ndarray:
    """(C, E, K) logits, one full pass over the eval set per configuration."""
    from tqdm.auto import tqdm

    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = np.zeros((len(configs), n_examples, n_outputs(model)))
    for c, cfg in enumerate(tqdm(configs, desc="naive sweep", unit="config", disable=not progress)):
        out[c] = forward_logits(model, batches, cfg.mask(n_layers, n_heads), n_examples)
    return out


# --------------------------------------------------------------------------------------------------
# The fast sweep: reuse everything below the disabled layer, stack configurations along the batch
# --------------------------------------------------------------------------------------------------

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
    sweep where :func:`prefix_plan` admits them (ALBERT's shared layers: the naive sweep).
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


def _plan_or_raise(plan):
    """A sweep's plan, or ConfigError with why it has none (`plan` the reason) and the naive sweep to run instead."""
    if isinstance(plan, str):
        raise ConfigError(f"{plan}. Run the naive sweep instead (config: ablation.sweep: naive); it gives the "
                          f"same outputs")
    return plan


def check_fast_supported(model) -> FastPlan:
    """The fast sweep's plan of `model`; ValueError saying why (and to use the naive sweep) if it has none."""
    return _plan_or_raise(fast_plan(model))


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


def repeat_rows(x: torch.Tensor | None, k: int) -> torch.Tensor | None:
    """(N, ...) -> (k*N, ...), replica-major."""
    return None if x is None else x.repeat(k, *([1] * (x.ndim - 1)))


CPU_TOKEN_BUDGET = 4096


def effective_config_batch(config_batch: int, n_rows: int, length: int, device: torch.device) -> int:
    """How many configurations to stack along the batch on this device.

    Stacking fills a GPU; on a CPU a few thousand tokens already saturate the matrix products, and larger
    stacks only make the memory-bound steps (softmax over (k*N, H, T, T) scores, GELU, LayerNorm) spill
    out of cache, so there the stack is capped at CPU_TOKEN_BUDGET tokens (at least one configuration).
    """
    if config_batch < 1:
        raise ValueError("config_batch must be >= 1")
    if torch.device(device).type != "cpu":
        return config_batch
    return max(1, min(config_batch, CPU_TOKEN_BUDGET // max(1, n_rows * length)))


@torch.no_grad()
def fast_batch_logits(model, batch: Batch, config_batch: int) -> torch.Tensor:
    """Logits of every configuration of :func:`sweep_configurations` on one batch: (1 + L*H + L, N, K).

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
    """(C, E, K) logits for :func:`sweep_configurations`, equal to :func:`naive_sweep` up to rounding."""
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


# --------------------------------------------------------------------------------------------------
# The prefix sweep: any model whose layers run in order; layers below the disabled one replay their outputs
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PrefixPlan:
    """How the prefix sweep runs a model: `layers`, the model's own list of its L layers (layer i holds the
    attention module of layer i), which its forward calls in order, each once (checked on every batch)."""

    model: torch.nn.Module
    layers: torch.nn.ModuleList


def prefix_plan(model) -> PrefixPlan | str:
    """The prefix sweep's plan for `model`, or why it cannot run it (then use the naive sweep: same outputs).

    The rule: the attention modules that :func:`~bertology.ablation.heads.enable_heads` reaches are one per
    layer (not shared: ALBERT's are, and a stand-in would skip the calls that tell a shared module its layer),
    and one ``nn.ModuleList`` of the model has L entries, entry i holding the attention module of layer i (a
    decoder's ``model.layers``, GPT-2's ``transformer.h``, DistilBERT's ``transformer.layer``, ...). That the
    forward calls those layers in order, each once, is checked on each batch (:func:`prefix_batch_logits`).
    """
    from torch import nn

    from bertology.ablation.heads import DisablingUnsupported, attention_modules
    from bertology.models.layers import shares_attention

    name = type(model).__name__
    n_layers = int(model.config.num_hidden_layers)
    try:
        modules, _ = attention_modules(model)
    except DisablingUnsupported as err:
        return str(err)
    if shares_attention(model) or len(modules) != n_layers:
        return (f"{name} has {len(modules)} attention modules for {n_layers} layers; the prefix sweep skips "
                f"layers, which needs one attention module per layer")
    for candidate in model.modules():
        if isinstance(candidate, nn.ModuleList) and len(candidate) == n_layers and \
                all(any(m is modules[i] for m in layer.modules()) for i, layer in enumerate(candidate)):
            return PrefixPlan(model, candidate)
    return (f"{name} has no list of {n_layers} layers holding its attention modules in order; the prefix sweep "
            f"needs one to skip the layers below the disabled one")


def check_prefix_supported(model) -> PrefixPlan:
    """The prefix sweep's plan of `model`; ConfigError saying why (and to use the naive sweep) if it has none."""
    return _plan_or_raise(prefix_plan(model))


def _map_tensors(obj, fn):
    """`obj` (a tensor, or tuples / lists / dicts of them, None, other values) with fn applied to every tensor."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):              # a namedtuple
        return type(obj)(*(_map_tensors(x, fn) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_tensors(x, fn) for x in obj)
    if isinstance(obj, dict):
        out = {key: _map_tensors(value, fn) for key, value in obj.items()}
        return out if type(obj) is dict else type(obj)(**out)
    return obj


def repeat_output(output, k: int, n_rows: int):
    """A layer's output on N rows -> the same on k*N rows, replica-major (:func:`repeat_rows`).

    output: what the layer returned (a tensor, or a tuple / list / dict of tensors and other values); each
    tensor whose first dimension is N is repeated, any other (a broadcast (1, ...) bias, None, a number) is
    returned as it is. With N = 1 a tensor of first dimension 1 is repeated too (the same values either way).
    Always new tensors for the repeated ones, so the next layer may change its input in place.
    """
    return _map_tensors(output, lambda t: repeat_rows(t, k) if t.ndim and t.shape[0] == n_rows else t)


class _Replayed(torch.nn.Module):
    """Stands in for a skipped layer: whatever it is called with, returns the layer's kept output on N rows,
    repeated k times (:func:`repeat_output`, at call time: one repeated output alive at a time). Other
    attributes read through to the layer (ModernBERT's loop reads ``layer.attention_type``); the layer is not
    registered as a submodule."""

    def __init__(self, layer: torch.nn.Module, output, k: int, n_rows: int):
        super().__init__()
        self.__dict__["_replaced"] = layer
        self.__dict__["_replay"] = (output, k, n_rows)

    def forward(self, *args, **kwargs):
        output, k, n_rows = self._replay
        return repeat_output(output, k, n_rows)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_replaced"], name)


def _prefix_inputs(model, batch: Batch) -> dict:
    """:func:`model_inputs`, plus ``use_cache=False`` where the forward takes it (no key/value cache kept:
    the logits are the same, and a skipped layer never fills its cache entry)."""
    import inspect

    inputs = model_inputs(model, batch)
    if "use_cache" in inspect.signature(model.forward).parameters:
        inputs["use_cache"] = False
    return inputs


def prefix_layer_passes(n_layers: int, n_heads: int) -> tuple[int, int]:
    """(naive, prefix): the layer passes per row of a batch of the two sweeps, the embeddings and head left out.

    naive = C * L = (1 + L*H + L) * L; prefix = L (the baseline) + sum_{l<L} (H+1) * (L-l)
    = L + (H+1) * L * (L+1) / 2. The ratio prefix / naive tends to (L+1) / (2L): 0.52 for 30 layers of 9 heads
    (SmolLM2-135M: 4680 / 9030), 0.57 for 8 layers of 8 heads (332 / 584).

    >>> prefix_layer_passes(30, 9)
    (9030, 4680)
    """
    return (1 + n_layers * n_heads + n_layers) * n_layers, n_layers + (n_heads + 1) * n_layers * (n_layers + 1) // 2


@torch.no_grad()
def prefix_batch_logits(model, batch: Batch, config_batch: int, plan: PrefixPlan | None = None,
                        on_layer: Callable[[], None] | None = None) -> torch.Tensor:
    """Logits of every configuration of :func:`sweep_configurations` on one batch: (1 + L*H + L, N, K).

    One forward pass with nothing disabled keeps each layer's output (forward hooks; whatever the layer returns,
    tensor or tuple) and gives the baseline. For layer l, its H + 1 configurations (head j alone, then every
    head) are stacked k at a time along the batch (k = :func:`effective_config_batch`): the model's own forward
    on the inputs repeated k times (replica-major: rows r*N .. r*N+N-1 are configuration r), the disabled
    mask (L, k*N, H) True only in layer l, and layers 0..l-1 swapped for :class:`_Replayed` stand-ins returning
    their kept outputs repeated k times (restored in a ``finally``). Everything else (embeddings, masks, rotary
    embeddings, what runs between layers, final norm, pooling, head) is the model's own code. A layer with no
    disabled head returns the same output on the same input, so the logits equal the naive sweep's up to
    float rounding (stacked rows run as different batch shapes). Layer passes: see :func:`prefix_layer_passes`.
    on_layer: called after each layer's configurations (a progress bar).

    Raises ValueError when the forward did not call the plan's layers in order, each once.
    """
    plan = plan or check_prefix_supported(model)
    layers = plan.layers
    n_layers, n_heads = len(layers), model.config.num_attention_heads
    n, width = batch.input_ids.shape
    inputs = _prefix_inputs(model, batch)
    kept: list = [None] * n_layers
    calls: list[int] = []

    def keep(index, module, args, output):
        kept[index] = _map_tensors(output, torch.Tensor.clone)   # a later layer may change its input in place
        calls.append(index)

    keeping = [(layer, lambda m, a, o, i=i: keep(i, m, a, o)) for i, layer in enumerate(layers)]
    with hooks(model, fwd=keeping), disabled_heads(model, None):
        baseline = model(**inputs).logits
    if calls != list(range(n_layers)):
        raise ValueError(f"{type(model).__name__}'s forward called its layers in the order {calls}, not each once "
                         f"in order; the prefix sweep cannot skip them: run the naive sweep (ablation.sweep: naive)")
    out = torch.empty(1 + n_layers * n_heads + n_layers, n, n_outputs(model), dtype=torch.float64)
    out[0] = baseline.double().cpu()
    device = batch.input_ids.device
    # configurations of one layer: row j < H disables head j alone, row H disables every head
    per_layer = torch.cat([torch.eye(n_heads, dtype=torch.bool), torch.ones(1, n_heads, dtype=torch.bool)])
    k_max = effective_config_batch(config_batch, n, width, device)
    originals = list(layers)
    for l in range(n_layers):
        targets = [1 + l * n_heads + h for h in range(n_heads)] + [1 + n_layers * n_heads + l]
        for start in range(0, n_heads + 1, k_max):
            sel = per_layer[start:start + k_max]                                   # (k, H)
            k = sel.shape[0]
            mask = torch.zeros(n_layers, k * n, n_heads, dtype=torch.bool)
            mask[l] = sel[:, None, :].expand(k, n, n_heads).reshape(k * n, n_heads)
            stacked = {key: repeat_rows(value, k) if isinstance(value, torch.Tensor) else value
                       for key, value in inputs.items()}
            try:
                for i in range(l):
                    layers[i] = _Replayed(originals[i], kept[i], k, n)
                with disabled_heads(model, mask.to(device)):
                    logits = model(**stacked).logits
            finally:
                for i in range(l):
                    layers[i] = originals[i]
            out[targets[start:start + k]] = logits.view(k, n, -1).double().cpu()
        if on_layer is not None:
            on_layer()
    return out


def prefix_sweep(model, batches: Sequence[Batch], n_examples: int, config_batch: int,
                 progress: bool = True) -> np.ndarray:
    """(C, E, K) logits for :func:`sweep_configurations`, equal to :func:`naive_sweep` up to rounding
    (:func:`prefix_batch_logits` on each batch)."""
    from tqdm.auto import tqdm

    plan = check_prefix_supported(model)
    if model.training:
        raise ValueError("call model.eval() first: the sweep measures the deterministic model")
    device = next(model.parameters()).device
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = np.zeros((1 + n_layers * n_heads + n_layers, n_examples, n_outputs(model)))
    with tqdm(total=len(batches) * n_layers, desc="prefix sweep", unit="layer", disable=not progress) as bar:
        for batch in batches:
            out[:, batch.rows] = prefix_batch_logits(model, batch.to(device), config_batch, plan,
                                                     on_layer=lambda: bar.update(1)).numpy()
    return out


# --------------------------------------------------------------------------------------------------
# Running a sweep
# --------------------------------------------------------------------------------------------------

def encode_batches(tokenizer, df: pd.DataFrame, max_length: int, batch_size: int) -> list[Batch]:
    """Tokenise a prepared frame ([CLS] a [SEP] (b [SEP]), truncated) into length-grouped padded batches."""
    enc = encode_frame(tokenizer, df, max_length)
    return make_batches(enc.input_ids, enc.token_type_ids, tokenizer.pad_token_id or 0, batch_size)


def resolve_sweep(model, requested: str) -> tuple[str, str | None]:
    """The sweep to run for `requested` ("fast" or "naive") on `model`, and why it is naive (None if not).

    "fast" gives "fast" on a BERT-layer encoder (:func:`fast_plan`), else "prefix" on a model whose layers the
    prefix sweep can skip (:func:`prefix_plan`: decoders, DistilBERT, ModernBERT, ...), else "naive" with the
    prefix sweep's reason; all three give the same outputs. "naive" gives "naive".
    """
    if requested not in SWEEPS:
        raise ValueError(f"unknown sweep {requested!r}; use one of {', '.join(SWEEPS)}")
    if requested == "fast" and isinstance(fast_plan(model), str):
        plan = prefix_plan(model)
        return ("naive", plan) if isinstance(plan, str) else ("prefix", None)
    return requested, None


def run_sweep(model, batches: Sequence[Batch], n_examples: int, *, sweep: str, config_batch: int,
              progress: bool = True) -> np.ndarray:
    """(C, E, K) logits of every configuration of :func:`sweep_configurations`.

    sweep: "fast" (:func:`fast_sweep`, BERT-layer encoders: see :func:`fast_plan`), "prefix"
    (:func:`prefix_sweep`, models whose layers run in order: see :func:`prefix_plan`) or "naive"
    (:func:`naive_sweep`, any model :func:`~bertology.ablation.heads.enable_heads` accepts); use
    :func:`resolve_sweep` to pick one for the config's ablation.sweep. config_batch: configurations stacked
    along the batch, at most (:func:`effective_config_batch`); the naive sweep runs one at a time.
    """
    if sweep not in RUNNABLE:
        raise ValueError(f"unknown sweep {sweep!r}; use one of {', '.join(SWEEPS)} (or {RUNNABLE[1]!r}, which "
                         f"resolve_sweep picks)")
    if sweep == "naive":
        configs = sweep_configurations(model.config.num_hidden_layers, model.config.num_attention_heads)
        return naive_sweep(model, batches, configs, n_examples, progress=progress)
    if sweep == "prefix":
        return prefix_sweep(model, batches, n_examples, config_batch=config_batch, progress=progress)
    return fast_sweep(model, batches, n_examples, config_batch=config_batch, progress=progress)

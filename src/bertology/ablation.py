"""Disabling heads and layers (Kovaleva et al. 2019, section 4.6, Figs. 8-9; DESIGN section 6).

A *disabled* head attends uniformly to the real tokens of its input: A[t, s] = 1/n for every key s < n
(n = real length, specials included) and 0 on padding, applied to the attention probabilities inside
the forward pass, so its output is the mean of the value vectors of the real tokens.

Mechanism. transformers 5 has no ``head_mask``. We register an attention function under the name
:data:`ATTN_IMPLEMENTATION` with ``transformers.AttentionInterface`` (it computes the eager attention,
then overwrites the probabilities of the disabled heads), and the eager padding-mask builder under the
same name with ``transformers.AttentionMaskInterface`` (a custom name otherwise gets *no* padding mask).
Which heads are disabled travels as a forward keyword, ``model(..., bertology_disabled=mask)`` with mask
(L, H) or (L, N, H) bool; BERT passes extra keywords down to the attention function, which reads the
row of its own layer (``module.layer_idx``).

Sweeps. The *naive* sweep runs one full forward pass over the eval set per configuration. The *fast*
sweep uses that a head disabled in layer l changes nothing below l: per batch it runs the layers once,
and for every configuration of layer l (each head alone, then all heads) it resumes from layer l's
cached queries/keys/values, replaces the disabled heads' contexts by the uniform ones, and runs the rest
of the network with several configurations stacked along the batch dimension. The last layer only
computes the [CLS] query (the classifier reads nothing else). Results equal the naive sweep's up to
float rounding (checked in tests and in bench/bench_ablation.py).

Outputs (rule ablation_sweep): results/ablation/{task}/heads.csv (one row per head and metric),
layers.csv (one row per layer and metric), with columns
``layer, [head,] metric, value, baseline, delta, ci_low, ci_high, p_value, p_adj, significant, test, n``
(meanings in :data:`COLUMN_DOCS`, also written into summary.json), and summary.csv / summary.json: the
expected delta of disabling a random head (mean over heads, with its paired-bootstrap interval), the best
and worst head and layer, and every gain (delta > 0) that stays significant after Benjamini-Hochberg.

Glossary: E examples, N rows of a batch, T padded length, L layers, H heads, dh head size, d hidden
size, C configurations, K logits per example (classes, or 1 for regression), Q query positions.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from bertology import ablation_stats as st

log = logging.getLogger(__name__)

ATTN_IMPLEMENTATION = "bertology_disable"
DISABLED_KWARG = "bertology_disabled"


# --------------------------------------------------------------------------------------------------
# The disabling mechanism
# --------------------------------------------------------------------------------------------------

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


def load_model(path: str | Path, device: str | torch.device = "cpu"):
    """A fine-tuned save_pretrained directory -> (model in eval mode with disabling enabled, tokenizer)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} holds no config.json: give the fine-tuned model directory written by "
                                f"rule train_model (results/models/<task>/pretrained)")
    model = AutoModelForSequenceClassification.from_pretrained(
        path, attn_implementation="eager", use_safetensors=True, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, local_files_only=True)
    return enable_disabling(model.to(device).eval()), tokenizer


# --------------------------------------------------------------------------------------------------
# Configurations and batches
# --------------------------------------------------------------------------------------------------

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


@dataclass
class Batch:
    """Padded model inputs of some examples. rows: (N,) positions of the examples in the eval set."""

    rows: np.ndarray
    input_ids: torch.Tensor        # (N, T) int64
    token_type_ids: torch.Tensor   # (N, T) int64
    attention_mask: torch.Tensor   # (N, T) int64, 1 on real tokens

    def to(self, device) -> "Batch":
        return Batch(self.rows, self.input_ids.to(device), self.token_type_ids.to(device),
                     self.attention_mask.to(device))


def make_batches(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]], pad_id: int,
                 batch_size: int) -> list[Batch]:
    """Group examples by length (longest first) into padded batches; both sweeps use the same batches."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    lengths = np.array([len(x) for x in input_ids])
    order = np.argsort(-lengths, kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = int(lengths[rows].max())
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        tt = torch.zeros((len(rows), width), dtype=torch.long)
        am = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = lengths[r]
            ids[i, :n] = torch.as_tensor(input_ids[r])
            tt[i, :n] = torch.as_tensor(token_type_ids[r])
            am[i, :n] = 1
        batches.append(Batch(rows, ids, tt, am))
    return batches


# --------------------------------------------------------------------------------------------------
# The naive sweep: one full forward pass per configuration
# --------------------------------------------------------------------------------------------------

def _n_outputs(model) -> int:
    return int(model.config.num_labels)


@torch.no_grad()
def forward_logits(model, batches: Sequence[Batch], disabled: torch.Tensor | None, n_examples: int) -> np.ndarray:
    """Full forward passes over all batches with the given (L, H) heads disabled -> (E, K) float64 logits."""
    device = next(model.parameters()).device
    out = np.zeros((n_examples, _n_outputs(model)))
    mask = None if disabled is None or not bool(disabled.any()) else disabled.to(device)
    for batch in batches:
        b = batch.to(device)
        kwargs = {DISABLED_KWARG: mask} if mask is not None else {}
        logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask, token_type_ids=b.token_type_ids,
                       **kwargs).logits
        out[batch.rows] = logits.double().cpu().numpy()
    return out


def naive_sweep(model, batches: Sequence[Batch], configs: Sequence[Configuration], n_examples: int,
                progress: bool = True) -> np.ndarray:
    """(C, E, K) logits, one full pass over the eval set per configuration."""
    from tqdm.auto import tqdm

    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = np.zeros((len(configs), n_examples, _n_outputs(model)))
    for c, cfg in enumerate(tqdm(configs, desc="naive sweep", unit="config", disable=not progress)):
        out[c] = forward_logits(model, batches, cfg.mask(n_layers, n_heads), n_examples)
    return out


# --------------------------------------------------------------------------------------------------
# The fast sweep: reuse everything below the disabled layer, stack configurations along the batch
# --------------------------------------------------------------------------------------------------

def check_fast_supported(model) -> None:
    """The fast sweep re-runs BERT layers piecewise; refuse architectures it was not verified on."""
    from torch import nn
    from transformers.models.bert.modeling_bert import BertLayer

    base = getattr(model, "bert", None)
    ok = (base is not None and all(isinstance(layer, BertLayer) for layer in base.encoder.layer)
          and getattr(base, "pooler", None) is not None and isinstance(getattr(model, "classifier", None), nn.Linear)
          and not model.config.is_decoder)
    if not ok:
        raise ValueError(f"the fast sweep supports BERT-architecture sequence classifiers (model_type 'bert' with "
                         f"a pooler); this is {type(model).__name__}. Run the naive sweep instead (--naive).")


def _layer_parts(layer, hidden: torch.Tensor, mask: torch.Tensor | None, cls_only: bool,
                 with_uniform: bool = True) -> AttentionParts:
    """Attention of one BertLayer. hidden: (N, T, d) -> parts with Q = 1 ([CLS]) if cls_only else T."""
    sa = layer.attention.self
    n, t, _ = hidden.shape
    q_in = hidden[:, :1] if cls_only else hidden
    dh = sa.attention_head_size
    query = sa.query(q_in).view(n, q_in.shape[1], -1, dh).transpose(1, 2)
    key = sa.key(hidden).view(n, t, -1, dh).transpose(1, 2)
    value = sa.value(hidden).view(n, t, -1, dh).transpose(1, 2)
    return attention_parts(query, key, value, mask, sa.scaling, with_uniform=with_uniform)


def _finish_layer(layer, context: torch.Tensor, hidden_in: torch.Tensor) -> torch.Tensor:
    """Output projection + residual/LayerNorm + feed-forward. context (N, Q, H, dh), hidden_in (N, Q, d)."""
    from transformers.pytorch_utils import apply_chunking_to_forward

    attn_out = layer.attention.output(context.reshape(*context.shape[:2], -1), hidden_in)
    return apply_chunking_to_forward(layer.feed_forward_chunk, layer.chunk_size_feed_forward, layer.seq_len_dim,
                                     attn_out)


def _classify(model, hidden: torch.Tensor) -> torch.Tensor:
    """(N, Q, d) final hidden states (position 0 = [CLS]) -> (N, K) logits."""
    return model.classifier(model.dropout(model.bert.pooler(hidden)))


def _run_from(model, start: int, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Run layers start..L-1 with nothing disabled (the last one for [CLS] only) -> (N, K) logits.

    hidden: (N, T, d) input of layer `start`, or (N, 1, d) when start == L (already the final [CLS]).
    """
    layers = model.bert.encoder.layer
    for l in range(start, len(layers)):
        last = l == len(layers) - 1
        parts = _layer_parts(layers[l], hidden, mask, cls_only=last, with_uniform=False)
        context = parts.context_for(None)
        hidden = _finish_layer(layers[l], context, hidden[:, : context.shape[1]])
    return _classify(model, hidden)


def _repeat(x: torch.Tensor | None, k: int) -> torch.Tensor | None:
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
def fast_batch_logits(model, batch: Batch, config_batch: int = 8) -> torch.Tensor:
    """Logits of every configuration of :func:`sweep_configurations` on one batch: (1 + L*H + L, N, K).

    Runs embeddings and each layer once for the baseline; for layer l, its H single-head configurations
    and the whole-layer one reuse layer l's attention (cached Q/K/V, softmax and uniform contexts), and
    are stacked `config_batch` at a time along the batch dimension through layers l..L-1.
    """
    from transformers.masking_utils import create_bidirectional_mask

    bert = model.bert
    layers = bert.encoder.layer
    n_layers, n_heads = len(layers), model.config.num_attention_heads
    n = batch.input_ids.shape[0]
    hidden = bert.embeddings(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids)
    mask = create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=batch.attention_mask)
    out = torch.empty(1 + n_layers * n_heads + n_layers, n, _n_outputs(model), dtype=torch.float64)
    # configurations of one layer: row j < H disables head j alone, row H disables every head
    per_layer = torch.cat([torch.eye(n_heads, dtype=torch.bool), torch.ones(1, n_heads, dtype=torch.bool)])
    per_layer = per_layer.to(hidden.device)
    config_batch = effective_config_batch(config_batch, n, batch.input_ids.shape[1], hidden.device)
    for l in range(n_layers):
        last = l == n_layers - 1
        parts = _layer_parts(layers[l], hidden, mask, cls_only=last)
        hidden_in = hidden[:, : parts.context.shape[2]]
        targets = [1 + l * n_heads + h for h in range(n_heads)] + [1 + n_layers * n_heads + l]
        for start in range(0, n_heads + 1, config_batch):
            sel = per_layer[start:start + config_batch]                       # (k, H)
            k = sel.shape[0]
            # (k, N, H, Q, dh) by broadcasting (no replicas of the contexts), then one copy to (k*N, Q, H, dh)
            stacked = torch.where(sel[:, None, :, None, None], parts.uniform_context[None], parts.context[None])
            context = stacked.transpose(2, 3).reshape(k * n, stacked.shape[3], n_heads, -1)
            h_next = _finish_layer(layers[l], context, _repeat(hidden_in, k))
            logits = _run_from(model, l + 1, h_next, _repeat(mask, k))
            out[targets[start:start + k]] = logits.view(k, n, -1).double().cpu()
        hidden = _finish_layer(layers[l], parts.context_for(None), hidden_in)
    out[0] = _classify(model, hidden).double().cpu()
    return out


def fast_sweep(model, batches: Sequence[Batch], n_examples: int, config_batch: int = 8,
               progress: bool = True) -> np.ndarray:
    """(C, E, K) logits for :func:`sweep_configurations`, equal to :func:`naive_sweep` up to rounding."""
    from tqdm.auto import tqdm

    check_fast_supported(model)
    if model.training:
        raise ValueError("call model.eval() first: the sweep measures the deterministic model")
    device = next(model.parameters()).device
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = np.zeros((1 + n_layers * n_heads + n_layers, n_examples, _n_outputs(model)))
    for batch in tqdm(batches, desc="fast sweep", unit="batch", disable=not progress):
        out[:, batch.rows] = fast_batch_logits(model, batch.to(device), config_batch).numpy()
    return out


# --------------------------------------------------------------------------------------------------
# Tables: metrics, deltas, paired bootstrap intervals, p-values, FDR, the random head
# --------------------------------------------------------------------------------------------------

TABLE_COLUMNS = ["layer", "head", "metric", "value", "baseline", "delta", "ci_low", "ci_high", "p_value", "p_adj",
                 "significant", "test", "n"]
COLUMN_DOCS = {
    "layer": "0-based layer of the disabled head(s)",
    "head": "0-based head (heads.csv only)",
    "metric": "one of the task's GLUE metrics (bertology.tasks)",
    "value": "the metric with the head/layer disabled (fraction; correlations in [-1, 1])",
    "baseline": "the metric of the intact model on the same examples",
    "delta": "value - baseline",
    "ci_low, ci_high": "equal-tailed 95% paired-bootstrap percentile interval of delta (ablation.bootstrap "
                       "resamples of the examples, the same resamples for baseline and configuration, seed "
                       "ablation.seed; NaN when bootstrap is 0)",
    "p_value": "two-sided p of 'no change': exact McNemar for accuracy, paired approximate randomisation "
               "(ablation.bootstrap rounds) for F1/MCC/correlations",
    "p_adj": "Benjamini-Hochberg adjusted p within the file and metric (72 heads, or 6 layers, for MiniLM)",
    "significant": "p_adj < ablation.alpha",
    "test": "mcnemar_exact | randomization",
    "n": "evaluation examples",
}


def predictions_of(logits: np.ndarray, regression: bool) -> np.ndarray:
    """(C, E, K) logits -> (C, E) class ids, or scores for regression (K == 1)."""
    return logits[..., 0] if regression else logits.argmax(axis=-1)


@dataclass
class SweepTables:
    heads: pd.DataFrame
    layers: pd.DataFrame
    summary: pd.DataFrame
    summary_info: dict


def sweep_tables(task: str, labels: np.ndarray, logits: np.ndarray, n_layers: int, n_heads: int, *,
                 n_boot: int = 1000, seed: int = 42, alpha: float = 0.05, level: float = 0.95) -> SweepTables:
    """heads.csv / layers.csv / summary tables from the sweep's logits.

    labels: (E,); logits: (C, E, K) in the order of :func:`sweep_configurations`.
    """
    from bertology.metrics import compute_metrics
    from bertology.tasks import get_task

    spec = get_task(task)
    configs = sweep_configurations(n_layers, n_heads)
    if logits.shape[0] != len(configs):
        raise ValueError(f"{logits.shape[0]} configurations of logits; expected {len(configs)} for "
                         f"{n_layers} layers x {n_heads} heads")
    labels = np.asarray(labels)
    n = len(labels)
    preds = predictions_of(logits, spec.is_regression)                        # (C, E)
    values = [compute_metrics(task, p, labels) for p in preds]
    idx = st.bootstrap_indices(n, n_boot, seed)
    head_cols = [i for i, c in enumerate(configs[1:]) if c.kind == "head"]
    layer_cols = [i for i, c in enumerate(configs[1:]) if c.kind == "layer"]
    rows_h, rows_l, summary = [], [], []
    info: dict = {"task": task, "n": n, "bootstrap": n_boot, "seed": seed, "alpha": alpha, "level": level,
                  "baseline": values[0], "metrics": {}}
    for metric in spec.metrics:
        base = values[0][metric]
        value = np.array([v[metric] for v in values[1:]])
        delta = value - base
        boot = st.paired_bootstrap_deltas(metric, labels, preds[0], preds[1:], idx)    # (B, C-1)
        low, high = st.percentile_interval(boot, level)
        p, test = st.paired_test(metric, labels, preds[0], preds[1:], n_boot, seed + 1)
        p_adj = np.full_like(p, np.nan)
        for cols in (head_cols, layer_cols):
            p_adj[cols] = st.fdr_bh(p[cols])
        for i, cfg in enumerate(configs[1:]):
            row = {"layer": cfg.layer, "head": cfg.head, "metric": metric, "value": value[i], "baseline": base,
                   "delta": delta[i], "ci_low": low[i], "ci_high": high[i], "p_value": p[i], "p_adj": p_adj[i],
                   "significant": bool(p_adj[i] < alpha), "test": test, "n": n}
            (rows_h if cfg.kind == "head" else rows_l).append(row)
        # the expected delta of disabling a random head, with its bootstrap interval
        rand = boot[:, head_cols].mean(axis=1) if n_boot else np.zeros((0,))
        rlow, rhigh = st.percentile_interval(rand[:, None], level)
        summary.append({"metric": metric, "finding": "random_head", "layer": None, "head": None,
                        "value": float(value[head_cols].mean()), "baseline": base,
                        "delta": float(delta[head_cols].mean()), "ci_low": rlow[0], "ci_high": rhigh[0],
                        "p_value": np.nan, "p_adj": np.nan, "n": n})
        m_info: dict = {"random_head": {"delta": float(delta[head_cols].mean()), "ci_low": float(rlow[0]),
                                        "ci_high": float(rhigh[0])}}
        for kind, cols in (("head", head_cols), ("layer", layer_cols)):
            sub_delta = delta[cols]
            for finding, j in ((f"best_{kind}", int(np.argmax(sub_delta))), (f"worst_{kind}", int(np.argmin(sub_delta)))):
                c = cols[j]
                summary.append({"metric": metric, "finding": finding, "layer": configs[1 + c].layer,
                                "head": configs[1 + c].head, "value": value[c], "baseline": base,
                                "delta": delta[c], "ci_low": low[c], "ci_high": high[c], "p_value": p[c],
                                "p_adj": p_adj[c], "n": n})
            gains = [c for c in cols if delta[c] > 0]
            surviving = [c for c in gains if p_adj[c] < alpha]
            for c in surviving:
                summary.append({"metric": metric, "finding": f"surviving_gain_{kind}", "layer": configs[1 + c].layer,
                                "head": configs[1 + c].head, "value": value[c], "baseline": base,
                                "delta": delta[c], "ci_low": low[c], "ci_high": high[c], "p_value": p[c],
                                "p_adj": p_adj[c], "n": n})
            m_info[f"{kind}s"] = {
                "gains": len(gains), "losses": int(sum(delta[c] < 0 for c in cols)),
                "surviving_gains": [[configs[1 + c].layer, configs[1 + c].head] for c in surviving],
                "surviving_losses": int(sum(delta[c] < 0 and p_adj[c] < alpha for c in cols)),
                "max_gain": float(sub_delta.max()),
            }
        info["metrics"][metric] = m_info
    info["verdict"] = _verdict(info)
    heads = pd.DataFrame(rows_h, columns=TABLE_COLUMNS).astype({"layer": int, "head": int})
    layers = pd.DataFrame(rows_l, columns=TABLE_COLUMNS).drop(columns="head").astype({"layer": int})
    summ = pd.DataFrame(summary)
    summ.insert(0, "task", task)
    summ["layer"] = summ["layer"].astype("Int64")
    summ["head"] = summ["head"].astype("Int64")
    return SweepTables(heads, layers, summ, info)


def _verdict(info: dict) -> str:
    """One sentence per metric: how many gains there are and how many survive BH correction."""
    parts = []
    for metric, m in info["metrics"].items():
        h, l, r = m["heads"], m["layers"], m["random_head"]
        parts.append(
            f"{metric}: disabling one head raised the score for {h['gains']} heads (max +{h['max_gain']:.4f}), "
            f"{len(h['surviving_gains'])} of them significant after Benjamini-Hochberg at {info['alpha']}; "
            f"whole layers: {l['gains']} gains, {len(l['surviving_gains'])} significant; a random head changes "
            f"it by {r['delta']:+.4f} on average (95% CI {r['ci_low']:+.4f} to {r['ci_high']:+.4f}).")
    return " ".join(parts)


# --------------------------------------------------------------------------------------------------
# Figures (Kovaleva Figs. 8 and 9, with the baseline marked and the uncertainty shown)
# --------------------------------------------------------------------------------------------------

def plot_heads(heads: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Fig. 8: layer x head heatmap of the metric with one head disabled, one panel per metric.

    Colours diverge around the baseline (TwoSlopeNorm centred on it); the baseline is in the title and
    drawn on the colour bar; heads whose change survives BH correction are marked with a star.
    """
    from matplotlib.colors import TwoSlopeNorm

    from bertology.plotting import new_figure, number_from_one, save_figure, symmetric_limit

    metrics = list(dict.fromkeys(heads["metric"]))
    n_layers, n_heads = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    fig, axes = new_figure(max(7.0, 4.6 * len(metrics) + 0.6), 0.45 * n_layers + 2.2, ncols=len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        sub = heads[heads["metric"] == metric]
        grid = np.full((n_layers, n_heads), np.nan)
        grid[sub["layer"], sub["head"]] = sub["value"]
        base = float(sub["baseline"].iloc[0])
        half = symmetric_limit(grid - base, floor=1e-4)
        im = ax.imshow(grid, cmap="RdBu", norm=TwoSlopeNorm(vcenter=base, vmin=base - half, vmax=base + half),
                       aspect="auto")
        for _, r in sub[sub["significant"]].iterrows():
            ax.text(r["head"], r["layer"], "*", ha="center", va="center", fontsize=12, color="black")
        number_from_one(ax, "x", n_heads, label="head", every=1 if n_heads <= 16 else 2)
        number_from_one(ax, "y", n_layers, label="layer")
        ax.set_title(f"{metric} (baseline {base:.4f})")
        cbar = fig.colorbar(im, ax=ax, label=f"{metric} with the head disabled")
        cbar.ax.axhline(base, color="orange", linewidth=2)
    fig.suptitle(f"{task}: one head disabled at a time (uniform attention); * = significant after BH", fontsize=10)
    return save_figure(fig, path)


def plot_layers(layers: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Fig. 9: the metric with each whole layer disabled, with its 95% bootstrap interval and the baseline."""
    from bertology.plotting import new_figure, number_from_one, save_figure

    metrics = list(dict.fromkeys(layers["metric"]))
    fig, axes = new_figure(max(7.0, 4.4 * len(metrics)), 3.8, ncols=len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        sub = layers[layers["metric"] == metric].sort_values("layer")
        base = float(sub["baseline"].iloc[0])
        x = sub["layer"].to_numpy()
        colours = np.select([sub["delta"] > 0, sub["delta"] < 0], ["tab:blue", "tab:red"], "tab:gray")
        ax.bar(x, sub["value"], color=colours, alpha=0.8)
        if sub["ci_low"].notna().all():
            err = np.vstack([sub["value"] - (base + sub["ci_low"]), (base + sub["ci_high"]) - sub["value"]])
            ax.errorbar(x, sub["value"], yerr=np.clip(err, 0, None), fmt="none", ecolor="black", capsize=3)
        ax.axhline(base, color="orange", linewidth=2, label=f"baseline {base:.4f}")
        lo = min(sub["value"].min(), base + np.nanmin(sub["ci_low"]) if sub["ci_low"].notna().any() else base)
        hi = max(sub["value"].max(), base + np.nanmax(sub["ci_high"]) if sub["ci_high"].notna().any() else base)
        pad = max(0.05 * (hi - lo), 1e-3)
        ax.set_ylim(lo - pad, hi + pad)
        number_from_one(ax, "x", len(x), label="disabled layer (all heads)", positions=x)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric}")
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(f"{task}: one layer disabled at a time (error bars: 95% paired-bootstrap CI)", fontsize=10)
    return save_figure(fig, path)


# --------------------------------------------------------------------------------------------------
# Running a sweep, and the CLI commands the rules call
# --------------------------------------------------------------------------------------------------

def encode_batches(tokenizer, df: pd.DataFrame, max_length: int, batch_size: int) -> list[Batch]:
    """Tokenise a prepared frame ([CLS] a [SEP] (b [SEP]), truncated) into length-grouped padded batches."""
    from bertology.encoding import encode

    enc = encode(tokenizer, df, max_length)
    tt = enc.get("token_type_ids") or [[0] * len(x) for x in enc["input_ids"]]
    return make_batches(enc["input_ids"], tt, tokenizer.pad_token_id or 0, batch_size)


def run_sweep(model, batches: Sequence[Batch], n_examples: int, *, naive: bool = False, config_batch: int = 8,
              progress: bool = True) -> np.ndarray:
    """(C, E, K) logits of every configuration of :func:`sweep_configurations` (fast unless `naive`)."""
    if naive:
        configs = sweep_configurations(model.config.num_hidden_layers, model.config.num_attention_heads)
        return naive_sweep(model, batches, configs, n_examples, progress=progress)
    return fast_sweep(model, batches, n_examples, config_batch=config_batch, progress=progress)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def write_tables(tables: SweepTables, heads: str | Path, layers: str | Path, summary: str | Path) -> None:
    """heads.csv, layers.csv, summary.csv (+ summary.json beside it with counts and the verdict)."""
    for df, path in ((tables.heads, heads), (tables.layers, layers), (tables.summary, summary)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, index=False)
    info = dict(tables.summary_info, columns=COLUMN_DOCS)
    Path(summary).with_suffix(".json").write_text(json.dumps(info, indent=2, default=float))


def sweep_cmd(argv: list[str]) -> int:
    """bertology ablation-sweep: every head and every layer disabled alone, with uncertainty."""
    from bertology import tracking
    from bertology.cli import parse_json
    from bertology.data import read_prepared, subsample
    from bertology.tasks import get_task

    ap = argparse.ArgumentParser(prog="bertology ablation-sweep", description=sweep_cmd.__doc__)
    ap.add_argument("--task", required=True)
    ap.add_argument("--model", required=True, help="fine-tuned save_pretrained directory")
    ap.add_argument("--data", required=True, help="results/data/{task}/validation.parquet")
    ap.add_argument("--params", required=True, help='JSON: {"ablation": {...}, "max_length": N}')
    ap.add_argument("--heads", required=True)
    ap.add_argument("--layers", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--naive", action="store_true", help="one full forward pass per configuration (slow)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    params = parse_json(args.params)
    cfg = dict(params.get("ablation", {}))
    max_length = int(params.get("max_length", 128))
    spec = get_task(args.task)
    if args.threads:
        torch.set_num_threads(args.threads)
    df = subsample(read_prepared(args.data), cfg.get("examples"), int(cfg.get("seed", 42)))
    if df.empty:
        raise ValueError(f"{args.data} has no examples")
    device = resolve_device(args.device)
    model, tokenizer = load_model(args.model, device)
    if model.config.num_labels != spec.num_labels:
        raise ValueError(f"{args.model} has {model.config.num_labels} output(s) but {args.task} needs "
                         f"{spec.num_labels}: is it the model fine-tuned on {args.task}?")
    batches = encode_batches(tokenizer, df, max_length, int(cfg.get("batch_size", 64)))
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    with tracking.job_run("ablation_sweep", task=args.task, variant="finetuned", params=params) as run:
        import mlflow

        t0 = time.perf_counter()
        logits = run_sweep(model, batches, len(df), naive=args.naive, config_batch=int(cfg.get("config_batch", 8)),
                           progress=not args.no_progress)
        sweep_s = time.perf_counter() - t0
        log.info("%s: %d configurations x %d examples in %.1f s (%s sweep, %s)", args.task, logits.shape[0],
                 len(df), sweep_s, "naive" if args.naive else "fast", device)
        tables = sweep_tables(args.task, df["label"].to_numpy(), logits, n_layers, n_heads,
                              n_boot=int(cfg.get("bootstrap", 1000)), seed=int(cfg.get("seed", 42)),
                              alpha=float(cfg.get("alpha", 0.05)))
        write_tables(tables, args.heads, args.layers, args.summary)
        log.info("%s", tables.summary_info["verdict"])
        mlflow.log_metric("sweep_seconds", sweep_s)
        mlflow.log_metric("n_examples", len(df))
        for metric, value in tables.summary_info["baseline"].items():
            mlflow.log_metric(f"baseline_{metric}", value)
        for metric, m in tables.summary_info["metrics"].items():
            mlflow.log_metric(f"random_head_delta_{metric}", m["random_head"]["delta"])
            mlflow.log_metric(f"surviving_head_gains_{metric}", len(m["heads"]["surviving_gains"]))
            mlflow.log_metric(f"surviving_layer_gains_{metric}", len(m["layers"]["surviving_gains"]))
        # per-head deltas as one batch (step = layer * H + head; layers: step = layer)
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = ([Metric(f"head_delta_{r.metric}", float(r.delta), now, int(r.layer * n_heads + r.head))
                  for r in tables.heads.itertuples()]
                 + [Metric(f"layer_delta_{r.metric}", float(r.delta), now, int(r.layer))
                    for r in tables.layers.itertuples()])
        client = mlflow.MlflowClient()
        for start in range(0, len(batch), 1000):
            client.log_batch(run.info.run_id, metrics=batch[start:start + 1000])
        for path in (args.heads, args.layers, args.summary, str(Path(args.summary).with_suffix(".json"))):
            mlflow.log_artifact(path)
    return 0


def figures_cmd(argv: list[str]) -> int:
    """bertology ablation-figures: Figs. 8 and 9 (heads heatmap, layers bars) from heads.csv / layers.csv."""
    from bertology import tracking

    ap = argparse.ArgumentParser(prog="bertology ablation-figures", description=figures_cmd.__doc__)
    ap.add_argument("--task", required=True)
    ap.add_argument("--heads", required=True)
    ap.add_argument("--layers", required=True)
    ap.add_argument("--out-heads", required=True)
    ap.add_argument("--out-layers", required=True)
    args = ap.parse_args(argv)
    heads, layers = pd.read_csv(args.heads), pd.read_csv(args.layers)
    with tracking.job_run("ablation_figures", task=args.task, variant="finetuned") as _:
        import mlflow

        for path in (plot_heads(heads, args.task, args.out_heads), plot_layers(layers, args.task, args.out_layers)):
            mlflow.log_artifact(str(path))
    return 0

"""Pruning curves (Michel et al. 2019, section 4, Fig. 3): the task metric as heads are removed in order of
increasing importance, 10% of all heads a step, against random orders.

A pruning *order* is a permutation of the L*H heads; at fraction f the first round(f * L * H) heads of the
order are removed. Removal (``mode``) is either

- ``zero``: the head's output is zeroed (gate 0; the paper's masking), or
- ``uniform``: the head attends uniformly to the real tokens (this project's disabling, Kovaleva 4.6).

Importance is computed once, on the intact model (the paper's default; its code can recompute after each
step, which it does not use for the reported curves).

Evaluation reuses the fast sweep's pieces (:mod:`bertology.ablation.sweep_fast`): per batch the intact model's
layer inputs are computed once; a configuration whose first removed head is in layer s resumes from the
cached input of layer s, several configurations are stacked along the batch, and the last layer computes
the [CLS] query only. Identical configurations (fraction 0 is the baseline of every order, fraction 1
removes every head whatever the order) are computed once. The naive way runs one full forward pass per
configuration through the registered attention function; both give the same numbers up to float rounding.

Glossary: E examples, N rows of a batch, T padded length, L layers, H heads, C configurations, F fractions,
K logits per example.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from bertology.ablation.heads import DISABLED_KWARG, GATES_KWARG, disabled_heads, head_gates
from bertology.ablation.stacking import effective_config_batch, n_outputs, repeat_rows
from bertology.ablation.sweep_fast import check_fast_supported, finish_layer, layer_attention
from bertology.models.encoding import Batch

MODES = ("zero", "uniform")
METHODS = ("fast", "naive")


def pruning_fractions(step: float) -> np.ndarray:
    """0, step, 2 step, ..., 1 (1 always included): (F,) float64."""
    if not 0 < step <= 1:
        raise ValueError(f"the pruning step must be in (0, 1], got {step}")
    n = int(np.floor(1 / step + 1e-9))
    fr = np.round(np.arange(n + 1) * step, 10)
    return fr if fr[-1] >= 1 - 1e-9 else np.append(fr, 1.0)


def importance_order(importance: np.ndarray) -> np.ndarray:
    """(L, H) importance -> (L*H,) flat head indices (layer * H + head), least important first (ties: lower
    index first)."""
    return np.argsort(np.asarray(importance).ravel(), kind="stable")


def random_order(n_heads_total: int, seed: int) -> np.ndarray:
    """A seeded random permutation of the L*H flat head indices."""
    return np.random.default_rng(seed).permutation(n_heads_total)


def n_pruned(fraction: float, n_heads_total: int) -> int:
    """How many heads fraction f of all heads is: f * L * H rounded half up."""
    return int(np.floor(fraction * n_heads_total + 0.5))


def order_masks(order: np.ndarray, fractions: np.ndarray, n_layers: int, n_heads: int) -> np.ndarray:
    """(F, L, H) bool: True where a head is removed at each fraction (the first n_pruned(f) of the order)."""
    total = n_layers * n_heads
    masks = np.zeros((len(fractions), total), dtype=bool)
    for i, f in enumerate(fractions):
        masks[i, order[:n_pruned(f, total)]] = True
    return masks.reshape(len(fractions), n_layers, n_heads)


# --------------------------------------------------------------------------------------------------
# logits of pruned models
# --------------------------------------------------------------------------------------------------

def _check(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown pruning mode {mode!r}; use one of {', '.join(MODES)}")


def removal_kwargs(mask: torch.Tensor, mode: str) -> dict:
    """The forward keyword that removes the heads of an (L, H) or (L, N, H) bool mask in `mode`."""
    _check(mode)
    if not bool(mask.any()):
        return {}
    if mode == "uniform":
        return {DISABLED_KWARG: mask}
    return {GATES_KWARG: (~mask).float()}


@torch.no_grad()
def naive_pruned_logits(model, batches: Sequence[Batch], masks: np.ndarray, n_examples: int, mode: str,
                        progress: bool = True) -> np.ndarray:
    """(C, E, K) logits: one full forward pass over every batch per (L, H) mask of `masks` (C, L, H).

    The model must have been passed through :func:`bertology.ablation.heads.enable_heads`.
    """
    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    out = np.zeros((len(masks), n_examples, n_outputs(model)))
    for c in tqdm(range(len(masks)), desc="pruning (naive)", unit="config", disable=not progress):
        kwargs = removal_kwargs(torch.as_tensor(masks[c]).to(device), mode)
        # through the model's state, not forward keywords: every architecture (DeBERTa-v2 takes none)
        with disabled_heads(model, kwargs.get(DISABLED_KWARG)), head_gates(model, kwargs.get(GATES_KWARG)):
            for batch in batches:
                logits = model(**batch.to(device).inputs()).logits
                out[c, batch.rows] = logits.double().cpu().numpy()
    return out


def _removed_context(parts, rows: torch.Tensor, mode: str) -> torch.Tensor:
    """Context (N, Q, H, dh) with the heads of rows (N, H) bool removed in `mode`."""
    if mode == "uniform":
        return parts.context_for(rows)
    return parts.context_for(None) * (~rows)[:, None, :, None].to(parts.context.dtype)


@torch.no_grad()
def fast_batch_pruned_logits(model, batch: Batch, masks: torch.Tensor, mode: str, config_batch: int) -> torch.Tensor:
    """(C, N, K) logits of every (L, H) mask of `masks` (C, L, H) bool on one batch (see the module doc)."""
    from transformers.masking_utils import create_bidirectional_mask

    plan = check_fast_supported(model)
    layers = plan.layers
    n_layers = len(layers)
    n = batch.input_ids.shape[0]
    hidden = plan.embed(batch)
    mask = create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=batch.attention_mask)
    inputs = [hidden]                      # inputs[l]: input of layer l in the intact model, (N, T, d)
    for l in range(n_layers):
        last = l == n_layers - 1
        parts = layer_attention(layers[l], hidden, mask, cls_only=last, with_uniform=False)
        hidden = finish_layer(layers[l], parts.context_for(None), hidden[:, : parts.context.shape[2]])
        inputs.append(hidden)              # inputs[L]: the intact model's final [CLS], (N, 1, d)
    out = torch.empty(len(masks), n, n_outputs(model), dtype=torch.float64)
    masks = masks.to(hidden.device)
    any_layer = masks.any(dim=2)                                           # (C, L)
    # first layer with a removed head (L when none): the layers below it are the intact model's
    first = torch.where(any_layer.any(dim=1), any_layer.long().argmax(dim=1), n_layers)
    config_batch = effective_config_batch(config_batch, n, batch.input_ids.shape[1], hidden.device)
    for start_layer in sorted(set(first.tolist())):
        idx = torch.nonzero(first == start_layer).flatten()
        if start_layer == n_layers:       # nothing removed: the intact model
            out[idx] = plan.classify(inputs[n_layers]).double().cpu()[None]
            continue
        for s in range(0, len(idx), config_batch):
            sel = idx[s:s + config_batch]
            k = len(sel)
            h = repeat_rows(inputs[start_layer], k)
            m = repeat_rows(mask, k)
            for l in range(start_layer, n_layers):
                last = l == n_layers - 1
                rows = masks[sel, l][:, None, :].expand(k, n, masks.shape[2]).reshape(k * n, -1)   # (k*N, H)
                parts = layer_attention(layers[l], h, m, cls_only=last, with_uniform=mode == "uniform")
                h = finish_layer(layers[l], _removed_context(parts, rows, mode), h[:, : parts.context.shape[2]])
            out[sel] = plan.classify(h).view(k, n, -1).double().cpu()
    return out


def fast_pruned_logits(model, batches: Sequence[Batch], masks: np.ndarray, n_examples: int, mode: str,
                       config_batch: int, progress: bool = True) -> np.ndarray:
    """(C, E, K) logits of every mask, equal to :func:`naive_pruned_logits` up to rounding (BERT classifiers)."""
    from tqdm.auto import tqdm

    _check(mode)
    check_fast_supported(model)
    if model.training:
        raise ValueError("call model.eval() first: pruning measures the deterministic model")
    device = next(model.parameters()).device
    masks = np.asarray(masks, dtype=bool)
    unique, inverse = np.unique(masks.reshape(len(masks), -1), axis=0, return_inverse=True)
    unique_t = torch.as_tensor(unique.reshape(-1, *masks.shape[1:]))
    out = np.zeros((len(unique), n_examples, n_outputs(model)))
    for batch in tqdm(batches, desc="pruning (fast)", unit="batch", disable=not progress):
        out[:, batch.rows] = fast_batch_pruned_logits(model, batch.to(device), unique_t, mode, config_batch).numpy()
    return out[inverse.ravel()]


def pruned_logits(model, batches: Sequence[Batch], masks: np.ndarray, n_examples: int, *, mode: str, method: str,
                  config_batch: int, progress: bool = True) -> np.ndarray:
    """(C, E, K) logits of the model with the heads of each (L, H) mask removed in `mode` ("zero" | "uniform").

    method: "fast" (BERT-layer classifiers: :func:`bertology.ablation.sweep_fast.fast_plan`; resolve it with
    :func:`bertology.ablation.sweep.resolve_sweep`) or "naive" (every supported architecture); "prefix" (what
    :func:`~bertology.ablation.sweep.resolve_sweep` gives other layered models) runs the naive way: a pruning
    configuration removes heads in many layers, the first of them almost always early, so resuming from a kept
    layer saves little. The model must have been passed through :func:`bertology.ablation.heads.enable_heads`.
    """
    if method == "prefix":
        method = "naive"
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
    if method == "naive":
        return naive_pruned_logits(model, batches, masks, n_examples, mode, progress=progress)
    return fast_pruned_logits(model, batches, masks, n_examples, mode, config_batch, progress=progress)


# --------------------------------------------------------------------------------------------------
# the curves
# --------------------------------------------------------------------------------------------------

def pruning_plan(importance: np.ndarray, fractions: np.ndarray, seeds: Sequence[int]) -> tuple[pd.DataFrame, np.ndarray]:
    """Every configuration of the curves: the importance order, then one random order per seed.

    -> (plan with columns order ("importance" | "random"), seed (<NA> for importance), fraction, n_pruned;
    masks (C, L, H) bool), one row per configuration.
    """
    n_layers, n_heads = np.asarray(importance).shape
    total = n_layers * n_heads
    orders = [("importance", pd.NA, importance_order(importance))]
    orders += [("random", int(s), random_order(total, int(s))) for s in seeds]
    rows, masks = [], []
    for name, seed, order in orders:
        masks.append(order_masks(order, fractions, n_layers, n_heads))
        rows += [{"order": name, "seed": seed, "fraction": float(f), "n_pruned": n_pruned(f, total)} for f in fractions]
    plan = pd.DataFrame(rows)
    plan["seed"] = plan["seed"].astype("Int64")
    return plan, np.concatenate(masks)


def pruning_table(plan: pd.DataFrame, logits: np.ndarray, labels: np.ndarray, metrics: Sequence[str],
                  regression: bool, mode: str) -> pd.DataFrame:
    """Long table, one row per configuration and metric: order, seed, fraction, n_pruned, metric, value, mode.

    logits: (C, E, K) in the plan's row order; labels (E,).
    """
    from bertology.models.metrics import batched_metric, predictions_from_logits

    preds = predictions_from_logits(logits, regression)                  # (C, E)
    frames = []
    for metric in metrics:
        frames.append(plan.assign(metric=metric, value=batched_metric(metric, np.asarray(labels), preds), mode=mode))
    cols = ["order", "seed", "fraction", "n_pruned", "metric", "value", "mode"]
    return pd.concat(frames, ignore_index=True)[cols]

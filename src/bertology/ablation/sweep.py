"""Disabling sweeps: every head alone, then every layer, over an evaluation set (Kovaleva et al. 4.6).

Three strategies give the same logits up to float rounding; :func:`resolve_sweep` picks one and :func:`run_sweep`
runs it:

- the *naive* sweep (this module): one full forward pass over the eval set per configuration, any model
  :func:`~bertology.ablation.heads.enable_heads` accepts;
- the *fast* sweep (:mod:`bertology.ablation.sweep_fast`, BERT-layer encoders: BERT, RoBERTa, ELECTRA): per
  batch the layers run once, and each configuration of layer l resumes from layer l's cached queries/keys/values
  with the disabled heads' contexts made uniform, several configurations stacked along the batch;
- the *prefix* sweep (:mod:`bertology.ablation.sweep_prefix`, every other model whose layers are one list called
  in order: decoders such as Llama, GPT-2, Qwen; DistilBERT, ModernBERT, DeBERTa-v2, ...): per batch one forward
  pass keeps each layer's output; the configurations of layer l run the model's own forward, stacked along the
  batch, with layers 0..l-1 replaying their kept outputs, which saves about half the layer passes.

:func:`resolve_sweep` picks "fast", else "prefix", else the naive sweep. What the strategies share (a model's
inputs and outputs, stacking configurations along the batch) is :mod:`bertology.ablation.stacking`.
The model must have been passed through :func:`bertology.ablation.heads.enable_heads`.

Glossary: E examples, N rows of a batch, T padded length, L layers, H heads, dh head size, d hidden
size, C configurations, K logits per example (classes, or 1 for regression), Q query positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from bertology.ablation.heads import disabled_heads
from bertology.ablation.stacking import n_outputs
from bertology.ablation.sweep_fast import fast_plan, fast_sweep
from bertology.ablation.sweep_prefix import prefix_plan, prefix_sweep
from bertology.models.encoding import Batch, encode_frame, pad_rows

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


def make_batches(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]] | None, pad_id: int,
                 batch_size: int) -> list[Batch]:
    """Group examples by length (longest first) into padded batches (:func:`bertology.models.encoding.pad_rows`;
    token_type_ids None: the model is given none); every sweep uses the same batches."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    lengths = np.array([len(x) for x in input_ids])
    order = np.argsort(-lengths, kind="stable")
    return [pad_rows(input_ids, token_type_ids, order[start:start + batch_size], pad_id)
            for start in range(0, len(order), batch_size)]


# --------------------------------------------------------------------------------------------------
# The naive sweep: one full forward pass per configuration
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def forward_logits(model, batches: Sequence[Batch], disabled: torch.Tensor | None, n_examples: int) -> np.ndarray:
    """Full forward passes over all batches with the given (L, H) heads disabled -> (E, K) float64 logits."""
    device = next(model.parameters()).device
    out = np.zeros((n_examples, n_outputs(model)))
    mask = None if disabled is None or not bool(disabled.any()) else disabled.to(device)
    with disabled_heads(model, mask):
        for batch in batches:
            logits = model(**batch.to(device).inputs()).logits
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
# Running a sweep
# --------------------------------------------------------------------------------------------------

def encode_batches(tokenizer, df: pd.DataFrame, max_length: int, batch_size: int) -> list[Batch]:
    """Tokenise a prepared frame ([CLS] a [SEP] (b [SEP]), truncated) into length-grouped padded batches."""
    enc = encode_frame(tokenizer, df, max_length)
    return make_batches(enc.input_ids, enc.token_type_ids, tokenizer.pad_token_id or 0, batch_size)


def resolve_sweep(model, requested: str) -> tuple[str, str | None]:
    """The sweep to run for `requested` ("fast" or "naive") on `model`, and why it is naive (None if not).

    "fast" gives "fast" on a BERT-layer encoder (:func:`~bertology.ablation.sweep_fast.fast_plan`), else "prefix"
    on a model whose layers the prefix sweep can skip (:func:`~bertology.ablation.sweep_prefix.prefix_plan`:
    decoders, DistilBERT, ModernBERT, ...), else "naive" with the prefix sweep's reason; all three give the same
    outputs. "naive" gives "naive".
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

    sweep: "fast" (:func:`~bertology.ablation.sweep_fast.fast_sweep`, BERT-layer encoders: see
    :func:`~bertology.ablation.sweep_fast.fast_plan`), "prefix"
    (:func:`~bertology.ablation.sweep_prefix.prefix_sweep`, models whose layers run in order: see
    :func:`~bertology.ablation.sweep_prefix.prefix_plan`) or "naive"
    (:func:`naive_sweep`, any model :func:`~bertology.ablation.heads.enable_heads` accepts); use
    :func:`resolve_sweep` to pick one for the config's ablation.sweep. config_batch: configurations stacked
    along the batch, at most (:func:`~bertology.ablation.stacking.effective_config_batch`); the naive sweep runs
    one at a time.
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
